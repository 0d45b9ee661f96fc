import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { spawn } from 'node:child_process';
import { labDown, labUp, type LabHost, type LabState } from '@niclab/cli/lab/lab';
import { command } from '@niclab/shared/runtime/command';
import { ApiClient } from './api-client.js';
import { spawnNiclab, waitFor, type NiclabProcess, waitForApi } from './processes.js';
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
export async function startTestLab(hosts: number, rate: string, labels?: string, fileDirs?: Record<string, string>, options: { heartbeatSeconds?: number } = {}): Promise<TestLab> {
  // Tests heartbeat every second (an agent lost is found in 3 s); a benchmark of the agent's own
  // cost asks for the product's default.
  const heartbeatSeconds = options.heartbeatSeconds ?? 1;
  const redis = await startTestRedis();
  const dataDir = mkdtempSync(join(tmpdir(), 'niclab-lab-'));
  const name = `t${randomBytes(4).toString('hex')}`;
  const prefix = uniquePrefix();
  const port = await freePort();
  const env = { REDIS_URL: redis.url, NICLAB_PREFIX: prefix, NICLAB_PORT: String(port), NICLAB_HEARTBEAT_SECONDS: String(heartbeatSeconds), NICLAB_SETUP_SECONDS: '10', NICLAB_DATA_DIR: dataDir };
  let lab: LabState | undefined;
  let api: NiclabProcess | undefined;
  const close = async () => {
    await labDown(dataDir, name).catch(() => undefined);
    await api?.stop();
    await redis.stop();
    rmSync(dataDir, { recursive: true, force: true });
  };
  try {
    lab = await labUp({ name, hosts, rate, redisUrl: redis.url, prefix, dataDir, heartbeatSeconds, logLevel: 'warn', ...(labels ? { labels } : {}), ...(fileDirs ? { fileDirs } : {}) });
    api = spawnNiclab(['api'], env);
    const client = new ApiClient(`http://127.0.0.1:${port}`);
    await waitForApi(client.base);
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

/** Packet and byte counters of one interface inside a namespace (`ip -s link`): a count of what crossed it that niclab did not make. */
export async function linkCounters(namespace: string, device = 'eth1'): Promise<{ rxPackets: number; txPackets: number; rxBytes: number; txBytes: number }> {
  const [link] = JSON.parse(await command('ip', ['-n', namespace, '-s', '-j', 'link', 'show', 'dev', device])) as { stats64: { rx: { packets: number; bytes: number }; tx: { packets: number; bytes: number } } }[];
  const { rx, tx } = link!.stats64;
  return { rxPackets: rx.packets, txPackets: tx.packets, rxBytes: rx.bytes, txBytes: tx.bytes };
}

/** Datagrams the root qdisc of a device has dropped (tbf: over its rate and queue). */
export async function qdiscDrops(namespace: string, device: string): Promise<number> {
  return (JSON.parse(await command('tc', ['-n', namespace, '-s', '-j', 'qdisc', 'show', 'dev', device])) as { drops: number }[])[0]!.drops;
}

/** One bare iperf3 client and its server, on a port of its own. */
export interface BarePath {
  from: LabHost;
  to: LabHost;
}

/**
 * Bare iperf3 on several paths at once (a reference for tests and benchmarks): one server per
 * path on the receiving host, every one listening before any client starts, then every client
 * started together, as niclab starts a run's flows. Returns each path's client and server JSON.
 */
export async function bareIperf3Flows(paths: BarePath[], seconds: number, options: string[] = []): Promise<{ client: any; server: any }[]> {
  const ports = await Promise.all(paths.map(() => freePort()));
  const servers = paths.map(({ to }, i) => run(['ip', 'netns', 'exec', to.namespace, 'iperf3', '-s', '-1', '-B', to.address, '-p', String(ports[i]), '--json', '--idle-timeout', String(seconds + 30)], (seconds + 40) * 1000));
  const deadline = Date.now() + 5000;
  for (const [i, { to }] of paths.entries()) {
    while (!(await command('ip', ['netns', 'exec', to.namespace, 'ss', '-Hltn', `sport = :${ports[i]}`])).trim()) {
      if (Date.now() > deadline) throw new Error('bare iperf3 server did not listen');
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  const clients = await Promise.all(paths.map(({ from, to }, i) => run(['ip', 'netns', 'exec', from.namespace, 'iperf3', '-c', to.address, '-p', String(ports[i]), '-B', from.address, '-t', String(seconds), '--json', ...options], (seconds + 40) * 1000)));
  const serverOuts = await Promise.all(servers);
  return clients.map((client, i) => {
    if (client.code !== 0) throw new Error(`bare iperf3 failed: ${client.stderr || client.stdout.slice(0, 500)}`);
    return { client: JSON.parse(client.stdout), server: JSON.parse(serverOuts[i]!.stdout) };
  });
}

/** Bare iperf3 between two lab hosts (a reference for tests and benchmarks) with the given client options; returns the client's JSON. */
export async function bareIperf3(from: LabHost, to: LabHost, seconds: number, options: string[] = []): Promise<any> {
  return (await bareIperf3Flows([{ from, to }], seconds, options))[0]!;
}

/** Bare iperf3 fan-in: every sender into its own iperf3 server on the receiver host, all at once; each flow's received rate in bits/s. */
export async function bareIperf3FanIn(senders: LabHost[], receiver: LabHost, seconds: number, options: string[] = []): Promise<number[]> {
  const results = await bareIperf3Flows(senders.map((from) => ({ from, to: receiver })), seconds, options);
  return results.map((r) => r.server.end.sum_received.bits_per_second as number);
}

/** What bare `iperf3 -u` counted: datagrams sent (client), received and lost (server). */
export interface BareUdp {
  sent: number;
  received: number;
  lost: number;
  lossRatio: number;
  /** Received datagrams over the run's nominal seconds. */
  receivedPerSecond: number;
}

/**
 * Bare `iperf3 -u` at a constant packet rate (`-b` is payload bits per second at `-l` bytes a
 * datagram), the reference for niclab's UDP figures on the same path.
 */
export async function bareIperf3Udp(from: LabHost, to: LabHost, seconds: number, udp: { packetSize: number; packetsPerSecond: number; socketBuffer?: number }): Promise<BareUdp> {
  const options = ['-u', '-b', String(udp.packetsPerSecond * udp.packetSize * 8), '-l', String(udp.packetSize), ...(udp.socketBuffer ? ['-w', String(udp.socketBuffer)] : [])];
  const { client, server } = await bareIperf3(from, to, seconds, options);
  const sent = client.end.sum_sent.packets as number;
  // The server's `packets` counts up to the highest sequence number it saw; the lost ones are gaps in it.
  const received = (server.end.sum.packets as number) - (server.end.sum.lost_packets as number);
  const lost = sent - received;
  return { sent, received, lost, lossRatio: sent > 0 ? lost / sent : 0, receivedPerSecond: received / seconds };
}

/** One reading of a counter, taken between `before` and `after` (performance.now(), ms). */
export interface CounterSample {
  before: number;
  after: number;
  value: number;
}

/** /proc/PID/net/dev's columns after the device's name: received bytes and packets, then (from 8) sent. */
export const NET_DEV = { rxBytes: 0, rxPackets: 1, txBytes: 8, txPackets: 9 } as const;

/** A device's counter as seen from inside the namespace of process `pid` (/proc/PID/net/dev: no process spawned). */
export function netDevCounter(pid: number, column: number, device = 'eth1'): number {
  const line = readFileSync(`/proc/${pid}/net/dev`, 'utf8').split('\n').find((l) => l.trim().startsWith(`${device}:`));
  if (!line) throw new Error(`no ${device} in /proc/${pid}/net/dev`);
  return Number(line.split(':')[1]!.trim().split(/\s+/)[column]);
}

/** A device's rx packets as seen from inside the namespace of process `pid`. */
export function rxPacketsOf(pid: number, device = 'eth1'): number {
  return netDevCounter(pid, NET_DEV.rxPackets, device);
}

/**
 * Samples a device's rx packet counter every few milliseconds until stopped: the rate that
 * really arrived, timed by the test's own clock rather than by any niclab process.
 */
export function watchRxPackets(pid: number, device = 'eth1', everyMs = 10): { stop(): CounterSample[] } {
  const samples: CounterSample[] = [];
  const read = () => {
    const before = performance.now();
    const value = rxPacketsOf(pid, device);
    samples.push({ before, after: performance.now(), value });
  };
  read();
  const timer = setInterval(read, everyMs);
  return {
    stop() {
      clearInterval(timer);
      read();
      return samples;
    },
  };
}

/**
 * The steady packet rate in a counter's samples: over the part of the burst that leaves out
 * `trimMs` at each end (start-up and the last datagrams), with the bounds the reading times
 * allow (each reading happened somewhere between its `before` and `after`).
 */
export function steadyRate(samples: CounterSample[], trimMs = 500): { rate: number; low: number; high: number; overall: number; seconds: number; packets: number } {
  const base = samples[0]!.value;
  const last = samples[samples.length - 1]!.value;
  // The burst: from the first reading that moved by more than a few packets (ARP, control) to the
  // reading that had all but the last few (a sender's end-of-run messages after its data, ARP).
  const start = samples.find((s) => s.value - base > 100);
  const endIndex = samples.findIndex((s) => s.value >= last - 20);
  if (!start || endIndex < 0) throw new Error('no burst of packets in the samples');
  const end = samples[endIndex]!;
  const inside = samples.filter((s) => s.before >= start.after + trimMs && s.after <= end.before - trimMs);
  if (inside.length < 2) throw new Error(`the burst lasted ${(end.before - start.after).toFixed(0)} ms: too short to trim ${trimMs} ms at each end`);
  const first = inside[0]!;
  const final = inside[inside.length - 1]!;
  const packets = final.value - first.value;
  const mid = (s: CounterSample) => (s.before + s.after) / 2;
  return {
    /** The whole burst's rate, first reading that moved to last: what a sender that stalled and caught up achieved. */
    overall: (end.value - start.value) / ((mid(end) - mid(start)) / 1000),
    rate: packets / ((mid(final) - mid(first)) / 1000),
    low: packets / ((final.after - first.before) / 1000),
    high: packets / ((final.before - first.after) / 1000),
    seconds: (end.before - start.after) / 1000,
    packets: last - base,
  };
}
