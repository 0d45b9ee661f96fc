import assert from 'node:assert/strict';
import { test } from 'node:test';
import { flowResult } from '@niclab/coordinator/flow-result';
import { attributeLoss, judgeBottleneck, PLACES, whereLost, type EndView } from '@niclab/shared/domain/attribution';
import type { EndFigures, HostCounters, UdpFigures } from '@niclab/shared/domain/contract';
import type { EndReport, Leg } from '@niclab/shared/domain/task';

/** A host that counted nothing but the given deltas. */
function host(over: { stats?: Record<string, number>; udp?: Record<string, number>; tcpExt?: Record<string, number>; qdisc?: { kind: string; dropped?: number; overlimits?: number }; softnetDropped?: number; core?: number; wait?: number; overlapped?: boolean } = {}): HostCounters {
  return {
    interfaceStatistics: { rx_packets: 0, tx_packets: 0, rx_dropped: 0, tx_dropped: 0, ...over.stats },
    ethtool: null,
    nicDrops: { rx: 0, tx: 0 },
    qdiscs: over.qdisc ? [{ kind: over.qdisc.kind, handle: '8001:', root: true, packets: 0, bytes: 0, dropped: over.qdisc.dropped ?? 0, overlimits: over.qdisc.overlimits ?? 0, requeues: 0, backlog: 0, qlen: 0 }] : [{ kind: 'noqueue', handle: '0:', root: true, packets: 0, bytes: 0, dropped: 0, overlimits: 0, requeues: 0, backlog: 0, qlen: 0 }],
    softnet: { dropped: over.softnetDropped ?? 0, timeSqueeze: 0, perCpu: [] },
    udp: { RcvbufErrors: 0, SndbufErrors: 0, ...over.udp },
    tcpExt: over.tcpExt ?? {},
    cpu: { samples: 5, perCpu: [], engineCore: over.core === undefined ? null : 1, engineCoreBusy: over.core ?? null, engineWaitShare: over.wait ?? null },
    overlapped: over.overlapped ?? false,
  };
}
const udp = (sent: number, received: number, rest: Partial<UdpFigures> = {}): UdpFigures => ({ sent, received, lost: sent - received, outOfOrder: 0, duplicates: 0, jitterSeconds: 0, lossRatio: (sent - received) / sent, ...rest });
const figures = (cpuSeconds: number, realSeconds = 5): EndFigures => ({ bytes: 1, realSeconds, cpuSeconds, calls: 1, realBitsPerSecond: 1, cpuBitsPerSecond: 1, realCallsPerSecond: 1, cpuCallsPerSecond: 1 });
const end = (h: HostCounters | undefined, cpuSeconds = 0.5, rest: object = {}): EndView => ({ figures: figures(cpuSeconds), diagnostics: { agent: 'A', interface: 'eth1', address: '198.18.0.1', command: [], ...(h ? { host: h } : {}), ...rest } });
const sum = (split: ReturnType<typeof attributeLoss>) => PLACES.reduce((a, p) => a + split[p], 0);

test('the places add up to lost exactly, the remainder in unexplained (negative when the counters saw more)', () => {
  const sender = host({ stats: { tx_packets: 9_000 }, udp: { SndbufErrors: 700 }, qdisc: { kind: 'tbf', dropped: 1_000 } });
  const receiver = host({ stats: { rx_packets: 8_800, rx_dropped: 50 }, udp: { RcvbufErrors: 40 }, softnetDropped: 10 });
  const split = attributeLoss(udp(10_000, 8_710), sender, receiver);
  assert.deepEqual(
    { s: split.senderSocket, nic: split.senderNic, net: split.network, rnic: split.receiverNic, back: split.receiverBacklog, buf: split.receiverSocketBuffer },
    { s: 1_000, nic: 0, net: 150, rnic: 50, back: 10, buf: 40 },
    'qdisc drops and SndbufErrors are one drop seen twice: the larger; network is sent minus received minus the receiver NIC drops',
  );
  assert.equal(split.unexplained, 1_290 - 1_250);
  assert.equal(sum(split), split.lost);
  const over = attributeLoss(udp(100, 90), host(), host({ udp: { RcvbufErrors: 25 } }));
  assert.equal(over.unexplained, -15);
  assert.equal(sum(over), 10);
  assert.equal(whereLost(over), 'where lost: receiver socket buffer 25, unexplained -15');
});

test('verdicts: each place names its bottleneck, with the evidence and a reason a person can read', () => {
  const clean = host();
  const rcvbuf = judgeBottleneck({ udp: udp(13_352 * 2, 13_352), bitsPerSecond: 1e6, retransmits: null, sender: end(clean), receiver: end(host({ udp: { RcvbufErrors: 13_352 } }), 0.5, { socketBuffers: { sendBytes: 212_992, receiveBytes: 212_992 } }) })!;
  assert.equal(rcvbuf.verdict, 'receiver socket buffer');
  assert.equal(rcvbuf.reason, 'receiver socket buffer: 13,352 of 13,352 lost datagrams (UdpRcvbufErrors); SO_RCVBUF 212,992 B');
  assert.equal(rcvbuf.evidence.receiverSocketBuffer, 13_352);
  assert.equal(rcvbuf.confident, true);

  const taken = judgeBottleneck({ udp: udp(1_000, 500), bitsPerSecond: 1e6, retransmits: null, sender: end(clean), receiver: end(host({ udp: { RcvbufErrors: 500 }, core: 1, wait: 0.6 }), 2) })!;
  assert.equal(taken.verdict, 'receiver CPU', 'socket-buffer drops while the receiver\'s engine waited for its busy core: its CPU');
  assert.match(taken.reason, /its core \(cpu1\) was 100% busy, the engine waited for a CPU 60% of the run/);
  const othersBusy = judgeBottleneck({ udp: udp(1_000, 500), bitsPerSecond: 1e6, retransmits: null, sender: end(clean), receiver: end(host({ udp: { RcvbufErrors: 500 }, core: 1, wait: 0.45 }), 2) })!;
  assert.equal(othersBusy.verdict, 'receiver socket buffer', 'a busy core the engine waited for less than half the run (a loaded machine) did not starve it');

  const shaped = judgeBottleneck({ udp: udp(1_000, 600), bitsPerSecond: 2e7, retransmits: null, sender: end(host({ udp: { SndbufErrors: 400 }, qdisc: { kind: 'tbf', dropped: 400, overlimits: 900 } })), receiver: end(clean) })!;
  assert.equal(shaped.verdict, 'link');
  const fifo = judgeBottleneck({ udp: udp(1_000, 600), bitsPerSecond: 2e7, retransmits: null, sender: end(host({ qdisc: { kind: 'pfifo_fast', dropped: 400 } })), receiver: end(clean) })!;
  assert.equal(fifo.verdict, 'sender qdisc');
  const net = judgeBottleneck({ udp: udp(1_000, 600), bitsPerSecond: 1, retransmits: null, sender: end(host({ stats: { tx_packets: 1_000 } })), receiver: end(host({ stats: { rx_packets: 600 } })) })!;
  assert.equal(net.verdict, 'network');
  const nic = judgeBottleneck({ udp: udp(1_000, 600), bitsPerSecond: 1, retransmits: null, sender: end(host({ stats: { tx_packets: 1_000 } })), receiver: end(host({ stats: { rx_packets: 600, rx_missed_errors: 400 } })) })!;
  assert.equal(nic.verdict, 'receiver NIC');
  const backlog = judgeBottleneck({ udp: udp(1_000, 600), bitsPerSecond: 1, retransmits: null, sender: end(clean), receiver: end(host({ softnetDropped: 400 })) })!;
  assert.equal(backlog.verdict, 'receiver CPU');

  const slow = judgeBottleneck({ udp: udp(1_000, 1_000, { targetPacketsPerSecond: 70_000, achievedPacketsPerSecond: 41_200 }), bitsPerSecond: 1, retransmits: null, sender: end(clean, 4.9), receiver: end(clean) })!;
  assert.equal(slow.verdict, 'sender CPU');
  assert.match(slow.reason, /achieved 41,200 of 70,000 pps offered; the engine used 98% of a core/);
  const pushedBack = judgeBottleneck({ udp: udp(1_000, 1_000, { targetPacketsPerSecond: 4_000, achievedPacketsPerSecond: 2_376 }), bitsPerSecond: 2e7, retransmits: null, sender: end(host({ qdisc: { kind: 'tbf', overlimits: 5_000 }, core: 1, wait: 0.4 })), receiver: end(clean) })!;
  assert.equal(pushedBack.verdict, 'link', 'a shaper that held the sender back (its socket blocked) explains the shortfall, busy core or not');
  const notBusy = judgeBottleneck({ udp: udp(1_000, 1_000, { targetPacketsPerSecond: 70_000, achievedPacketsPerSecond: 41_200 }), bitsPerSecond: 1, retransmits: null, sender: end(clean, 1), receiver: end(clean) })!;
  assert.notEqual(notBusy.verdict, 'sender CPU', 'a short rate with an idle sender is not its CPU');
  // Issue 26's stopped sender (SIGSTOP through the run's end): it offered 270 of 2,000 pps and
  // used no CPU. Not its CPU, and not "nothing limited the run" either.
  const stopped = judgeBottleneck({ udp: udp(539, 539, { targetPacketsPerSecond: 2_000, achievedPacketsPerSecond: 539 / 2 }), bitsPerSecond: 1, retransmits: null, sender: end(host({ core: 0.1, wait: 0 }), 0.01), receiver: end(clean) })!;
  assert.deepEqual([stopped.verdict, stopped.confident], ['none', false]);
  assert.equal(stopped.reason, 'none: the sender offered 270 of 2,000 pps with no busy CPU or shaper to explain it; 0 of 539 datagrams lost');
  assert.equal(stopped.evidence.achievedPacketsPerSecond, 269.5);
  // Seen in CI: half a core used and half the run waited for one is a CPU-bound engine sharing its core.
  const shared = judgeBottleneck({ udp: udp(1_000, 1_000, { targetPacketsPerSecond: 70_000, achievedPacketsPerSecond: 41_200 }), bitsPerSecond: 1, retransmits: null, sender: end(host({ core: 1, wait: 0.496 }), 0.52 * 5), receiver: end(clean) })!;
  assert.equal(shared.verdict, 'sender CPU', shared.reason);

  assert.equal(judgeBottleneck({ udp: udp(1_000, 1_000), bitsPerSecond: 1, retransmits: null, sender: end(clean), receiver: end(clean) })!.verdict, 'none');
  assert.equal(judgeBottleneck({ udp: udp(1_000, 1_000), bitsPerSecond: 1, retransmits: null, sender: end(host({ qdisc: { kind: 'tbf', overlimits: 30 } })), receiver: end(clean) })!.verdict, 'link');
  assert.equal(judgeBottleneck({ udp: null, bitsPerSecond: 95e6, retransmits: 3, sender: end(clean, 0.5, { environment: { kernel: 'k', driver: null, firmware: null, mtu: 1500, speedBitsPerSecond: 1e8, rmemMax: 1, wmemMax: 1 } }), receiver: end(clean) })!.verdict, 'link');
  assert.equal(judgeBottleneck({ udp: null, bitsPerSecond: 1e6, retransmits: 3, sender: end(clean), receiver: end(clean, 4.8) })!.verdict, 'receiver CPU');
});

test('a TCP leg: its retransmits beside the drops each place counted, as context', () => {
  const b = judgeBottleneck({ udp: null, bitsPerSecond: 1e6, retransmits: 40, sender: end(host({ stats: { tx_packets: 1_000 }, qdisc: { kind: 'pfifo_fast', dropped: 7 } })), receiver: end(host({ stats: { rx_packets: 990 }, tcpExt: { TCPRcvQDrop: 2, TCPOFODrop: 1 }, softnetDropped: 3 })) })!;
  assert.deepEqual(
    [b.evidence.retransmits, b.evidence.senderSocket, b.evidence.network, b.evidence.receiverBacklog, b.evidence.receiverSocketBuffer],
    [40, 7, 10, 3, 3],
  );
  assert.equal(b.verdict, 'receiver socket buffer', b.reason);
});

test('overlapped or missing counters: the verdict says so and is not confident', () => {
  const b = judgeBottleneck({ udp: udp(100, 50), bitsPerSecond: 1, retransmits: null, sender: end(host()), receiver: end(host({ udp: { RcvbufErrors: 50 }, overlapped: true })) })!;
  assert.equal(b.confident, false);
  assert.match(b.reason, /another leg shared a host/);
  const half = judgeBottleneck({ udp: udp(100, 100), bitsPerSecond: 1, retransmits: null, sender: end(undefined), receiver: end(host()) })!;
  assert.equal(half.confident, false);
  assert.equal(judgeBottleneck({ udp: udp(100, 100), bitsPerSecond: 1, retransmits: null, sender: end(undefined), receiver: end(undefined) }), null);
});

test('a flow result carries the attribution and the verdict from both ends\' host counters', () => {
  const flow = { from: { agent: 'A', interface: 'eth1' }, to: { agent: 'B', interface: 'eth1' } };
  const leg: Leg = { flowIndex: 0, direction: 'forward', sender: flow.from, receiver: flow.to };
  const report = (role: EndReport['role'], h: HostCounters, rest: Partial<EndReport>): EndReport => ({
    leg: 0, role, figures: figures(0.5), intervals: [], nic: null, error: null, diagnostics: { agent: role === 'sender' ? 'A' : 'B', interface: 'eth1', address: '198.18.0.1', command: [], host: h }, ...rest,
  });
  const result = flowResult(flow, leg, report('sender', host({ stats: { tx_packets: 1_000 } }), { udp: { sent: 1_000 } }), report('receiver', host({ stats: { rx_packets: 1_000 }, udp: { RcvbufErrors: 100 } }), { udp: { received: 900 } }));
  assert.equal(result.lossAttribution!.receiverSocketBuffer, 100);
  assert.equal(result.lossAttribution!.unexplained, 0);
  assert.equal(result.bottleneck!.verdict, 'receiver socket buffer');
});
