import { existsSync, readFileSync, readdirSync } from 'node:fs';
import type { HostCounters } from '@niclab/shared/domain/contract';
import { performance } from 'node:perf_hooks';
import { command } from '@niclab/shared/runtime/command';

/** Ip counters of /proc/net/snmp (and /proc/net/snmp6, there with an Ip6 prefix) kept in a result: a fragmented datagram's fate. */
const IP = ['InReceives', 'InDelivers', 'OutRequests', 'ReasmReqds', 'ReasmOKs', 'ReasmFails', 'FragOKs', 'FragFails', 'FragCreates'];
/** Udp counters of /proc/net/snmp and TcpExt counters of /proc/net/netstat kept in a result. */
const UDP = ['InDatagrams', 'OutDatagrams', 'InErrors', 'RcvbufErrors', 'SndbufErrors', 'NoPorts', 'InCsumErrors', 'MemErrors'];
const TCP_EXT = ['TCPBacklogDrop', 'TCPRcvQDrop', 'ListenOverflows', 'ListenDrops', 'TCPTimeouts', 'TCPLossProbes', 'TCPLostRetransmit', 'TCPSackRecovery', 'TCPRenoRecovery', 'TCPOFOQueue', 'TCPOFODrop', 'TCPZeroWindowDrop', 'TCPRcvCollapsed', 'PruneCalled', 'TCPSpuriousRTOs'];
/** Driver counters (ethtool -S) with well-known meanings: a datagram lost in the NIC. */
const NIC_RX_DROPS = /^(rx_no_buffer_count|rx_missed(_errors)?|rx_fifo_errors|rx_over_errors|rx_dropped|rx_discards|rx_out_of_buffer|rx_queue_\d+_drops|rx_buff_alloc_err|rx_no_dma_resources)$/;
const NIC_TX_DROPS = /^(tx_timeout(_count)?|tx_dropped|tx_discards|tx_fifo_errors|tx_aborted_errors|tx_queue_\d+_drops|tx_busy)$/;
const SAMPLE_MS = 1000;

type Counts = Record<string, number>;
interface CpuTimes { cpu: number; total: number; idle: number; irq: number; softirq: number }
/** NET_RX and NET_TX softirqs each CPU has run (/proc/softirqs), by CPU number. */
type NetSoftirqs = Map<number, { netRx: number; netTx: number }>;
interface FsSnapshot { statistics: Counts | null; softnet: { cpu: number; dropped: number; timeSqueeze: number }[]; softirqs: NetSoftirqs | null; ip: Counts; ip6: Counts; udp: Counts; tcpExt: Counts }
interface Qdisc { kind: string; handle: string; root: boolean; packets: number; bytes: number; dropped: number; overlimits: number; requeues: number; backlog: number; qlen: number }
interface ToolSnapshot { ethtool: Counts | null; qdiscs: Qdisc[] | null }

/**
 * sysfs and procfs files are made in memory when read: a synchronous read takes microseconds,
 * where an asynchronous one is four trips through libuv's thread pool (the first version's
 * thirty parallel reads added 15-20 ms to the gap between runs on a loaded machine).
 */
function readText(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return '';
  }
}

function readStatistics(iface: string): Counts | null {
  const dir = `/sys/class/net/${iface}/statistics`;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return null;
  }
  const values = names.map((name) => [name, Number(readText(`${dir}/${name}`).trim())] as const);
  return Object.fromEntries(values.filter(([, v]) => Number.isFinite(v)));
}

/** /proc/net/softnet_stat: one line per online CPU, hexadecimal; the 13th field (newer kernels) is the CPU's number. */
export function parseSoftnet(text: string): FsSnapshot['softnet'] {
  return text.trim().split('\n').filter(Boolean).map((line, index) => {
    const fields = line.trim().split(/\s+/).map((f) => parseInt(f, 16));
    return { cpu: fields[12] ?? index, dropped: fields[1] ?? 0, timeSqueeze: fields[2] ?? 0 };
  });
}

/** /proc/net/snmp and /proc/net/netstat: a header line and a value line per protocol. */
export function parseSnmp(text: string, protocol: string, keep: string[]): Counts {
  const lines = text.split('\n').filter((l) => l.startsWith(`${protocol}: `));
  const names = lines[0]?.split(/\s+/).slice(1) ?? [];
  const values = lines[1]?.split(/\s+/).slice(1) ?? [];
  const out: Counts = {};
  for (const [i, name] of names.entries()) if (keep.includes(name)) out[name] = Number(values[i]);
  return out;
}

/** /proc/net/snmp6: one "Ip6Name value" line per counter; the names kept without their prefix. */
export function parseSnmp6(text: string, prefix: string, keep: string[]): Counts {
  const out: Counts = {};
  for (const [, name, value] of text.matchAll(/^(\S+)\s+(\d+)\s*$/gm)) {
    const bare = name!.startsWith(prefix) ? name!.slice(prefix.length) : null;
    if (bare && keep.includes(bare)) out[bare] = Number(value);
  }
  return out;
}

/** /proc/stat's per-CPU lines (user nice system idle iowait irq softirq steal ...), in clock ticks. */
export function parseCpuTimes(text: string): CpuTimes[] {
  return text.split('\n').filter((l) => /^cpu\d+ /.test(l)).map((line) => {
    const [name, ...rest] = line.split(/\s+/);
    const t = rest.slice(0, 8).map(Number);
    return { cpu: Number(name!.slice(3)), total: t.reduce((a, b) => a + b, 0), idle: t[3]! + t[4]!, irq: t[5]!, softirq: t[6]! };
  });
}

/** /proc/softirqs: a "CPU0 CPU1 ..." header, then a line of counts per kind; null without NET_RX and NET_TX. */
export function parseSoftirqs(text: string): NetSoftirqs | null {
  const [header, ...lines] = text.split('\n');
  const cpus = (header ?? '').trim().split(/\s+/).filter((c) => /^CPU\d+$/.test(c)).map((c) => Number(c.slice(3)));
  const counts = (kind: string) => lines.find((l) => l.trim().startsWith(`${kind}:`))?.trim().split(/\s+/).slice(1).map(Number);
  const [rx, tx] = [counts('NET_RX'), counts('NET_TX')];
  if (!rx || !tx || cpus.length === 0) return null;
  return new Map(cpus.map((cpu, i) => [cpu, { netRx: rx[i] ?? 0, netTx: tx[i] ?? 0 }]));
}

/** ethtool -S: "     name: value" lines under a header. */
export function parseEthtool(text: string): Counts {
  const out: Counts = {};
  for (const match of text.matchAll(/^\s+([^:]+):\s+(\d+)\s*$/gm)) out[match[1]!.trim()] = Number(match[2]);
  return out;
}

function parseQdiscs(json: string): Qdisc[] {
  const raw = JSON.parse(json) as Record<string, unknown>[];
  const n = (v: unknown) => (typeof v === 'number' ? v : 0);
  return raw.map((q) => ({ kind: String(q.kind), handle: String(q.handle), root: q.root === true, packets: n(q.packets), bytes: n(q.bytes), dropped: n(q.drops), overlimits: n(q.overlimits), requeues: n(q.requeues), backlog: n(q.backlog), qlen: n(q.qlen) }));
}

function readFs(iface: string): FsSnapshot {
  const [statistics, softnet, snmp, snmp6, netstat] = [readStatistics(iface), readText('/proc/net/softnet_stat'), readText('/proc/net/snmp'), readText('/proc/net/snmp6'), readText('/proc/net/netstat')];
  return { statistics, softnet: parseSoftnet(softnet), softirqs: parseSoftirqs(readText('/proc/softirqs')), ip: parseSnmp(snmp, 'Ip', IP), ip6: parseSnmp6(snmp6, 'Ip6', IP), udp: parseSnmp(snmp, 'Udp', UDP), tcpExt: parseSnmp(netstat, 'TcpExt', TCP_EXT) };
}

/** A virtual interface (lo, veth, bridge) has no device: its driver keeps no NIC drop counters worth a process. */
const hasDevice = (iface: string) => existsSync(`/sys/class/net/${iface}/device`);

/**
 * The counters that need a process (tc, ethtool): read beside the engine's setup, never ahead
 * of it. `like` is the reading before the run: what it lacked (no driver counters, only a
 * noqueue qdisc that keeps none) is not asked for again after it.
 */
async function readTools(iface: string, signal: AbortSignal, like?: ToolSnapshot): Promise<ToolSnapshot> {
  const askEthtool = like ? like.ethtool !== null : hasDevice(iface);
  const askTc = like ? like.qdiscs !== null && like.qdiscs.some((q) => q.kind !== 'noqueue') : true;
  const [ethtool, qdiscs] = await Promise.all([
    askEthtool ? command('ethtool', ['-S', iface], signal).then(parseEthtool).catch(() => null) : null,
    // A parse error (empty or odd output) is no reading, never an unhandled rejection in the agent.
    askTc ? command('tc', ['-s', '-j', 'qdisc', 'show', 'dev', iface], signal).then(parseQdiscs).catch(() => null) : like?.qdiscs ?? null,
  ]);
  return { ethtool, qdiscs };
}

function delta(before: Counts, after: Counts, keepZero = true): Counts {
  const out: Counts = {};
  for (const [name, value] of Object.entries(after)) {
    const d = value - (before[name] ?? value);
    if (keepZero || d !== 0) out[name] = d;
  }
  return out;
}

/** The last CPU a process ran on: field 39 of /proc/PID/stat (after the command in parentheses). */
function processCore(pid: number): number | null {
  const text = readText(`/proc/${pid}/stat`);
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  const core = Number(fields[36]);
  return text && Number.isInteger(core) ? core : null;
}

/**
 * Tasks running on this agent now, by leg: any other leg beside ours (another run's, or another
 * flow of the same run: a fan-in, a bidir pair, an rr flow beside streams) makes both overlapped,
 * since the host-wide counters cannot tell their drops apart. The two ends of one leg on one
 * host (loopback) are one watch's business, not an overlap.
 */
const active = new Set<HostWatch>();

/**
 * One end's host counters around its engine. start() begins the readings (/sys and /proc as
 * synchronous file reads, tc and ethtool as processes) without waiting for them, and samples
 * /proc/stat once a second; finish() reads everything again and gives the deltas.
 */
export class HostWatch {
  private overlapped = false;
  private readonly samples: CpuTimes[][] = [];
  private readonly cores = new Map<number, number>();
  /** The engine's runqueue wait (ns) and the agent's clock (ms) at its first and latest samples. */
  private waits: { first: { at: number; ns: number } | null; last: { at: number; ns: number } | null } = { first: null, last: null };
  private enginePid: number | null = null;
  private timer: NodeJS.Timeout | undefined;
  private before!: Promise<FsSnapshot>;
  private beforeTools!: Promise<ToolSnapshot>;

  /** `signal` is the run's: tc and ethtool are killed with it, never outliving a canceled run. */
  private constructor(private readonly iface: string, private readonly legKey: string, private readonly signal: AbortSignal) {}

  /**
   * Starts watching as the engine starts: nothing here is awaited, so the engine's own setup
   * (its fork, its listen or connect) runs beside the readings, which are done long before the
   * first datagram (a receiver waits for its sender, a sender for the run's start instant).
   */
  static start(iface: string, runId: string, leg: number, signal: AbortSignal): HostWatch {
    const watch = new HostWatch(iface, `${runId}/${leg}`, signal);
    for (const other of active) {
      if (other.legKey === watch.legKey) continue;
      other.overlapped = true;
      watch.overlapped = true;
    }
    active.add(watch);
    // After the engine's fork, which engine.run starts synchronously: the readings never go first.
    watch.before = new Promise((resolve) => setImmediate(() => {
      const before = readFs(iface);
      watch.samples.unshift(parseCpuTimes(readText('/proc/stat')));
      resolve(before);
    }));
    watch.beforeTools = readTools(iface, signal);
    watch.timer = setInterval(() => watch.sample(), SAMPLE_MS);
    watch.timer.unref();
    return watch;
  }

  engineStarted(pid: number): void {
    this.enginePid = pid;
  }

  private sample(): void {
    const pid = this.enginePid;
    const [cpu, core, schedstat] = [readText('/proc/stat'), pid === null ? null : processCore(pid), pid === null ? '' : readText(`/proc/${pid}/schedstat`)];
    if (cpu) this.samples.push(parseCpuTimes(cpu));
    if (core !== null) this.cores.set(core, (this.cores.get(core) ?? 0) + 1);
    // schedstat: time on the CPU, time waiting on a runqueue (ns), timeslices.
    const waited = Number(schedstat.split(' ')[1]);
    if (schedstat && Number.isFinite(waited)) {
      const point = { at: performance.now(), ns: waited };
      this.waits.first ??= point;
      this.waits.last = point;
    }
  }

  async finish(): Promise<HostCounters | null> {
    clearInterval(this.timer);
    active.delete(this);
    const [before, toolsBefore] = await Promise.all([this.before, this.beforeTools]);
    const after = readFs(this.iface);
    const cpu = readText('/proc/stat');
    const toolsAfter = await readTools(this.iface, this.signal, toolsBefore);
    if (cpu) this.samples.push(parseCpuTimes(cpu));
    if (!before.statistics || !after.statistics) return null;
    const ethtool = toolsBefore.ethtool && toolsAfter.ethtool ? delta(toolsBefore.ethtool, toolsAfter.ethtool, false) : null;
    const sum = (pattern: RegExp) => Object.entries(ethtool ?? {}).filter(([name]) => pattern.test(name)).reduce((a, [, v]) => a + v, 0);
    const softnet = after.softnet.map((s) => {
      const b = before.softnet.find((x) => x.cpu === s.cpu);
      return { cpu: s.cpu, dropped: s.dropped - (b?.dropped ?? s.dropped), timeSqueeze: s.timeSqueeze - (b?.timeSqueeze ?? s.timeSqueeze) };
    });
    return {
      interfaceStatistics: delta(before.statistics, after.statistics),
      ethtool,
      nicDrops: { rx: sum(NIC_RX_DROPS), tx: sum(NIC_TX_DROPS) },
      qdiscs: qdiscDelta(toolsBefore.qdiscs, toolsAfter.qdiscs),
      softnet: {
        dropped: softnet.reduce((a, s) => a + s.dropped, 0),
        timeSqueeze: softnet.reduce((a, s) => a + s.timeSqueeze, 0),
        perCpu: softnet.filter((s) => s.dropped || s.timeSqueeze),
      },
      ip: delta(before.ip, after.ip),
      ip6: delta(before.ip6, after.ip6),
      udp: delta(before.udp, after.udp),
      tcpExt: delta(before.tcpExt, after.tcpExt, false),
      cpu: this.cpuShares(before.softirqs, after.softirqs),
      overlapped: this.overlapped,
    };
  }

  private cpuShares(softirqsBefore: NetSoftirqs | null, softirqsAfter: NetSoftirqs | null): HostCounters['cpu'] {
    const first = this.samples[0] ?? [];
    const last = this.samples[this.samples.length - 1] ?? [];
    const perCpu = last.map((end) => {
      const start = first.find((c) => c.cpu === end.cpu) ?? end;
      const total = end.total - start.total || 1;
      let peakBusy = 0;
      for (let i = 1; i < this.samples.length; i++) {
        const a = this.samples[i - 1]!.find((c) => c.cpu === end.cpu);
        const b = this.samples[i]!.find((c) => c.cpu === end.cpu);
        if (a && b && b.total > a.total) peakBusy = Math.max(peakBusy, 1 - (b.idle - a.idle) / (b.total - a.total));
      }
      const [b, a] = [softirqsBefore?.get(end.cpu), softirqsAfter?.get(end.cpu)];
      // Each CPU's count is a 32-bit unsigned int in the kernel: a wrap is a delta still.
      const net = (kind: 'netRx' | 'netTx') => (a && b ? (a[kind] - b[kind] + 2 ** 32) % 2 ** 32 : null);
      return { cpu: end.cpu, busy: 1 - (end.idle - start.idle) / total, softirq: (end.softirq - start.softirq) / total, irq: (end.irq - start.irq) / total, peakBusy, netRx: net('netRx'), netTx: net('netTx') };
    });
    const engineCore = [...this.cores.entries()].sort((a, b) => b[1] - a[1])[0]?.[0] ?? null;
    const { first: w0, last: w1 } = this.waits;
    const engineWaitShare = w0 && w1 && w1.at > w0.at ? (w1.ns - w0.ns) / 1e6 / (w1.at - w0.at) : null;
    const top = perCpu.reduce<(typeof perCpu)[number] | null>((best, c) => (best === null || c.busy > best.busy ? c : best), null);
    const busiest = top && this.samples.length > 1 ? { cpu: top.cpu, busy: top.busy, softirq: top.softirq, engine: top.cpu === engineCore } : null;
    return { samples: this.samples.length, perCpu, busiest, engineCore, engineCoreBusy: perCpu.find((c) => c.cpu === engineCore)?.busy ?? null, engineWaitShare };
  }

  /** Stops sampling without a result (the end failed before its engine ran). */
  cancel(): void {
    clearInterval(this.timer);
    active.delete(this);
  }
}

function qdiscDelta(before: Qdisc[] | null, after: Qdisc[] | null): HostCounters['qdiscs'] {
  if (!before || !after) return null;
  return after.map((q) => {
    const b = before.find((x) => x.handle === q.handle && x.kind === q.kind);
    const d = (key: 'packets' | 'bytes' | 'dropped' | 'overlimits' | 'requeues') => q[key] - (b?.[key] ?? q[key]);
    return { kind: q.kind, handle: q.handle, root: q.root, packets: d('packets'), bytes: d('bytes'), dropped: d('dropped'), overlimits: d('overlimits'), requeues: d('requeues'), backlog: q.backlog, qlen: q.qlen };
  });
}

