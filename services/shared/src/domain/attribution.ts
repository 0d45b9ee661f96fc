import type { Bottleneck, EndDiagnostics, EndFigures, HostCounters, LossAttribution, UdpFigures, Verdict } from './contract.js';

/** A core this busy (0 to 1) over a run is what limited it. */
export const CPU_BUSY = 0.9;
/**
 * An engine that waited for a CPU this share of its run had its CPU taken by something else (a
 * runqueue wait means another task held the core). Unpinned engines on a two-core machine at
 * load 10-15 waited up to 45%; one pinned beside a real-time loop, 63%.
 */
export const CPU_WAIT = 0.5;
/** A sender that reached less than this share of its offered packet rate fell short. */
export const RATE_SHORTFALL = 0.95;
/** Throughput at this share of the slower interface's link speed is the link's limit. */
export const LINE_RATE = 0.9;
/** Qdiscs that hold a configured rate: their drops and overlimits are a shaped link's limit. */
export const SHAPERS = new Set(['tbf', 'htb', 'hfsc', 'cake', 'cbs', 'taprio', 'netem']);

/** One end of a leg as its report gave it: its engine's figures and its diagnostics (host counters among them). */
export interface EndView {
  figures: EndFigures | null;
  diagnostics: EndDiagnostics | undefined;
}

export interface LegView {
  udp: UdpFigures | null;
  bitsPerSecond: number | null;
  retransmits: number | null;
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

/**
 * Splits a UDP leg's `lost` by place, in path order, from both ends' host counters. Each place
 * is what its counters saw; `unexplained` is the rest, so the parts add up to `lost` exactly.
 */
export function attributeLoss(udp: UdpFigures, sender: HostCounters, receiver: HostCounters): LossAttribution {
  // A qdisc's drop reaches a UDP socket as ENOBUFS, which the kernel counts as SndbufErrors too: the larger, not the sum.
  const senderSocket = Math.max(udpStat(sender, 'SndbufErrors'), qdiscDrops(sender));
  // The NIC, network (left the sender's interface; the receiver's neither received nor dropped it) and backlog places are TCP's too.
  const { senderNic, network, receiverNic, receiverBacklog } = tcpDrops(sender, receiver);
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
  };
}

/** Every verdict, in the contract's order (a bounded label set for /metrics). */
export const VERDICTS: readonly Verdict[] = ['link', 'sender CPU', 'receiver CPU', 'sender qdisc', 'receiver socket buffer', 'receiver NIC', 'network', 'none'];

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
function cpu(end: EndView): { engine: number | null; core: number | null; coreId: number | null; wait: number | null } {
  const f = end.figures;
  const host = end.diagnostics?.host;
  return {
    engine: f && f.realSeconds > 0 ? f.cpuSeconds / f.realSeconds : null,
    core: host?.cpu.engineCoreBusy ?? null,
    coreId: host?.cpu.engineCore ?? null,
    wait: host?.cpu.engineWaitShare ?? null,
  };
}
/**
 * The engine used a whole core, or waited for one (someone else had it) CPU_WAIT of the run, or
 * was runnable (running or waiting to run) CPU_BUSY of it: half a core used and half the run
 * waited is a CPU-bound engine sharing its core.
 */
const busy = (c: ReturnType<typeof cpu>) => (c.engine ?? 0) >= CPU_BUSY || (c.wait ?? 0) >= CPU_WAIT || (c.engine ?? 0) + (c.wait ?? 0) >= CPU_BUSY;
/** A UDP sender that offered less than RATE_SHORTFALL of its rate over the run. */
const senderShort = (udp: UdpFigures): udp is UdpFigures & { targetPacketsPerSecond: number; achievedPacketsPerSecond: number } =>
  !!udp.targetPacketsPerSecond && udp.achievedPacketsPerSecond !== undefined && udp.achievedPacketsPerSecond < RATE_SHORTFALL * udp.targetPacketsPerSecond;
const cpuText = (c: ReturnType<typeof cpu>) =>
  [
    c.engine !== null ? `the engine used ${pct(c.engine)} of a core` : null,
    c.core !== null ? `its core (cpu${c.coreId}) was ${pct(c.core)} busy` : null,
    c.wait !== null ? `the engine waited for a CPU ${pct(c.wait)} of the run` : null,
  ].filter(Boolean).join(', ');

/**
 * What limited a leg, from its figures and both ends' host counters. Rules, in order:
 * An end's CPU is "busy" when its engine used CPU_BUSY of a core, or waited for a CPU at least
 * CPU_WAIT of the run, or the two together reach CPU_BUSY (another task had the core; the
 * core's busy share is evidence only).
 * 1. UDP sender below RATE_SHORTFALL of its offered rate with a busy CPU, and no shaper at the
 *    sender that held packets back (unless the engine used CPU_BUSY of a core itself): sender CPU.
 * 2. UDP loss: the place that lost the most names it (sender qdisc, or link when that qdisc is a
 *    shaper; sender NIC: link; network; receiver NIC; receiver backlog: receiver CPU; receiver
 *    socket buffer, or receiver CPU when the receiver's CPU was busy).
 * 3. TCP: an end's busy CPU names that end's CPU; receive-queue drops the receiver socket buffer.
 * 4. No loss: a shaper at the sender that held packets back (overlimits), or throughput at
 *    LINE_RATE of the link speed, is the link; otherwise none.
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
    const split = attributeLoss(udp, s, r);
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
        return verdict('network', `${of} left the sender's interface and never reached the receiver's`, { ...evidence, senderTxPackets: stat(s, 'tx_packets'), receiverRxPackets: stat(r, 'rx_packets') });
      case 'receiverNic':
        return verdict('receiver NIC', `${of} dropped by the receiver's NIC (rx_dropped, missed, fifo, driver rx drops)`, evidence);
      case 'receiverBacklog':
        return verdict('receiver CPU', `${of} dropped from a full input backlog (softnet_stat dropped; time_squeeze ${n(r.softnet.timeSqueeze)})`, { ...evidence, softnetTimeSqueeze: r.softnet.timeSqueeze });
      default: {
        const rcvbuf = leg.receiver.diagnostics?.socketBuffers?.receiveBytes;
        const buffer = rcvbuf !== undefined ? `; SO_RCVBUF ${n(rcvbuf)} B` : '';
        if (busy(rc)) return verdict('receiver CPU', `${of} (UdpRcvbufErrors) while ${cpuText(rc)}${buffer}`, evidence);
        return verdict('receiver socket buffer', `${of} (UdpRcvbufErrors)${buffer}`, { ...evidence, ...(rcvbuf !== undefined ? { receiveBufferBytes: rcvbuf } : {}) });
      }
    }
  }

  if (!udp) {
    // A TCP leg's retransmits with the drops each place counted, as context for whatever the verdict.
    Object.assign(cpuEvidence, leg.retransmits != null ? { retransmits: leg.retransmits } : {}, s && r ? tcpDrops(s, r) : {});
    if (busy(sc)) return verdict('sender CPU', cpuText(sc), cpuEvidence);
    if (busy(rc)) return verdict('receiver CPU', cpuText(rc), cpuEvidence);
    const queueDrops = r ? (r.tcpExt.TCPRcvQDrop ?? 0) + (r.tcpExt.TCPBacklogDrop ?? 0) : 0;
    if (queueDrops > 0) return verdict('receiver socket buffer', `${n(queueDrops)} segments dropped at the receiver's socket (TCPRcvQDrop, TCPBacklogDrop)`, { ...cpuEvidence, receiverQueueDrops: queueDrops });
  }
  const q = s && shaper(s);
  if (q && (q.overlimits > 0 || q.dropped > 0)) {
    return verdict('link', `the shaper (${q.kind}) on the sender's ${leg.sender.diagnostics!.interface} held packets back ${n(q.overlimits)} times${udp ? '' : `; ${retransmitsText(leg.retransmits)}`}`, { ...cpuEvidence, qdiscOverlimits: q.overlimits, qdiscDropped: q.dropped });
  }
  const speeds = [leg.sender.diagnostics?.environment?.speedBitsPerSecond, leg.receiver.diagnostics?.environment?.speedBitsPerSecond].filter((v): v is number => typeof v === 'number' && v > 0);
  const speed = speeds.length ? Math.min(...speeds) : null;
  if (speed && leg.bitsPerSecond !== null && leg.bitsPerSecond >= LINE_RATE * speed) {
    return verdict('link', `${n(leg.bitsPerSecond / 1e6)} of ${n(speed / 1e6)} Mbit/s link speed`, { ...cpuEvidence, bitsPerSecond: leg.bitsPerSecond, linkBitsPerSecond: speed });
  }
  const what = udp ? `0 of ${n(udp.sent)} datagrams lost` : retransmitsText(leg.retransmits);
  // Short of its rate with no busy CPU and no shaper: the sender was held off (stopped, or blocked), which no counter here names.
  if (udp && senderShort(udp)) {
    return { ...verdict('none', `the sender offered ${n(udp.achievedPacketsPerSecond)} of ${n(udp.targetPacketsPerSecond)} pps with no busy CPU or shaper to explain it; ${what}`, { ...cpuEvidence, sent: udp.sent, targetPacketsPerSecond: udp.targetPacketsPerSecond, achievedPacketsPerSecond: udp.achievedPacketsPerSecond }), confident: false };
  }
  return verdict('none', `${what}; no counter, CPU or link limited the run`, { ...cpuEvidence, ...(udp ? { sent: udp.sent } : {}) });
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
