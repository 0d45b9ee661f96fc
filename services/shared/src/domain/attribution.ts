import type { Bottleneck, EndDiagnostics, EndFigures, EngineName, FileStages, HostCounters, Interval, LossAttribution, UdpFigures, Verdict } from './contract.js';

/** A core this busy (0 to 1) over a run is what limited it. */
export const CPU_BUSY = 0.9;
/**
 * An engine that waited for a CPU this share of its run had its CPU taken by something else (a
 * runqueue wait means another task held the core). Unpinned engines on a two-core machine at
 * load 10-15 waited up to 45%; one pinned beside a real-time loop, 63%.
 */
export const CPU_WAIT = 0.5;
/**
 * A UDP receiver whose socket buffer overflowed while its engine waited for a CPU at least a
 * quarter of its run (CPU_WAIT / 2) and this many times as long as it ran was starved, though
 * its run counts the time it sat idle (before its sender starts, after it ends). A receiver
 * whose core a real-time loop took for the whole send waited 37-49% of its run, 6-17 times its
 * own CPU (2.6-6.7% of a core), six lab runs; unstarved ones waited 2-4%, under their CPU. Only
 * there: elsewhere a light engine (a TCP sender behind a shaper uses 1-4% of a core) that
 * waited on a loaded host was not what limited the run.
 */
export const CPU_STARVED = 6;
/** A sender that reached less than this share of its offered packet rate fell short. */
export const RATE_SHORTFALL = 0.95;
/** Throughput at this share of the slower interface's link speed is the link's limit. */
export const LINE_RATE = 0.9;
/** Qdiscs that hold a configured rate: their drops and overlimits are a shaped link's limit. */
export const SHAPERS = new Set(['tbf', 'htb', 'hfsc', 'cake', 'cbs', 'taprio', 'netem']);
/**
 * A rate whose interval samples vary by at most this coefficient of variation held steady.
 * Through a 20 or 100 Mbit/s tbf on the switch port (lab, load 3-17 on two cores) TCP's samples
 * varied 0.1-7.7% (builtin, 0.5 and 1 s samples; once 14.5% at load 17) and 0-5.6% (iperf3). A
 * sanity check that the limit held through the run, not what tells the path from the ends:
 * CPU-bound runs on unshaped veth varied 1.1-76%.
 */
export const STEADY_CV = 0.1;
/**
 * An engine that used under this share of a core had the rest to spare: the path can have set
 * the rate. Through the switch-port tbf the senders' engines used 1-4% of a core and the
 * receivers' 5-24%; on unshaped veth, CPU-bound but neither waiting half the run nor at 90%, the
 * senders' 52-56% and the receivers' 69-73% (one such run, steady, its window shut 9% of the
 * time, was judged path before this rule).
 */
export const ENGINE_HEADROOM = 0.5;
/**
 * A TCP sender held back by the receiver's window (TCP_INFO rwnd_limited) this share of the time
 * it had data to send was limited by that window: 8 KiB socket buffers on veth 0.39-0.67; unshaped
 * veth with default buffers 0.09-0.18; a switch-port tbf 0-0.036.
 */
export const WINDOW_LIMITED = 0.3;
/** Under this share of its busy time held back by the receiver's window and its send buffer together, the congestion window set a TCP sender's rate. */
export const PATH_WINDOW_LIMITED = 0.1;
/**
 * A file leg whose transfer moved at least this share of what its slower disk did alone went at
 * that disk's rate: the disk was the limit. A disk that is not the limit leaves the transfer far
 * below it (a dsync sink of 5 MiB/s beside a 500 Mbit/s link moved at 0.90-1.05 of it on the lab,
 * alone and beside other tests, iperf3 at 0.91-1.03); a transfer a little under its disk's own
 * rate still waited on it.
 */
export const DISK_LIMITED = 0.8;

/** One end of a leg as its report gave it: its engine's figures and its diagnostics (host counters among them). */
export interface EndView {
  figures: EndFigures | null;
  diagnostics: EndDiagnostics | undefined;
}

export interface LegView {
  udp: UdpFigures | null;
  bitsPerSecond: number | null;
  retransmits: number | null;
  /** The receiver's interval samples (the steadiness of the rate). */
  intervals?: Interval[];
  /** A UDP leg's datagrams on the wire (the network place in datagrams). */
  shape?: DatagramShape;
  /** A file leg's ends: the source and sink, each with its disk's own rate. */
  file?: FileStages;
  sender: EndView;
  receiver: EndView;
}

const stat = (host: HostCounters, name: string) => host.interfaceStatistics[name] ?? 0;
const udpStat = (host: HostCounters, name: string) => host.udp[name] ?? 0;
const rootQdiscs = (host: HostCounters) => (host.qdiscs ?? []).filter((q) => q.root);
const qdiscDrops = (host: HostCounters) => rootQdiscs(host).reduce((a, q) => a + q.dropped, 0);
const shaper = (host: HostCounters) => rootQdiscs(host).find((q) => SHAPERS.has(q.kind));
const receiverNicDrops = (h: HostCounters) =>
  Math.max(['rx_dropped', 'rx_missed_errors', 'rx_fifo_errors', 'rx_over_errors', 'rx_crc_errors', 'rx_frame_errors'].reduce((a, n) => a + stat(h, n), 0), h.nicDrops?.rx ?? 0);

/**
 * A TCP leg's drops by the same places, as context for its retransmits (TCP resends what was
 * lost, so there is no `lost` to split): the sender's qdisc, its NIC, the network, the receiver's
 * NIC and backlog, and its socket (TCPRcvQDrop, TCPBacklogDrop, TCPOFODrop).
 */
export function tcpDrops(sender: HostCounters, receiver: HostCounters): Record<Exclude<Place, 'unexplained'>, number> {
  const receiverNic = receiverNicDrops(receiver);
  return {
    senderSocket: qdiscDrops(sender),
    senderNic: Math.max(stat(sender, 'tx_dropped') + stat(sender, 'tx_errors'), sender.nicDrops?.tx ?? 0),
    network: Math.max(0, stat(sender, 'tx_packets') - stat(receiver, 'rx_packets') - receiverNic),
    receiverNic,
    receiverBacklog: receiver.softnet.dropped,
    receiverSocketBuffer: ['TCPRcvQDrop', 'TCPBacklogDrop', 'TCPOFODrop'].reduce((a, n) => a + (receiver.tcpExt[n] ?? 0), 0),
  };
}

/** What a UDP leg's datagrams were on the wire: their payload, the sender interface's MTU and the address family. */
export interface DatagramShape {
  packetSize: number;
  mtu: number | null | undefined;
  ipv6: boolean;
  /** Datagrams or packets the engine sends on the leg's path beside the counted ones (ENGINE_EXTRA_PACKETS). */
  extraPackets: number;
}

/**
 * Packets an engine's sender puts on its interface for a UDP leg beyond its counted datagrams:
 * the builtin's five end-of-run FINs (and an ARP or two: 5 measured on the lab), iperf3's
 * control connection (17 in a 2 s run on the lab).
 */
export const ENGINE_EXTRA_PACKETS: Record<EngineName, number> = { builtin: 8, iperf3: 32 };

/**
 * Frames one UDP datagram of `packetSize` payload bytes makes on an interface of `mtu` bytes:
 * one when the datagram and its IP header fit, else fragments that each carry a multiple of 8
 * bytes of it after a 20-byte IPv4 header (40 and an 8-byte fragment header for IPv6).
 */
export function framesPerDatagram(packetSize: number, mtu: number, ipv6 = false): number {
  const datagram = packetSize + 8;
  const header = ipv6 ? 40 : 20;
  if (datagram + header <= mtu) return 1;
  return Math.ceil(datagram / (Math.floor((mtu - header - (ipv6 ? 8 : 0)) / 8) * 8));
}

/**
 * The leg's datagrams that left the sender's interface and never reached the receiver's, in
 * datagrams. Frames lost between the interfaces are the sender's tx_packets, at most this leg's
 * own (F a datagram it sent, and its engine's extra packets: the rest is other traffic out of that
 * interface), minus the receiver's rx_packets and NIC drops. A datagram is one frame, or F
 * fragments: then it is the datagrams the sender's host fragmented and sent whole (Ip FragOKs, at
 * most the frames over F) that the receiver's host never reassembled (Ip ReasmOKs), less the
 * receiver's NIC and backlog drops, at most one per frame lost; without Ip counters, at least the
 * frames lost over F. Not separable: other traffic into the receiver's interface hides loss, and
 * a datagram the receiver could not reassemble (its fragment memory full, Ip ReasmFails) is here.
 * Never more than the leg lost: a frame or two of other traffic (an ARP, a neighbour
 * solicitation) the receiver's interface did not count is not a lost datagram (a clean lab run
 * showed network 1, unexplained -1 with nothing lost).
 */
function networkDatagrams(udp: UdpFigures, sender: HostCounters, receiver: HostCounters, shape: DatagramShape | undefined, frames: number): number {
  const receiverNic = receiverNicDrops(receiver);
  // Without the datagrams' shape their frames are unknown: every frame out is taken as the leg's.
  const own = shape?.mtu ? Math.min(stat(sender, 'tx_packets'), frames * (udp.sent + shape.extraPackets)) : stat(sender, 'tx_packets');
  const framesLost = Math.max(0, own - stat(receiver, 'rx_packets') - receiverNic);
  if (frames === 1) return Math.min(Math.max(0, udp.lost), framesLost);
  const fragmented = sender.ip?.FragOKs;
  const reassembled = receiver.ip?.ReasmOKs;
  if (fragmented === undefined || reassembled === undefined) return Math.min(Math.max(0, udp.lost), Math.ceil(framesLost / frames));
  const left = Math.min(fragmented, Math.floor(own / frames));
  return Math.max(0, Math.min(Math.max(0, udp.lost), framesLost, left - reassembled - receiverNic - receiver.softnet.dropped));
}

/**
 * Splits a UDP leg's `lost` by place, in path order, from both ends' host counters. Each place
 * is what its counters saw; `unexplained` is the rest, so the parts add up to `lost` exactly.
 * `shape` turns the network place's frames into datagrams (one frame each without it).
 */
export function attributeLoss(udp: UdpFigures, sender: HostCounters, receiver: HostCounters, shape?: DatagramShape): LossAttribution {
  // A qdisc's drop reaches a UDP socket as ENOBUFS, which the kernel counts as SndbufErrors too: the larger, not the sum.
  const senderSocket = Math.max(udpStat(sender, 'SndbufErrors'), qdiscDrops(sender));
  // The NIC and backlog places are TCP's too.
  const { senderNic, receiverNic, receiverBacklog } = tcpDrops(sender, receiver);
  const frames = shape?.mtu ? framesPerDatagram(shape.packetSize, shape.mtu, shape.ipv6) : 1;
  const network = networkDatagrams(udp, sender, receiver, shape, frames);
  const receiverSocketBuffer = udpStat(receiver, 'RcvbufErrors');
  const places = senderSocket + senderNic + network + receiverNic + receiverBacklog + receiverSocketBuffer;
  return {
    lost: udp.lost,
    senderSocket,
    senderNic,
    network,
    receiverNic,
    receiverBacklog,
    receiverSocketBuffer,
    unexplained: udp.lost - places,
    overlapped: sender.overlapped || receiver.overlapped,
    framesPerDatagram: frames,
  };
}

/** Every verdict, in the contract's order (a bounded label set for /metrics). */
export const VERDICTS: readonly Verdict[] = ['link', 'sender CPU', 'receiver CPU', 'sender qdisc', 'receiver socket buffer', 'receiver NIC', 'network', 'path', 'source disk', 'sink disk', 'none'];

export const PLACES = ['senderSocket', 'senderNic', 'network', 'receiverNic', 'receiverBacklog', 'receiverSocketBuffer', 'unexplained'] as const;
export type Place = (typeof PLACES)[number];
export const PLACE_NAMES: Record<Place, string> = {
  senderSocket: 'sender socket/qdisc',
  senderNic: 'sender NIC',
  network: 'network',
  receiverNic: 'receiver NIC',
  receiverBacklog: 'receiver backlog',
  receiverSocketBuffer: 'receiver socket buffer',
  unexplained: 'unexplained',
};

const n = (value: number) => Math.round(value).toLocaleString('en-US');
const pct = (share: number) => `${Math.round(share * 100)}%`;

/** An end's CPU: the engine's own share of a core (its CPU seconds over its real seconds), and its core's busy share. */
function cpu(end: EndView): { engine: number | null; core: number | null; coreId: number | null; wait: number | null; busiest: Busiest | null } {
  const f = end.figures;
  const host = end.diagnostics?.host;
  return {
    engine: f && f.realSeconds > 0 ? f.cpuSeconds / f.realSeconds : null,
    core: host?.cpu.engineCoreBusy ?? null,
    coreId: host?.cpu.engineCore ?? null,
    wait: host?.cpu.engineWaitShare ?? null,
    busiest: host?.cpu.busiest ?? null,
  };
}
type Busiest = NonNullable<HostCounters['cpu']['busiest']>;
/**
 * Who had the busiest CPU: softirq when it took half the CPU's busy time or more (the kernel's
 * packet work, NET_RX and NET_TX, beside timers and the rest), else the engine when it ran there
 * most of the run and its own CPU (`engineShare` of a core) was at least half of the rest, else
 * another task.
 */
export const busiestBy = (b: Busiest, engineShare: number | null): 'softirq' | 'the engine' | 'another task' => {
  if (b.busy > 0 && b.softirq >= b.busy / 2) return 'softirq';
  return b.engine && engineShare !== null && engineShare >= (b.busy - b.softirq) / 2 ? 'the engine' : 'another task';
};
/**
 * The engine's core was full and the engine a large user of it: the busiest CPU, where the
 * engine ran most of the run, at least CPU_BUSY busy (its softirq work and any other task's
 * included), and the engine's own share of a core at least ENGINE_HEADROOM. The rest may be
 * the kernel's packet work for this end (softirq): the verdict is this end's CPU either way,
 * and its reason says which of the two had the core most (busiestBy). The engine's CPU
 * alone can stay under CPU_BUSY while its core is full: the kernel's packet work runs there as
 * softirq (charged to whichever task it interrupts, or to none), and an engine that waited for
 * its share of a core does not show the wait as its own time. The core's busy share is the union
 * of all of these, so nothing is counted twice. A light engine (a TCP sender behind a shaper at
 * 1-4% of a core) on a busy core is not what limited its run.
 */
const fullCore = (c: ReturnType<typeof cpu>) => !!c.busiest?.engine && c.busiest.busy >= CPU_BUSY && (c.engine ?? 0) >= ENGINE_HEADROOM;
/**
 * The engine used a whole core, or waited for one (someone else had it) CPU_WAIT of the run, or
 * was runnable (running or waiting to run) CPU_BUSY of it: half a core used and half the run
 * waited is a CPU-bound engine sharing its core; or its core was full, mostly with it (fullCore).
 */
const busy = (c: ReturnType<typeof cpu>) => (c.engine ?? 0) >= CPU_BUSY || (c.wait ?? 0) >= CPU_WAIT || (c.engine ?? 0) + (c.wait ?? 0) >= CPU_BUSY || fullCore(c);
/** A receiver's engine that waited a quarter of its run and CPU_STARVED times as long as it ran (both measured). */
const starved = (c: ReturnType<typeof cpu>) => c.engine !== null && c.wait !== null && c.wait >= CPU_WAIT / 2 && c.wait >= CPU_STARVED * c.engine;
/** A UDP sender that offered less than RATE_SHORTFALL of its rate over the run. */
const senderShort = (udp: UdpFigures): udp is UdpFigures & { targetPacketsPerSecond: number; achievedPacketsPerSecond: number } =>
  !!udp.targetPacketsPerSecond && udp.achievedPacketsPerSecond !== undefined && udp.achievedPacketsPerSecond < RATE_SHORTFALL * udp.targetPacketsPerSecond;
const cpuText = (c: ReturnType<typeof cpu>) =>
  [
    c.engine !== null ? `the engine used ${pct(c.engine)} of a core` : null,
    c.core !== null ? `its core (cpu${c.coreId}) was ${pct(c.core)} busy` : null,
    c.wait !== null ? `the engine waited for a CPU ${pct(c.wait)} of the run` : null,
    c.busiest ? `the busiest CPU, cpu${c.busiest.cpu}, was ${pct(c.busiest.busy)} busy (${pct(c.busiest.softirq)} softirq), mostly ${busiestBy(c.busiest, c.engine)}` : null,
  ].filter(Boolean).join(', ');

/**
 * What limited a leg, from its figures and both ends' host counters. Rules, in order:
 * An end's CPU is "busy" when its engine used CPU_BUSY of a core, or waited for a CPU at least
 * CPU_WAIT of the run, or the two together reach CPU_BUSY (another task had the core), or its
 * core was full with the engine at ENGINE_HEADROOM of it (fullCore).
 * 1. UDP sender below RATE_SHORTFALL of its offered rate with a busy CPU, and no shaper at the
 *    sender that held packets back (unless the engine used CPU_BUSY of a core itself): sender CPU.
 * 2. UDP loss: the place that lost the most names it (sender qdisc, or link when that qdisc is a
 *    shaper; sender NIC: link; network; receiver NIC; receiver backlog: receiver CPU; receiver
 *    socket buffer, or receiver CPU when the receiver's CPU was busy or its engine starved:
 *    CPU_STARVED).
 * 3. TCP: an end's busy CPU names that end's CPU; receive-queue drops, or the receiver's window
 *    holding the sender back WINDOW_LIMITED of its busy time (TCP_INFO), the receiver socket buffer.
 * 4. No loss: a shaper at the sender that held packets back (overlimits), or throughput at
 *    LINE_RATE of the link speed and not above it (a veth's nominal speed is no limit), is the link.
 * 5. UDP: none (the offered rate went through). TCP: path, or none (judgeTcpPath).
 */
export function judgeBottleneck(leg: LegView): Bottleneck | null {
  const s = leg.sender.diagnostics?.host;
  const r = leg.receiver.diagnostics?.host;
  if (!s && !r) return null;
  const confident = !!s && !!r && !s.overlapped && !r.overlapped;
  const caveat = !s || !r ? ` (${!s ? 'sender' : 'receiver'} counters missing)` : confident ? '' : ' (another leg shared a host: its traffic is in the counters)';
  const verdict = (v: Verdict, reason: string, evidence: Record<string, number>): Bottleneck => ({ verdict: v, reason: `${v}: ${reason}${caveat}`, evidence, confident });
  const sc = cpu(leg.sender);
  const rc = cpu(leg.receiver);
  const cpuEvidence: Record<string, number> = {};
  if (sc.engine !== null) cpuEvidence.senderEngineCpu = sc.engine;
  if (sc.core !== null) cpuEvidence.senderCoreBusy = sc.core;
  if (rc.engine !== null) cpuEvidence.receiverEngineCpu = rc.engine;
  if (rc.core !== null) cpuEvidence.receiverCoreBusy = rc.core;
  if (sc.wait !== null) cpuEvidence.senderEngineWaitShare = sc.wait;
  if (rc.wait !== null) cpuEvidence.receiverEngineWaitShare = rc.wait;
  for (const [end, c] of [['sender', sc], ['receiver', rc]] as const) {
    if (!c.busiest) continue;
    Object.assign(cpuEvidence, { [`${end}BusiestCpu`]: c.busiest.cpu, [`${end}BusiestCpuBusy`]: c.busiest.busy, [`${end}BusiestCpuSoftirq`]: c.busiest.softirq });
  }
  const udp = leg.udp;

  // A shaper at the sender that held packets back pushes back on a UDP socket (its send buffer
  // fills): the shortfall is the link's unless the engine itself used a whole core.
  const heldByShaper = !!s && (shaper(s)?.overlimits ?? 0) > 0 && (sc.engine ?? 0) < CPU_BUSY;
  if (udp && senderShort(udp) && busy(sc) && !heldByShaper) {
    return verdict('sender CPU', `achieved ${n(udp.achievedPacketsPerSecond)} of ${n(udp.targetPacketsPerSecond)} pps offered; ${cpuText(sc)}`, {
      ...cpuEvidence, targetPacketsPerSecond: udp.targetPacketsPerSecond, achievedPacketsPerSecond: udp.achievedPacketsPerSecond,
    });
  }

  if (udp && udp.lost > 0 && s && r) {
    const split = attributeLoss(udp, s, r, leg.shape);
    const [place, count] = PLACES.filter((p) => p !== 'unexplained').map((p) => [p, split[p]] as const).sort((a, b) => b[1] - a[1])[0]!;
    const evidence: Record<string, number> = { ...cpuEvidence, lost: udp.lost, sent: udp.sent, [place]: count, unexplained: split.unexplained };
    const of = `${n(count)} of ${n(udp.lost)} lost datagrams`;
    if (count <= 0) return { ...verdict('network', `no counter at either end saw any of ${n(udp.lost)} lost datagrams`, evidence), confident: false };
    switch (place) {
      case 'senderSocket': {
        const q = shaper(s);
        if (q && q.dropped > 0) return verdict('link', `${of} dropped by the shaper (${q.kind}) on the sender's ${leg.sender.diagnostics!.interface}; ${n((leg.bitsPerSecond ?? 0) / 1e6)} Mbit/s received`, { ...evidence, qdiscDropped: q.dropped, qdiscOverlimits: q.overlimits });
        return verdict('sender qdisc', `${of} (the sender's qdisc drops or Udp SndbufErrors)`, { ...evidence, qdiscDropped: qdiscDrops(s), sndbufErrors: udpStat(s, 'SndbufErrors') });
      }
      case 'senderNic':
        return verdict('link', `${of} dropped by the sender's NIC (tx_dropped, tx_errors, driver tx drops)`, evidence);
      case 'network':
        return verdict('network', `${of} left the sender's interface and never reached the receiver's${split.framesPerDatagram && split.framesPerDatagram > 1 ? ` (${split.framesPerDatagram} fragments a datagram)` : ''}`, {
          ...evidence, senderTxPackets: stat(s, 'tx_packets'), receiverRxPackets: stat(r, 'rx_packets'), framesPerDatagram: split.framesPerDatagram ?? 1, ...(r.ip?.ReasmFails ? { receiverReassemblyFails: r.ip.ReasmFails } : {}),
        });
      case 'receiverNic':
        return verdict('receiver NIC', `${of} dropped by the receiver's NIC (rx_dropped, missed, fifo, driver rx drops)`, evidence);
      case 'receiverBacklog':
        return verdict('receiver CPU', `${of} dropped from a full input backlog (softnet_stat dropped; time_squeeze ${n(r.softnet.timeSqueeze)})`, { ...evidence, softnetTimeSqueeze: r.softnet.timeSqueeze });
      default: {
        const rcvbuf = leg.receiver.diagnostics?.socketBuffers?.receiveBytes;
        const buffer = rcvbuf !== undefined ? `; SO_RCVBUF ${n(rcvbuf)} B` : '';
        if (busy(rc) || starved(rc)) return verdict('receiver CPU', `${of} (UdpRcvbufErrors) while ${cpuText(rc)}${buffer}`, evidence);
        return verdict('receiver socket buffer', `${of} (UdpRcvbufErrors)${buffer}`, { ...evidence, ...(rcvbuf !== undefined ? { receiveBufferBytes: rcvbuf } : {}) });
      }
    }
  }

  if (!udp) {
    // A TCP leg's retransmits with the drops each place counted, as context for whatever the verdict.
    Object.assign(cpuEvidence, leg.retransmits != null ? { retransmits: leg.retransmits } : {}, s && r ? tcpDrops(s, r) : {});
    // A file leg that went as fast as one of its disks alone: that disk (its slow reads or writes
    // also shut the window and idle the engines, so it comes before the rules that would see those).
    const disk = diskLimit(leg);
    if (disk) return verdict(disk.stage, disk.reason, { ...cpuEvidence, ...disk.evidence });
    if (busy(sc)) return verdict('sender CPU', cpuText(sc), cpuEvidence);
    if (busy(rc)) return verdict('receiver CPU', cpuText(rc), cpuEvidence);
    const queueDrops = r ? (r.tcpExt.TCPRcvQDrop ?? 0) + (r.tcpExt.TCPBacklogDrop ?? 0) : 0;
    if (queueDrops > 0) return verdict('receiver socket buffer', `${n(queueDrops)} segments dropped at the receiver's socket (TCPRcvQDrop, TCPBacklogDrop)`, { ...cpuEvidence, receiverQueueDrops: queueDrops });
    const shares = senderShares(leg.sender);
    if (shares) Object.assign(cpuEvidence, { senderBusyShare: shares.busy, receiveWindowLimitedShare: shares.receiveWindow, sendBufferLimitedShare: shares.sendBuffer });
    if (shares && shares.receiveWindow >= WINDOW_LIMITED) {
      const rcvbuf = leg.receiver.diagnostics?.socketBuffers?.receiveBytes;
      return verdict('receiver socket buffer', `the receiver's window held the sender back ${pct(shares.receiveWindow)} of the time it had data to send (TCP_INFO rwnd_limited)${rcvbuf !== undefined ? `; SO_RCVBUF ${n(rcvbuf)} B` : ''}; ${retransmitsText(leg.retransmits)}`, cpuEvidence);
    }
  }
  const q = s && shaper(s);
  if (q && (q.overlimits > 0 || q.dropped > 0)) {
    return verdict('link', `the shaper (${q.kind}) on the sender's ${leg.sender.diagnostics!.interface} held packets back ${n(q.overlimits)} times${udp ? '' : `; ${retransmitsText(leg.retransmits)}`}`, { ...cpuEvidence, qdiscOverlimits: q.overlimits, qdiscDropped: q.dropped });
  }
  const speeds = [leg.sender.diagnostics?.environment?.speedBitsPerSecond, leg.receiver.diagnostics?.environment?.speedBitsPerSecond].filter((v): v is number => typeof v === 'number' && v > 0);
  const speed = speeds.length ? Math.min(...speeds) : null;
  // Payload faster than the speed an interface reports (veth's nominal 10 Gbit/s, passed at 14 on two cores) says that speed is no limit.
  if (speed && leg.bitsPerSecond !== null && leg.bitsPerSecond >= LINE_RATE * speed && leg.bitsPerSecond <= speed) {
    return verdict('link', `${n(leg.bitsPerSecond / 1e6)} of ${n(speed / 1e6)} Mbit/s link speed`, { ...cpuEvidence, bitsPerSecond: leg.bitsPerSecond, linkBitsPerSecond: speed });
  }
  // Short of its rate with no busy CPU and no shaper: the sender was held off (stopped, or blocked), which no counter here names.
  if (udp && senderShort(udp)) {
    return { ...verdict('none', `the sender offered ${n(udp.achievedPacketsPerSecond)} of ${n(udp.targetPacketsPerSecond)} pps with no busy CPU or shaper to explain it; 0 of ${n(udp.sent)} datagrams lost`, { ...cpuEvidence, sent: udp.sent, targetPacketsPerSecond: udp.targetPacketsPerSecond, achievedPacketsPerSecond: udp.achievedPacketsPerSecond }), confident: false };
  }
  if (udp) return verdict('none', `0 of ${n(udp.sent)} datagrams lost at ${udp.achievedPacketsPerSecond !== undefined ? `${n(udp.achievedPacketsPerSecond)} pps` : 'the offered rate'}; no counter, CPU or link limited the run`, { ...cpuEvidence, sent: udp.sent });
  return judgeTcpPath(leg, { s, r, sc, rc, evidence: cpuEvidence, verdict });
}

/**
 * The disk that limited a file leg: the slower of its ends' disks alone, when the transfer moved
 * at least DISK_LIMITED of its rate; null when neither end measured one or the transfer stayed
 * well below both (something else set its rate).
 */
export function diskLimit(leg: Pick<LegView, 'file' | 'bitsPerSecond'>): { stage: 'source disk' | 'sink disk'; reason: string; evidence: Record<string, number> } | null {
  const file = leg.file;
  if (!file || leg.bitsPerSecond === null) return null;
  const disks = ([['source disk', file.source?.disk], ['sink disk', file.sink?.disk]] as const).filter((d): d is readonly ['source disk' | 'sink disk', NonNullable<typeof d[1]>] => !!d[1] && d[1].bitsPerSecond > 0);
  if (disks.length === 0) return null;
  const [stage, disk] = [...disks].sort((a, b) => a[1].bitsPerSecond - b[1].bitsPerSecond)[0]!;
  const share = leg.bitsPerSecond / disk.bitsPerSecond;
  if (share < DISK_LIMITED) return null;
  const mbit = (bits: number) => `${(bits / 1e6).toPrecision(3)} Mbit/s`;
  const how = stage === 'sink disk' ? `wrote alone (${file.ioMode})` : `read alone${file.source?.cacheDropped ? ', its cache dropped' : ' (through the page cache)'}`;
  const other = disks.find(([name]) => name !== stage);
  const evidence: Record<string, number> = { transferBitsPerSecond: leg.bitsPerSecond, diskShare: share };
  if (file.source?.disk) evidence.sourceDiskBitsPerSecond = file.source.disk.bitsPerSecond;
  if (file.sink?.disk) evidence.sinkDiskBitsPerSecond = file.sink.disk.bitsPerSecond;
  return {
    stage,
    reason: `the file moved at ${mbit(leg.bitsPerSecond)}, ${pct(share)} of what the ${stage === 'sink disk' ? "sink's" : "source's"} disk ${how} (${mbit(disk.bitsPerSecond)})${other ? `; the ${other[0]} did ${mbit(other[1].bitsPerSecond)}` : ''}`,
    evidence,
  };
}

interface TcpPathContext {
  s: HostCounters | undefined;
  r: HostCounters | undefined;
  sc: ReturnType<typeof cpu>;
  rc: ReturnType<typeof cpu>;
  evidence: Record<string, number>;
  verdict: (v: Verdict, reason: string, evidence: Record<string, number>) => Bottleneck;
}

/**
 * A TCP leg that no end, shaper or line rate explains: `path` when nothing at either end was
 * short and the congestion window set the rate: no drops at either end's qdisc, NIC, backlog or
 * socket; both engines under ENGINE_HEADROOM of a core; the receiver's window and the send
 * buffer holding the sender back under PATH_WINDOW_LIMITED of its busy time (TCP_INFO); the rate
 * steady (STEADY_CV) where there are samples to tell. Otherwise `none`: no one limit found, with
 * what was measured (iperf3 gives no TCP_INFO times: its legs stay `none`).
 */
function judgeTcpPath(leg: LegView, { s, r, sc, rc, evidence, verdict }: TcpPathContext): Bottleneck {
  const steady = steadiness(leg.intervals);
  const shares = senderShares(leg.sender);
  if (steady) Object.assign(evidence, { intervalCv: steady.cv, intervalSamples: steady.samples });
  const drops = s && r ? tcpDrops(s, r) : null;
  const local = drops ? drops.senderSocket + drops.senderNic + drops.receiverNic + drops.receiverBacklog + drops.receiverSocketBuffer : null;
  const rate = leg.bitsPerSecond !== null ? `${(leg.bitsPerSecond / 1e6).toPrecision(3)} Mbit/s` : 'the rate';
  const isSteady = steady === null || steady.cv <= STEADY_CV;
  const engines = [sc.engine, rc.engine];
  const headroom = engines.every((e) => e !== null && e < ENGINE_HEADROOM);
  const congestion = shares !== null && shares.receiveWindow + shares.sendBuffer < PATH_WINDOW_LIMITED;
  const parts = [
    steady ? `${rate} ${isSteady ? 'held steady' : 'varied'} (cv ${(steady.cv * 100).toFixed(1)}% over ${steady.samples} samples)` : `${rate} (too few interval samples for its steadiness)`,
    shares ? `the receiver's window and the send buffer held the sender back ${pct(shares.receiveWindow + shares.sendBuffer)} of the time it had data to send` : "the sender's TCP_INFO times are missing: a window limit is not ruled out",
    engines.every((e) => e !== null) ? `the engines used ${pct(sc.engine!)} and ${pct(rc.engine!)} of a core${headroom ? '' : ': a CPU limit is not ruled out'}` : 'an engine\'s CPU is unknown',
    local === null ? 'an end\'s counters are missing' : local > 0 ? `${n(local)} drops at the ends' qdiscs, NICs, backlog or socket` : 'no drops at either end',
  ];
  const retransmits = retransmitsText(leg.retransmits);
  if (local === 0 && headroom && congestion && isSteady) {
    return verdict('path', `${parts.join('; ')}: something between the two interfaces (a shaper, a slower link) set the rate; ${retransmits}`, evidence);
  }
  return verdict('none', `no one limit found: ${parts.join('; ')}; ${retransmits}`, evidence);
}

/** A TCP sender's TCP_INFO times as shares: busy of its run (per connection), the window and send-buffer limits of its busy time. */
function senderShares(end: EndView): { busy: number; receiveWindow: number; sendBuffer: number } | null {
  const t = end.diagnostics?.tcpTimes;
  const real = end.figures?.realSeconds;
  if (!t || !real || real <= 0 || t.busySeconds <= 0) return null;
  return { busy: Math.min(1, t.busySeconds / (real * t.connections)), receiveWindow: t.receiveWindowLimitedSeconds / t.busySeconds, sendBuffer: t.sendBufferLimitedSeconds / t.busySeconds };
}

/**
 * The coefficient of variation of the receiver's full interval samples (a trailing sliver under
 * half the longest left out), after the first (a TCP start) when two or more remain; null with fewer than two.
 */
export function steadiness(intervals: Interval[] = []): { cv: number; samples: number } | null {
  const length = (i: Interval) => i.end - i.start;
  const longest = Math.max(0, ...intervals.map(length));
  const full = intervals.filter((i) => length(i) >= longest / 2);
  const used = full.length >= 3 ? full.slice(1) : full;
  if (used.length < 2) return null;
  const m = used.reduce((a, i) => a + i.bitsPerSecond, 0) / used.length;
  if (m <= 0) return null;
  const sd = Math.sqrt(used.reduce((a, i) => a + (i.bitsPerSecond - m) ** 2, 0) / (used.length - 1));
  return { cv: sd / m, samples: used.length };
}

/** The "where lost" line of a report: the places that lost something, in path order. */
export function whereLost(split: LossAttribution): string {
  const parts = PLACES.filter((p) => split[p] !== 0).map((p) => `${PLACE_NAMES[p]} ${n(split[p])}`);
  return `where lost: ${parts.length ? parts.join(', ') : 'nowhere'}${split.overlapped ? ' (another leg shared a host)' : ''}`;
}

/** TCP retransmits as a reason says them: unknown where TCP_INFO could not be read, never a made-up 0. */
function retransmitsText(retransmits: number | null | undefined): string {
  return retransmits == null ? 'retransmits unknown' : `${n(retransmits)} retransmits`;
}
