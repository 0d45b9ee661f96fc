/**
 * `niclab completion bash|zsh`: a shell completion script. Its commands and each command's
 * flags are read from the usage text (`niclab CMD --help` prints the same lines), so a flag
 * documented there is completed and one that is not is not.
 */
import { CLIENT_COMMANDS } from './client/commands.js';
import { helpFor } from './help.js';
import { USAGE } from './usage.js';

export const SERVICE_COMMANDS = ['start', 'api', 'agent', 'coordinator', 'lab', 'token', 'completion'] as const;

/** Words after a command that are not flags: its actions. */
const ACTIONS: Record<string, string[]> = {
  schedules: ['list', 'show', 'pause', 'resume', 'delete', 'create'],
  changes: ['list', 'ack'],
  lab: ['up', 'add', 'status', 'down'],
  completion: ['bash', 'zsh'],
};

/** The flags a command's usage lines name (`--from`, `-t`), and --help; the scripting commands' --api, --token and --json too. */
export function flagsOf(command: string): string[] {
  const help = helpFor(USAGE, command) ?? '';
  const flags = new Set<string>(['--help']);
  for (const [flag] of help.matchAll(/--[a-z][a-z-]*/g)) flags.add(flag);
  for (const [, flag] of help.matchAll(/[[\s(|](-[A-Za-z])(?=[\s\]])/g)) flags.add(flag!);
  if ((CLIENT_COMMANDS as readonly string[]).includes(command)) for (const flag of ['--api', '--token', '--json']) flags.add(flag);
  // `schedules create NAME ... RUN-OPTIONS`: a schedule's job takes run's flags.
  if (help.includes('RUN-OPTIONS')) for (const flag of flagsOf('run')) flags.add(flag);
  return [...flags].sort();
}

function bashFunction(): string {
  const commands = [...SERVICE_COMMANDS, ...CLIENT_COMMANDS];
  const cases = commands.map((c) => `    ${c}) words="${[...(ACTIONS[c] ?? []), ...flagsOf(c)].join(' ')}" ;;`).join('\n');
  return `_niclab() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" words
  if [ "$COMP_CWORD" -eq 1 ]; then
    COMPREPLY=($(compgen -W "${commands.join(' ')} --help --version" -- "$cur"))
    return 0
  fi
  case "\${COMP_WORDS[1]}" in
${cases}
    *) words="" ;;
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}`;
}

/** The script for `shell`, or null for a shell it does not know. */
export function completionScript(shell: string | undefined): string | null {
  if (shell === 'bash') return `# niclab completion for bash: source <(niclab completion bash), or save it in /etc/bash_completion.d/niclab\n${bashFunction()}\ncomplete -F _niclab niclab`;
  if (shell === 'zsh') {
    return `#compdef niclab
# niclab completion for zsh: source <(niclab completion zsh) in ~/.zshrc (after compinit). zsh runs the
# bash function through bashcompinit.
autoload -U +X bashcompinit && bashcompinit
${bashFunction()}
complete -F _niclab niclab`;
  }
  return null;
}
