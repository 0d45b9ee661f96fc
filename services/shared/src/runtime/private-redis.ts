import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { createRedis } from './redis.js';

export interface PrivateRedis {
  /** unix:///… URL of its socket. */
  url: string;
  pid: number;
  process: ChildProcess;
  stop(): Promise<void>;
}

/**
 * Starts a redis-server of our own in `dir`, on a unix socket (reachable from network
 * namespaces on this machine) and, when `port` is given, on 127.0.0.1:port. AOF with fsync
 * every second, so an accepted job survives a crash of Redis.
 */
export async function startPrivateRedis(
  dir: string,
  options: { port?: number; appendonly?: boolean; killOnSignal?: boolean } = {},
): Promise<PrivateRedis> {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const socket = join(dir, 'redis.sock');
  const args = [
    '--port', String(options.port ?? 0), '--bind', '127.0.0.1',
    '--unixsocket', socket, '--unixsocketperm', '700',
    '--dir', dir, '--save', '', '--daemonize', 'no',
    '--appendonly', options.appendonly === false ? 'no' : 'yes', '--appendfsync', 'everysec',
    '--maxmemory-policy', 'noeviction', '--loglevel', 'warning',
  ];
  // Its own process group: a terminal's Ctrl-C reaches the whole foreground group, and Redis
  // must outlive the orderly shutdown that needs it; its owner stops it last.
  const child = spawn('redis-server', args, { stdio: ['ignore', 'ignore', 'pipe'], detached: true });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const spawnError = new Promise<never>((_, reject) =>
    child.once('error', (error: NodeJS.ErrnoException) =>
      reject(error.code === 'ENOENT' ? new Error('redis-server is not installed (apt-get install redis-server), or set REDIS_URL') : error),
    ),
  );
  const url = `unix://${socket}`;
  const ready = (async () => {
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      if (child.exitCode !== null) throw new Error(`redis-server exited: ${stderr.trim()}`);
      const probe = createRedis(url, { name: 'niclab-probe' });
      probe.on('error', () => undefined);
      try {
        await probe.ping();
        return;
      } catch {
        await new Promise((r) => setTimeout(r, 50));
      } finally {
        probe.disconnect();
      }
    }
    throw new Error(`redis-server did not answer within 10 s: ${stderr.trim()}`);
  })();
  try {
    await Promise.race([ready, spawnError]);
  } catch (error) {
    child.kill('SIGKILL');
    throw error;
  }
  // Never outlive the process that started it. Owners with an orderly shutdown of their own
  // (niclab start) stop it last themselves; others (tests) ask for it to go at the first signal.
  const killOnExit = () => child.kill('SIGKILL');
  process.once('exit', killOnExit);
  const onSignal = (signal: NodeJS.Signals) => {
    killOnExit();
    // Nobody else handles it: keep the signal's default effect (terminate) by raising it again.
    if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
  };
  if (options.killOnSignal) {
    process.once('SIGTERM', onSignal);
    process.once('SIGINT', onSignal);
  }
  const stop = async () => {
    process.removeListener('exit', killOnExit);
    process.removeListener('SIGTERM', onSignal);
    process.removeListener('SIGINT', onSignal);
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    }
  };
  return { url, pid: child.pid!, process: child, stop };
}
