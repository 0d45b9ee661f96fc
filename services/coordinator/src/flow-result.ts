import type { EngineName, ErrorInfo, FileStages, FlowResult, FlowSpec, UdpFigures } from '@niclab/shared/domain/contract';
import type { EndReport, Leg } from '@niclab/shared/domain/task';
import { attributeLoss, ENGINE_EXTRA_PACKETS, judgeBottleneck, type DatagramShape } from '@niclab/shared/domain/attribution';
import { pickError } from './run-outcome.js';
import { ABSENT_KIND_FIELDS, type TestKind } from '@niclab/shared/domain/test-kinds/index';

/**
 * One leg's result from its two ends' reports, for a flow of test kind `kind` (which merges its
 * own figures); `wire` is a UDP leg's datagram payload and its engine.
 */
export function flowResult(kind: TestKind, flow: FlowSpec, leg: Leg, sender: EndReport | undefined, receiver: EndReport | undefined, wire?: { packetSize: number; engine: EngineName }): FlowResult {
  const missing = (end: string, endpoint: Leg['sender']): ErrorInfo => ({
    code: 'no_report',
    message: `the ${end} on agent ${endpoint.agent} (${endpoint.interface}) did not report before the run's deadline`,
  });
  const error = pickError([sender?.error, receiver?.error, sender ? null : missing('sender', leg.sender), receiver ? null : missing('receiver', leg.receiver)]);
  const sent = sender?.figures ?? null;
  const received = receiver?.figures ?? null;
  const nicSender = sender?.nic ?? null;
  const nicReceiver = receiver?.nic ?? null;
  // The named interfaces carried the leg when their counters account for at least the payload
  // that crossed it: what the receiver got left through the sender's interface and came in
  // through the receiver's. Not what the sender wrote: iperf3's sum_sent counts what it wrote
  // into its socket, and what was still queued there when the test ended never left (on a
  // 20 Mbit/s link, 0.6 MB of 5.5 MB). Sent and nothing arrived (a UDP leg into a black hole):
  // not proven. Nothing sent either: nothing to verify.
  const pathVerified = error || !received || !nicSender || !nicReceiver || (received.bytes === 0 && !sent?.bytes)
    ? null
    : received.bytes > 0 && nicSender.txBytes >= received.bytes && nicReceiver.rxBytes >= received.bytes;
  const forward = leg.direction === 'forward';
  const udp = udpFigures(sender, receiver);
  const senderHost = sender?.diagnostics.host;
  const receiverHost = receiver?.diagnostics.host;
  // The kinds' own fields: every kind's absent value (null), then this flow's kind's merge of its
  // two ends. Typed as the one the contract requires of every result (rr; the others are optional).
  const kindFields = { ...ABSENT_KIND_FIELDS, ...kind.result(sender, receiver) } as Pick<FlowResult, 'rr'> & Partial<FlowResult>;
  const result: FlowResult = {
    flowIndex: leg.flowIndex,
    direction: leg.direction,
    from: flow.from,
    to: flow.to,
    sender: sent,
    receiver: received,
    bitsPerSecond: received ? received.realBitsPerSecond : null,
    retransmits: sender?.retransmits ?? null,
    udp,
    ...kindFields,
    intervals: receiver?.intervals ?? [],
    nic: forward ? { from: nicSender, to: nicReceiver } : { from: nicReceiver, to: nicSender },
    pathVerified,
    error,
    diagnostics: {},
  };
  if (sender) result.diagnostics.sender = sender.diagnostics;
  if (receiver) result.diagnostics.receiver = receiver.diagnostics;
  const file = fileStages(sender, receiver);
  if (file) result.file = file;
  if (error) return result;
  // The sender's interface fragments a datagram to its MTU: the network place counts datagrams from its frames.
  const shape: DatagramShape | undefined = wire && sender
    ? { packetSize: wire.packetSize, mtu: sender.diagnostics.environment?.mtu, ipv6: sender.diagnostics.address.includes(':'), extraPackets: ENGINE_EXTRA_PACKETS[wire.engine] }
    : undefined;
  result.lossAttribution = udp && senderHost && receiverHost ? attributeLoss(udp, senderHost, receiverHost, shape) : null;
  // A request/response or probe leg measures round trips, not throughput: a throughput verdict would be made up.
  if (!kind.judgesThroughput) {
    result.bottleneck = null;
    return result;
  }
  result.bottleneck = judgeBottleneck({
    udp,
    bitsPerSecond: result.bitsPerSecond,
    retransmits: result.retransmits,
    intervals: result.intervals,
    ...(shape ? { shape } : {}),
    ...(file ? { file } : {}),
    sender: { figures: sent, diagnostics: sender?.diagnostics },
    receiver: { figures: received, diagnostics: receiver?.diagnostics },
  });
  return result;
}

/** A file leg's ends as one: the sender's source and the receiver's sink, each with its disk alone; undefined when neither end had a file. */
function fileStages(sender: EndReport | undefined, receiver: EndReport | undefined): FileStages | undefined {
  const source = sender?.file?.role === 'source' ? sender.file : undefined;
  const sink = receiver?.file?.role === 'sink' ? receiver.file : undefined;
  if (!source && !sink) return undefined;
  return { ioMode: (sink ?? source)!.ioMode, source: source?.source ?? null, sink: sink?.sink ?? null };
}

/** A UDP leg's counts: what the sender sent, what the receiver got, lost and saw out of order. */
function udpFigures(sender: EndReport | undefined, receiver: EndReport | undefined): UdpFigures | null {
  const sent = sender?.udp;
  const got = receiver?.udp;
  if (!sent && !got) return null;
  const received = got?.received ?? 0;
  // Lost is what was sent and never arrived. A receiver counts only the gaps it saw, which
  // misses datagrams dropped after its last arrival; with the sender's count, nothing is missed.
  const lost = sent?.sent !== undefined ? Math.max(0, sent.sent - received) : (got?.lost ?? 0);
  const figures: UdpFigures = {
    sent: sent?.sent ?? received + lost,
    received,
    lost,
    outOfOrder: got?.outOfOrder ?? 0,
    duplicates: got?.duplicates ?? 0,
    jitterSeconds: got?.jitterSeconds ?? 0,
    lossRatio: received + lost > 0 ? lost / (received + lost) : 0,
  };
  if (sent?.targetPacketsPerSecond !== undefined) figures.targetPacketsPerSecond = sent.targetPacketsPerSecond;
  if (sent?.achievedPacketsPerSecond !== undefined) figures.achievedPacketsPerSecond = sent.achievedPacketsPerSecond;
  if (sent?.lateDatagrams !== undefined) figures.lateDatagrams = sent.lateDatagrams;
  if (got?.arrivalTimes) figures.arrivalTimes = got.arrivalTimes;
  // Send times come from the sender's clock, arrivals from the receiver's: only one clock makes a delay.
  if (got?.oneWayDelaySeconds && sender?.bootId && sender.bootId === receiver?.bootId) figures.oneWayDelaySeconds = got.oneWayDelaySeconds;
  return figures;
}
