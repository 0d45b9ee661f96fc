import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { CLIENT_COMMANDS, CLIENT_OPTIONS } from '@niclab/cli/client/commands';
import { flagsOf } from '@niclab/cli/completion';
import { runNiclab } from '../helpers/processes.js';
import { skipUnlessProvided } from '../helpers/skip.js';

/**
 * `niclab completion bash|zsh`, sourced into the real shells and asked what a user's Tab would
 * be: the functions are called as the shells' completion systems call them (bash sets
 * COMP_WORDS and COMP_CWORD; zsh's bashcompinit does the same with ksharrays, and zsh then
 * keeps the words that start with what was typed).
 */
const exec = promisify(execFile);
const CLI = fileURLToPath(new URL('../../services/cli/dist/main.js', import.meta.url));

/** Each shell's script, written once by `niclab completion SHELL`. */
const scripts = { bash: '', zsh: '' };
let dir = '';
before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'niclab-completion-'));
  for (const shell of ['bash', 'zsh'] as const) {
    scripts[shell] = join(dir, shell);
    writeFileSync(scripts[shell], (await exec(process.execPath, [CLI, 'completion', shell])).stdout);
  }
});
after(() => rmSync(dir, { recursive: true, force: true }));

/** What the shell completes after `words` (the last one the word under the cursor). */
async function complete(shell: 'bash' | 'zsh', words: string[]): Promise<string[]> {
  const quoted = words.map((w) => `'${w}'`).join(' ');
  const script = shell === 'bash'
    ? `source ${scripts.bash}; COMP_WORDS=(${quoted}); COMP_CWORD=${words.length - 1}; _niclab; printf '%s\\n' "\${COMPREPLY[@]}"`
    : `autoload -U compinit && compinit -u; source ${scripts.zsh}; setopt ksharrays; COMP_WORDS=(${quoted}); COMP_CWORD=${words.length - 1}; _niclab; print -l -- "\${COMPREPLY[@]}"`;
  const { stdout, stderr } = await exec(shell, ['-c', script], { env: { PATH: process.env.PATH ?? '', HOME: '/nonexistent' } });
  assert.equal(stderr, '', `${shell} said nothing while sourcing and completing`);
  const offered = stdout.split('\n').filter(Boolean);
  // Outside a completion widget bashcompinit's compgen does not filter by the word typed; in
  // one zsh does that itself (compadd matches the prefix), as done here.
  return shell === 'zsh' ? offered.filter((w) => w.startsWith(words.at(-1)!)) : offered;
}

for (const shell of ['bash', 'zsh'] as const) {
  test(`${shell}: commands, a command's flags and actions, nothing for what is not one`, { skip: skipUnlessProvided(shell === 'zsh' && !existsSync('/usr/bin/zsh') && 'needs zsh (Debian: zsh)') }, async () => {
    assert.deepEqual(await complete(shell, ['niclab', 're']), ['report', 'results']);
    assert.deepEqual(await complete(shell, ['niclab', 'run', '--fr']), ['--from', '--from-file']);
    assert.deepEqual(await complete(shell, ['niclab', 'results', '--j']), ['--json', '--jsonl']);
    assert.deepEqual(await complete(shell, ['niclab', 'schedules', 'p']), ['pause']);
    assert.deepEqual(await complete(shell, ['niclab', 'search', '--latency']), ['--latency-at']);
    assert.deepEqual(await complete(shell, ['niclab', 'completion', '']), ['bash', 'zsh', '--help']);
    assert.deepEqual(await complete(shell, ['niclab', 'job', '--st']), [], 'job takes no --status: only jobs does');
    assert.deepEqual(await complete(shell, ['niclab', 'nonsense', '--']), []);
  });
}

test('every flag completed is one the command line accepts, and each command with help completes', async () => {
  const accepted = new Set(Object.entries(CLIENT_OPTIONS).flatMap(([name, o]) => [`--${name}`, ...('short' in o ? [`-${o.short}`] : [])]));
  for (const command of CLIENT_COMMANDS) {
    const flags = flagsOf(command);
    assert.ok(flags.length > 3, `${command}: ${flags.join(' ')}`);
    for (const flag of flags) assert.ok(accepted.has(flag), `niclab ${command} completes ${flag}, which it does not accept`);
  }
  const bad = await runNiclab(['completion', 'fish'], {});
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /completion: give bash or zsh, not "fish"/);
});
