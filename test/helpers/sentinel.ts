import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Redis } from 'ioredis';
import { parse } from 'yaml';
import { waitFor } from './processes.js';
import { freePort } from './redis.js';
import { startTcpProxy, type TcpProxy } from './tcp-proxy.js';

const DEPLOY = fileURLToPath(new URL('../../deploy/', import.meta.url));
/** Where the compose file mounts deploy/redis in its containers. */
const MOUNT = '/etc/niclab-redis/';
export const SET_PASSWORD = 'sentinel-test-password';

/** One redis-server of the set (a Redis or a sentinel), started by its compose service's entrypoint. */
export interface SetNode {
  name: string;
  child: ChildProcess;
  /** What the script printed (which role it chose) and the server's log. */
  output(): string;
  exited: Promise<unknown>;
}

/**
 * deploy/compose.sentinel.yaml's Redis and sentinels, started for real on loopback: each by its
 * service's own entrypoint (deploy/redis's scripts) and environment, with the ports mapped to
 * free ones, /data to a folder of the test's and REDIS_PASSWORD set. `start(name)` starts a node
 * again as its container would be restarted: the script asks the sentinels who the master is.
 *
 * With `link`, redis-0 (the first master) is reached by everyone through a relay, its host's
 * network: the sentinels know it by the relay's port, and so does the replica it feeds, whose
 * stream the relay delivers `replicationLagMs` late. `link.cut()` beside its SIGKILL is the
 * loss of its host: what the network still held for the replica is lost with it.
 */
export interface SentinelSet {
  masterName: string;
  nodes: Map<string, SetNode>;
  /** Where the others reach the Redis nodes (redis-0 through its relay, with `link`). */
  port(name: 'redis-0' | 'redis-1'): number;
  link: TcpProxy | null;
  sentinelPorts: number[];
  /** The environment compose gives the API, mapped as the set is. */
  apiEnv: Record<string, string>;
  start(name: string): SetNode;
  /** Signals a node (SIGKILL, SIGSTOP, SIGCONT). */
  signal(name: string, signal: NodeJS.Signals): void;
  /** The master's port as the first sentinel names it. */
  master(): Promise<number>;
  stop(): Promise<void>;
}

/** A command sent to a server on loopback over a connection of its own (with the set's password for a Redis). */
export async function ask<T>(port: number, ...command: [string, ...(string | number)[]]): Promise<T> {
  // A sentinel has no password; a Redis of the set has the set's.
  const password = command[0] === 'sentinel' ? undefined : SET_PASSWORD;
  const redis = new Redis({ port, host: '127.0.0.1', password, lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: () => null, connectTimeout: 2000 });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    return (await redis.call(...command)) as T;
  } finally {
    redis.disconnect();
  }
}

/** Resolves once `pid` has exited (a zombie not yet reaped counts: its exit event was seen to come late). */
async function gone(pid: number): Promise<void> {
  for (;;) {
    try {
      const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
      if (stat.slice(stat.lastIndexOf(')') + 2).startsWith('Z')) return;
    } catch {
      return;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

interface Service {
  entrypoint: string[];
  environment: Record<string, string>;
}

export async function startSentinelSet({ downAfterMs, replicationLagMs = 0, link: withLink = false }: { downAfterMs?: number; replicationLagMs?: number; link?: boolean } = {}): Promise<SentinelSet> {
  const { services } = parse(readFileSync(join(DEPLOY, 'compose.sentinel.yaml'), 'utf8')) as { services: Record<string, Service> };
  const names = ['redis-0', 'redis-1', 'sentinel-0', 'sentinel-1', 'sentinel-2'];
  // The file's ports, each mapped to a free one.
  const ports = new Map<string, number>();
  for (const name of names) {
    const env = services[name]!.environment;
    ports.set(env.REDIS_PORT ?? env.SENTINEL_PORT!, await freePort());
  }
  const link = withLink ? await startTcpProxy(ports.get(services['redis-0']!.environment.REDIS_PORT!)!, { replicationLagMs }) : null;
  const mapped = (value: string) =>
    value
      .replace(/\$\{REDIS_PASSWORD:-[^}]*\}/g, SET_PASSWORD)
      .replace(/127\.0\.0\.1:(\d+)/g, (_, port: string) => `127.0.0.1:${port === services['redis-0']!.environment.REDIS_PORT && link ? link.port : ports.get(port)}`)
      .replace(/^\d+$/, (port) => String(ports.get(port) ?? port));
  const dir = mkdtempSync(join(tmpdir(), 'niclab-sentinel-'));
  const envOf = (name: string): Record<string, string> => {
    const env = Object.fromEntries(Object.entries(services[name]!.environment).map(([k, v]) => [k, mapped(String(v))]));
    const data = join(dir, name);
    mkdirSync(data, { recursive: true });
    if (env.REDIS_DATA) env.REDIS_DATA = data;
    if (env.SENTINEL_DATA) env.SENTINEL_DATA = data;
    if (name === 'redis-0' && link) env.REDIS_ANNOUNCE_PORT = String(link.port);
    if (name.startsWith('sentinel-') && downAfterMs !== undefined) env.SENTINEL_DOWN_AFTER_MS = String(downAfterMs);
    return { PATH: process.env.PATH ?? '/usr/bin:/bin', ...env };
  };
  const portOf = (name: string) => Number(envOf(name).REDIS_PORT ?? envOf(name).SENTINEL_PORT);
  const announced = (name: 'redis-0' | 'redis-1') => (name === 'redis-0' && link ? link.port : portOf(name));
  const nodes = new Map<string, SetNode>();
  const start = (name: string): SetNode => {
    const [shell, script, ...args] = services[name]!.entrypoint;
    // The script execs the server: the child's PID is the server's.
    const child = spawn(shell!, [join(DEPLOY, 'redis', script!.replace(MOUNT, '')), ...args], { env: envOf(name), stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const node = { name, child, output: () => output, exited: new Promise((resolve) => child.once('exit', resolve)) };
    nodes.set(name, node);
    return node;
  };
  const running = (node: SetNode) => node.child.exitCode === null && node.child.signalCode === null;
  const signal = (node: SetNode, which: NodeJS.Signals) => {
    try {
      process.kill(node.child.pid!, which);
    } catch {
      // gone already
    }
  };
  const sentinelPorts = [0, 1, 2].map((i) => portOf(`sentinel-${i}`));
  const masterName = services['sentinel-0']!.environment.SENTINEL_MASTER!;
  const set: SentinelSet = {
    masterName,
    nodes,
    port: announced,
    link,
    sentinelPorts,
    apiEnv: Object.fromEntries(Object.entries(services.api!.environment).map(([k, v]) => [k, mapped(String(v))])),
    start,
    signal(name, which) {
      const node = nodes.get(name);
      if (node && running(node)) signal(node, which);
    },
    async master() {
      const [, port] = await ask<string[]>(sentinelPorts[0]!, 'sentinel', 'get-master-addr-by-name', masterName);
      return Number(port);
    },
    async stop() {
      for (const node of nodes.values()) {
        if (!running(node)) continue;
        // A frozen server would never see a SIGTERM.
        signal(node, 'SIGCONT');
        signal(node, 'SIGTERM');
        // A replica still writing its first AOF after a full sync refuses a SIGTERM ("Writing initial AOF, can't exit").
        const killer = setTimeout(() => signal(node, 'SIGKILL'), 2000);
        await Promise.race([node.exited, gone(node.child.pid!)]);
        clearTimeout(killer);
      }
      await link?.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
  try {
    // As compose starts them: the Redis nodes first, the sentinels once redis-0 is healthy. No
    // sentinel answers yet, so redis-0 starts as the master and redis-1 as its replica.
    start('redis-0');
    start('redis-1');
    await waitFor('redis-0', () => ask(announced('redis-0'), 'ping'), 10_000, 50);
    for (const i of [0, 1, 2]) start(`sentinel-${i}`);
    await waitFor('the replica in sync', async () => /master_link_status:up/.test(await ask<string>(portOf('redis-1'), 'info', 'replication')), 20_000, 100);
    // Each sentinel must know the replica and the other two before the master can fail over.
    await waitFor('the sentinels to know each other and the replica', async () => {
      for (const port of sentinelPorts) {
        const master = await ask<string[]>(port, 'sentinel', 'master', masterName);
        const field = (name: string) => Number(master[master.indexOf(name) + 1]);
        if (field('num-other-sentinels') < 2 || field('num-slaves') < 1) return false;
      }
      return true;
    }, 30_000, 200);
  } catch (error) {
    await set.stop();
    throw error;
  }
  return set;
}
