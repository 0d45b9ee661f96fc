/**
 * Constant-rate UDP on loopback, the builtin engine and bare `iperf3 -u` measured the same way:
 * datagrams sent and received, each end's process CPU from /proc/PID/stat (user + system, read
 * every 20 ms while it runs), and the received rate in every interval. Used side by side,
 * alternating, by test/engines/builtin-udp.test.ts and bench/udp-engine.ts.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { ENGINES } from '@niclab/agent/engines/registry';
import { command } from '@niclab/shared/runtime/command';
import type { EngineParams } from '@niclab/shared/domain/task';
import { freePort } from './redis.js';

/** Clock ticks per second of /proc/PID/stat's utime and stime (USER_HZ, 100 on Linux). */
const TICKS = 100;

export interface UdpRun {
  tool: 'builtin' | 'iperf3';
  sent: number;
  received: number;
  lossRatio: number;
  /** The sender's CPU seconds while it sent (/proc/PID/stat). */
  senderCpuSeconds: number;
  /** The same as the tool itself reports it (the builtin's cpuSeconds; iperf3's cpu_utilization_percent.host_total over its seconds). */
  senderSelfCpuSeconds: number;
  receiverCpuSeconds: number;
  /** Received datagrams per second in each full interval (the first and last left out). */
  intervalRates: number[];
  /** What the sender says it achieved (the builtin engine's achievedPacketsPerSecond; iperf3: sent / its seconds). */
  achievedPacketsPerSecond: number;
  /** The receive buffer the kernel gave the receiver's socket. */
  receiveBufferBytes: number | null;
}

export interface UdpLoad {
  packetsPerSecond: number;
  packetSize: number;
  seconds: number;
  /** SO_RCVBUF/SO_SNDBUF requested of both tools (iperf3 -w); unset: each tool's default. */
  socketBuffer?: number;
  /** Interval of the received-rate samples, seconds (default 0.1). */
  interval?: number;
}

/** User and system CPU seconds of a live process (utime and stime), or null once it has gone. */
export function processCpuTimes(pid: number): { user: number; system: number } | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // After "pid (comm) ": state is field 3, utime 14 and stime 15 of stat(5).
    return { user: Number(fields[11]) / TICKS, system: Number(fields[12]) / TICKS };
  } catch {
    return null;
  }
}

/** User + system CPU seconds of a live process, or null once it has gone. */
export function processCpuSeconds(pid: number): number | null {
  const times = processCpuTimes(pid);
  return times && times.user + times.system;
}

/**
 * Reads a process's CPU every 20 ms until it exits; `used(from)` is what it used from the
 * last reading at or before `from` (Date.now() ms; default its first reading) to its last,
 * `usedTimes()` the same from its first reading, user and system apart.
 */
export function watchCpu(pid: number): { used(from?: number): number; usedTimes(): { user: number; system: number }; stop(): void } {
  const readings: { at: number; user: number; system: number }[] = [];
  const read = () => {
    const times = processCpuTimes(pid);
    if (times === null) clearInterval(timer);
    else readings.push({ at: Date.now(), ...times });
  };
  const timer = setInterval(read, 20);
  read();
  const cpu = (r: { user: number; system: number }) => r.user + r.system;
  return {
    used(from) {
      if (readings.length === 0) return 0;
      const start = from === undefined ? readings[0]! : (readings.filter((r) => r.at <= from).at(-1) ?? readings[0]!);
      return cpu(readings.at(-1)!) - cpu(start);
    },
    usedTimes() {
      const [first, last] = [readings[0], readings.at(-1)];
      return first && last ? { user: last.user - first.user, system: last.system - first.system } : { user: 0, system: 0 };
    },
    stop: () => clearInterval(timer),
  };
}

/** This network namespace's UDP receive-buffer drops (/proc/net/snmp). */
export function rcvbufErrors(): number {
  const lines = readFileSync('/proc/net/snmp', 'utf8').split('\n').filter((l) => l.startsWith('Udp:'));
  return Number(lines[1]!.split(/\s+/)[lines[0]!.split(/\s+/).indexOf('RcvbufErrors')]);
}

const fullIntervals = <T>(all: T[]) => all.slice(1, -1);

/** One run of the builtin engine, receiver and sender each in its own process, over 127.0.0.1. */
export async function builtinUdp(load: UdpLoad, runId = `udp-${Date.now()}`): Promise<UdpRun> {
  const engine = ENGINES.builtin!;
  const params: EngineParams = {
    protocol: 'udp', test: 'stream', duration: load.seconds, bufferLength: load.packetSize, streams: 1, noDelay: false, interval: load.interval ?? 0.1,
    udp: { packetSize: load.packetSize, rate: { packetsPerSecond: load.packetsPerSecond } }, ...(load.socketBuffer ? { socketBuffer: load.socketBuffer } : {}),
  };
  const ids = { jobId: 'udp-loopback', runId, leg: 0 };
  const deadline = Date.now() + (load.seconds + 20) * 1000;
  const watches: ReturnType<typeof watchCpu>[] = [];
  let ready!: (port: number) => void;
  const port = new Promise<number>((resolve) => (ready = resolve));
  let receiverCpu: ReturnType<typeof watchCpu> | undefined;
  const receiving = engine.run({ ...ids, role: 'receiver', engine: 'builtin', params, interface: 'lo', deadline }, {
    signal: new AbortController().signal, address: '127.0.0.1', ready, spawned: (pid) => watches.push((receiverCpu = watchCpu(pid))),
  });
  const peerPort = await port;
  // The sender starts as soon as it says it is loaded and warm (armed): its start-up, which took
  // seconds at a load average of 14 on 2 cores, is never counted as sending; CPU counts from then.
  const startAt = Date.now() + 200;
  let armedAt = 0;
  let senderCpu: ReturnType<typeof watchCpu> | undefined;
  const sending = engine.run({ ...ids, role: 'sender', engine: 'builtin', params, interface: 'lo', deadline, peer: { address: '127.0.0.1', port: peerPort }, startAt }, {
    signal: new AbortController().signal, address: '127.0.0.1', ready: () => undefined, armed: () => (armedAt = Date.now()), spawned: (pid) => watches.push((senderCpu = watchCpu(pid))),
  });
  const [sender, receiver] = await Promise.all([sending, receiving]);
  for (const w of watches) w.stop();
  if (sender.error || receiver.error) throw new Error(`builtin UDP failed: ${JSON.stringify(sender.error ?? receiver.error)}`);
  if (!armedAt) throw new Error('the builtin UDP sender never said it was armed');
  const sendingFrom = Math.max(startAt, armedAt);
  const sent = sender.udp!.sent!;
  const received = receiver.udp!.received!;
  return {
    tool: 'builtin', sent, received, lossRatio: sent > 0 ? (sent - received) / sent : 0,
    senderCpuSeconds: senderCpu!.used(sendingFrom), receiverCpuSeconds: receiverCpu!.used(sendingFrom), senderSelfCpuSeconds: sender.figures!.cpuSeconds,
    intervalRates: fullIntervals(receiver.intervals).map((i) => i.bitsPerSecond / 8 / load.packetSize),
    achievedPacketsPerSecond: sender.udp!.achievedPacketsPerSecond!,
    receiveBufferBytes: receiver.socketBuffers?.receiveBytes ?? null,
  };
}

function runIperf3(args: string[], onSpawn: (pid: number) => void): Promise<any> {
  return new Promise((resolve, reject) => {
    const child = spawn('iperf3', args, { stdio: ['ignore', 'pipe', 'pipe'] });
    if (child.pid) onSpawn(child.pid);
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c));
    child.stderr.on('data', (c: Buffer) => (stderr += c));
    child.on('error', reject);
    // 'close', not 'exit': on 'exit' the end of iperf3's JSON can still be in the pipe (CI once
    // parsed it cut off, and failed the comparison for it).
    child.on('close', (code) => {
      try {
        resolve(JSON.parse(stdout));
      } catch {
        reject(new Error(`iperf3 ${args.join(' ')} exited ${code}: ${stderr.trim() || stdout.slice(0, 500)}`));
      }
    });
  });
}

/** One run of bare `iperf3 -u` at the same packet rate (`-b` payload bits/s at `-l` bytes), server and client over 127.0.0.1. */
export async function bareIperf3Udp(load: UdpLoad): Promise<UdpRun> {
  const port = await freePort();
  const interval = String(load.interval ?? 0.1);
  let serverCpu: ReturnType<typeof watchCpu> | undefined;
  let clientCpu: ReturnType<typeof watchCpu> | undefined;
  const serving = runIperf3(['-s', '-1', '-J', '-B', '127.0.0.1', '-p', String(port), '-i', interval], (pid) => (serverCpu = watchCpu(pid)));
  // Its client would be refused before the server listens (iperf3's control connection is TCP).
  const deadline = Date.now() + 10_000;
  while (!(await command('ss', ['-Hltn', `sport = :${port}`])).trim()) {
    if (Date.now() > deadline) throw new Error(`bare iperf3 -s did not listen on ${port}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  const client = await runIperf3([
    '-c', '127.0.0.1', '-p', String(port), '-J', '-i', interval, '-t', String(load.seconds), '-u', '-b', String(load.packetsPerSecond * load.packetSize * 8), '-l', String(load.packetSize),
    ...(load.socketBuffer ? ['-w', String(load.socketBuffer)] : []),
  ], (pid) => (clientCpu = watchCpu(pid)));
  const server = await serving;
  clientCpu!.stop();
  serverCpu!.stop();
  const sent = client.end.sum_sent.packets as number;
  // The server's `packets` counts up to the highest sequence number it saw; the lost ones are gaps in it.
  const received = (server.end.sum.packets as number) - (server.end.sum.lost_packets as number);
  return {
    tool: 'iperf3', sent, received, lossRatio: sent > 0 ? (sent - received) / sent : 0,
    senderCpuSeconds: clientCpu!.used(), receiverCpuSeconds: serverCpu!.used(),
    senderSelfCpuSeconds: ((client.end.cpu_utilization_percent.host_total as number) / 100) * (client.end.sum_sent.seconds as number),
    intervalRates: fullIntervals(server.intervals as { sum: { packets: number; lost_packets: number; seconds: number } }[]).map(({ sum }) => (sum.packets - sum.lost_packets) / sum.seconds),
    achievedPacketsPerSecond: sent / (client.end.sum_sent.seconds as number),
    receiveBufferBytes: server.start?.rcvbuf_actual ?? null,
  };
}
