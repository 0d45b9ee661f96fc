import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { labDown, labUp, type LabHost, type LabState } from '@niclab/cli/lab/lab';
import { command } from '@niclab/shared/command';
import { ApiClient } from './api-client.js';
import { spawnNiclab, waitFor, type NiclabProcess } from './processes.js';
import { freePort, startTestRedis, uniquePrefix, type TestRedis } from './redis.js';

export { NOT_ROOT } from './skip.js';

export interface TestLab {
  lab: LabState;
  client: ApiClient;
  api: NiclabProcess;
  redis: TestRedis;
  dataDir: string;
  env: Record<string, string>;
  close(): Promise<void>;
}

/** A lab of its own (unique name and key prefix), a real API process, and agents online. */
export async function startTestLab(hosts: number, rate: string): Promise<TestLab> {
  const redis = await startTestRedis();
  const dataDir = mkdtempSync(join(tmpdir(), 'niclab-lab-'));
  const name = `t${randomBytes(4).toString('hex')}`;
  const prefix = uniquePrefix();
  const port = await freePort();
  const env = { REDIS_URL: redis.url, NICLAB_PREFIX: prefix, NICLAB_PORT: String(port), NICLAB_HEARTBEAT_SECONDS: '1', NICLAB_SETUP_SECONDS: '5', NICLAB_DATA_DIR: dataDir };
  let lab: LabState | undefined;
  let api: NiclabProcess | undefined;
  const close = async () => {
    await labDown(dataDir, name).catch(() => undefined);
    await api?.stop();
    await redis.stop();
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    lab = await labUp({ name, hosts, rate, redisUrl: redis.url, prefix, dataDir, heartbeatSeconds: 1, logLevel: 'warn' });
    api = spawnNiclab(['api'], env);
    const client = new ApiClient(`http://127.0.0.1:${port}`);
    await waitFor('the API', async () => (await fetch(`${client.base}/readyz`)).ok);
    await waitFor('every lab agent online', async () => {
      const { body } = await client.call('listAgents', 'GET', '/v1/agents');
      return lab!.hosts.every((h) => body.items.some((a: { id: string; online: boolean }) => a.id === h.agentId && a.online));
    }, 20_000);
    return { lab, client, api, redis, dataDir, env, close };
  } catch (error) {
    await close();
    throw error;
  }
}

export const eth1 = (agent: string) => ({ agent, interface: 'eth1' });
export const flow = (from: string, to: string) => ({ from: eth1(from), to: eth1(to) });
export const mbit = (bitsPerSecond: number) => bitsPerSecond / 1e6;

/** One counter of a namespace's /proc/net/snmp, e.g. ('Tcp', 'RetransSegs') or ('Udp', 'RcvbufErrors'). */
export async function snmpCounter(namespace: string, protocol: string, name: string): Promise<number> {
  const lines = (await command('ip', ['netns', 'exec', namespace, 'cat', '/proc/net/snmp'])).split('\n').filter((l) => l.startsWith(`${protocol}:`));
  const column = lines[0]!.split(/\s+/).indexOf(name);
  if (column < 0) throw new Error(`no ${protocol} ${name} in /proc/net/snmp`);
  return Number(lines[1]!.split(/\s+/)[column]);
}

function run(argv: string[], timeoutMs: number): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c));
    child.stderr.on('data', (c: Buffer) => (stderr += c));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

/** Bare iperf3 between two lab hosts (a reference for tests and benchmarks) with the given client options; returns the client's JSON. */
export async function bareIperf3(from: LabHost, to: LabHost, seconds: number, options: string[] = []): Promise<any> {
  const port = await freePort();
  const server = run(['ip', 'netns', 'exec', to.namespace, 'iperf3', '-s', '-1', '-B', to.address, '-p', String(port), '--json', '--idle-timeout', String(seconds + 30)], (seconds + 40) * 1000);
  const deadline = Date.now() + 5000;
  while (!(await command('ip', ['netns', 'exec', to.namespace, 'ss', '-Hltn', `sport = :${port}`])).trim()) {
    if (Date.now() > deadline) throw new Error('bare iperf3 server did not listen');
    await new Promise((r) => setTimeout(r, 20));
  }
  const client = await run(['ip', 'netns', 'exec', from.namespace, 'iperf3', '-c', to.address, '-p', String(port), '-B', from.address, '-t', String(seconds), '--json', ...options], (seconds + 40) * 1000);
  const serverOut = await server;
  if (client.code !== 0) throw new Error(`bare iperf3 failed: ${client.stderr || client.stdout.slice(0, 500)}`);
  return { client: JSON.parse(client.stdout), server: JSON.parse(serverOut.stdout) };
}
