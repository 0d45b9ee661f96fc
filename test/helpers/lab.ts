import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { labDown, labUp, type LabState } from '@niclab/cli/lab/lab';
import { command } from '@niclab/shared/command';
import { ApiClient } from './api-client.js';
import { spawnNiclab, waitFor, type NiclabProcess } from './processes.js';
import { freePort, startTestRedis, uniquePrefix, type TestRedis } from './redis.js';

export const NOT_ROOT = process.getuid?.() !== 0 ? 'needs root: the virtual lab creates network namespaces (CI runs as root)' : false;

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
