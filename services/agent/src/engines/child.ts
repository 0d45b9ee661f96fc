import { fork, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { ErrorInfo, Interval } from '@niclab/shared/domain/contract';
import { toRunError } from '@niclab/shared/domain/run-errors';
import type { ChildMessage } from './child-protocol.js';


/** What the agent hears from an engine child while it runs. */
export interface ChildHooks {
  ready(port: number): void;
  /** A sender has loaded and warmed its code, and waits for the run's start. */
  armed?(): void;
  spawned?(pid: number): void;
  /** A receiver's interval sample, as it is taken. */
  interval?(sample: Interval): void;
}

export interface ChildOutcome<R> {
  result: R | null;
  error: ErrorInfo | null;
  argv: string[];
}

/** Turns an abort reason into the run's error: deadline, cancel and shutdown each have a code. */
export function abortError(signal: AbortSignal): ErrorInfo {
  return toRunError(signal.reason, 'canceled', 'The run was canceled.');
}

let builtChildren = false;
/**
 * Agents run from source (under tsx) start their engine children from the compiled dist/
 * instead, with plain node: a tsx child took 1 s of CPU to start, a compiled one 0.2 s. For
 * tests that run agents in-process, after `npm run build` (npm test builds first).
 */
export function useBuiltEngineChildren(): void {
  builtChildren = true;
}

/** A sibling module of the caller, as .ts under tsx and .js once compiled (or as useBuiltEngineChildren asks). */
export function siblingScript(importMetaUrl: string, name: string): string {
  if (!importMetaUrl.endsWith('.ts')) return fileURLToPath(new URL(`./${name}.js`, importMetaUrl));
  const source = fileURLToPath(new URL(`./${name}.ts`, importMetaUrl));
  if (!builtChildren) return source;
  const built = source.replace(/\/src\/(?!.*\/src\/)/, '/dist/').replace(/\.ts$/, '.js');
  // Not compared by mtime: tsc -b emits no file whose source did not change, so a checkout that
  // only touches a source would read as stale. npm test builds before it runs.
  if (!existsSync(built)) throw new Error(`${built} is not built: run npm run build`);
  return built;
}

/**
 * The Node flags of an engine child: the agent's own where the child is its sibling; none for a
 * compiled child of an agent run from source, whose flags (tsx, the source condition, in any
 * spelling) are for .ts modules.
 */
const execArgvFor = (script: string) => (script.endsWith('.js') && import.meta.url.endsWith('.ts') ? [] : process.execArgv);

/**
 * Runs an engine in its own Node process, so its CPU time is its own and a kill really ends it.
 * The child gets `input` as its first IPC message. On abort the child is killed with SIGKILL
 * and the outcome carries the abort's error; the child also exits if this process dies.
 */
export function runNodeChild<R>(
  script: string,
  input: object,
  signal: AbortSignal,
  hooks: ChildHooks,
): Promise<ChildOutcome<R>> {
  const execArgv = execArgvFor(script);
  const argv = [process.execPath, ...execArgv, script];
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve({ result: null, error: abortError(signal), argv });
      return;
    }
    const child = fork(script, [], { execArgv, stdio: ['ignore', 'ignore', 'pipe', 'ipc'], serialization: 'json' });
    if (child.pid !== undefined) hooks.spawned?.(child.pid);
    let stderr = '';
    let settled: ChildOutcome<R> | null = null;
    const settle = (outcome: ChildOutcome<R>) => {
      settled ??= outcome;
    };
    const onAbort = () => {
      settle({ result: null, error: abortError(signal), argv });
      child.kill('SIGKILL');
    };
    signal.addEventListener('abort', onAbort, { once: true });
    child.stderr?.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-2000);
    });
    child.on('message', (message: ChildMessage<R>) => {
      if (message.type === 'ready') hooks.ready(message.port);
      else if (message.type === 'armed') hooks.armed?.();
      else if (message.type === 'interval') hooks.interval?.(message.interval);
      else if (message.type === 'result') settle({ result: message.result, error: null, argv });
      else if (message.type === 'error') settle({ result: null, error: message.error, argv });
    });
    child.on('error', (error) => settle({ result: null, error: { code: 'engine_failed', message: error.message }, argv }));
    // 'close', not 'exit': it comes once the IPC channel has closed too, so a result sent just
    // before the child exited has been heard (on 'exit' it could still be in the pipe).
    child.on('close', (code, exitSignal) => {
      signal.removeEventListener('abort', onAbort);
      resolve(
        settled ?? {
          result: null,
          error: { code: 'engine_failed', message: `engine process exited (${exitSignal ?? `code ${code}`}) without a result${stderr ? `: ${stderr.trim()}` : ''}` },
          argv,
        },
      );
    });
    child.send(input as Parameters<typeof child.send>[0]);
  });
}

export interface ProcessOutcome {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** The abort's error when the process was killed for it. */
  aborted: ErrorInfo | null;
  spawnError: Error | null;
}

/**
 * util-linux's setpriv sets the parent-death signal and then runs the tool: if the agent dies
 * (even SIGKILL), the kernel kills the tool too, so no iperf3 outlives the agent that started
 * it. Where setpriv is missing the tool runs without it (and ends at its own -t).
 */
const SETPRIV = ['/usr/bin/setpriv', '/bin/setpriv'].find((path) => existsSync(path));
const dieWithAgent = (argv: string[]): string[] => (SETPRIV ? [SETPRIV, '--pdeathsig', 'KILL', '--', ...argv] : argv);

/** At most this much of a tool's stdout is kept (iperf3's JSON of a long run with many streams). */
const MAX_STDOUT = 64 * 1024 * 1024;

/**
 * Runs a tool (argument array, no shell) until it exits or the signal aborts, in which case
 * it is killed with SIGKILL. Never rejects: every way it can end is in the outcome.
 */
export function runProcess(argv: string[], signal: AbortSignal, onSpawn?: (pid: number) => void): Promise<ProcessOutcome> {
  return new Promise((resolve) => {
    if (signal.aborted) {
      resolve({ code: null, signal: null, stdout: '', stderr: '', aborted: abortError(signal), spawnError: null });
      return;
    }
    const [file, ...args] = dieWithAgent(argv);
    const child = spawn(file!, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    if (child.pid !== undefined) onSpawn?.(child.pid);
    let stdout = '';
    let stderr = '';
    let aborted: ErrorInfo | null = null;
    let spawnError: Error | null = null;
    const onAbort = () => {
      aborted = abortError(signal);
      child.kill('SIGKILL');
    };
    signal.addEventListener('abort', onAbort, { once: true });
    child.stdout.on('data', (chunk: Buffer) => {
      if (stdout.length < MAX_STDOUT) stdout += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr = (stderr + chunk.toString()).slice(-4000);
    });
    child.on('error', (error) => {
      spawnError = error;
    });
    child.on('close', (code, exitSignal) => {
      signal.removeEventListener('abort', onAbort);
      resolve({ code, signal: exitSignal, stdout, stderr, aborted, spawnError });
    });
  });
}
