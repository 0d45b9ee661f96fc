import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const CLI = fileURLToPath(new URL('../../services/cli/dist/main.js', import.meta.url));

export interface NiclabProcess {
  child: ChildProcess;
  pid: number;
  output(): string;
  /** Resolves with the exit code (or signal) once the process has exited. */
  exited: Promise<number | string>;
  stop(signal?: NodeJS.Signals): Promise<number | string>;
}

/**
 * Starts the compiled `niclab` command as a real process (npm test builds it first).
 * `group`: in a process group of its own, as a shell's foreground job is, so a test can
 * signal the whole group the way a terminal's Ctrl-C does. `netns`: inside that network namespace.
 */
export function spawnNiclab(args: string[], env: Record<string, string>, options: { group?: boolean; netns?: string } = {}): NiclabProcess {
  // `ip netns exec` execs the command in place: the PID is niclab's.
  const argv = options.netns ? ['ip', ['netns', 'exec', options.netns, process.execPath, CLI, ...args]] as const : [process.execPath, [CLI, ...args]] as const;
  const child = spawn(argv[0], argv[1], {
    env: { PATH: process.env.PATH ?? '/usr/bin:/bin', NICLAB_LOG_LEVEL: 'info', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.group ?? false,
  });
  let output = '';
  child.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)));
  return {
    child,
    pid: child.pid!,
    output: () => output,
    exited,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      const result = await exited;
      clearTimeout(timer);
      return result;
    },
  };
}

/** Runs the compiled `niclab` command to its end, as a user at a shell would (only PATH and `env` set). */
export function runNiclab(args: string[], env: Record<string, string>, timeoutMs = 60_000): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', ...env }, timeout: timeoutMs }, (error, stdout, stderr) => {
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr });
    });
  });
}

/** PIDs whose parent is `pid`, read from /proc. */
export function childPids(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(Number(entry));
    } catch {
      // exited while we looked
    }
  }
  return out;
}

export { isRunning as isAlive } from '@niclab/shared/runtime/process';

export async function waitFor<T>(what: string, probe: () => Promise<T | undefined | null | false> | T | undefined | null | false, timeoutMs = 15_000, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value) return value;
    } catch (error) {
      last = error;
    }
    await new Promise((r) => setTimeout(r, everyMs));
  }
  throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
}

/**
 * Waits for an API at `base` to answer /readyz. Starting, it compiles the contract's validators:
 * seconds of CPU, which beside other tests on a loaded 2-core machine took over 15 s.
 */
export function waitForApi(base: string, what = 'the API', timeoutMs = 60_000): Promise<boolean> {
  return waitFor(what, async () => (await fetch(`${base}/readyz`).catch(() => null))?.ok ?? false, timeoutMs);
}

/**
 * Waits until every one of `parents` has a child process (each end's engine runs), and returns all their children.
 * `why`, when given, says what the job did instead: it is read when the wait times out, and its
 * text (the job's status, its runs' errors, the agents' last log lines) goes into the error, so
 * a run that failed before its engines started on a loaded CI machine says why.
 */
export async function enginesOf(parents: number[], timeoutMs = 20_000, why?: () => Promise<string>): Promise<number[]> {
  try {
    return await waitFor('every end\'s engine to run', () => {
      const children = parents.map((pid) => childPids(pid));
      return children.every((pids) => pids.length > 0) ? children.flat() : null;
    }, timeoutMs, 50);
  } catch (error) {
    if (!why) throw error;
    throw new Error(`${(error as Error).message}; ${await why().catch((e: Error) => `(and reading why failed: ${e.message})`)}`);
  }
}


/** Sends SIGTERM to a child a test started, if it still runs, and waits until it has exited. */
export async function terminate(child: ChildProcess | undefined): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}
