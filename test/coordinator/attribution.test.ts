import assert from 'node:assert/strict';
import { test } from 'node:test';
import { flowResult } from '@niclab/coordinator/flow-result';
import { TEST_KINDS } from '@niclab/shared/domain/test-kinds/index';
import { attributeLoss, ENGINE_EXTRA_PACKETS, framesPerDatagram, judgeBottleneck, PLACES, STEADY_CV, steadiness, whereLost, type EndView } from '@niclab/shared/domain/attribution';
import type { EndFigures, HostCounters, Interval, UdpFigures } from '@niclab/shared/domain/contract';
import type { EndReport, Leg } from '@niclab/shared/domain/task';

/** A host that counted nothing but the given deltas. */
function host(over: { stats?: Record<string, number>; ip?: Record<string, number>; udp?: Record<string, number>; tcpExt?: Record<string, number>; qdisc?: { kind: string; dropped?: number; overlimits?: number }; softnetDropped?: number; core?: number; wait?: number; busiest?: NonNullable<HostCounters['cpu']['busiest']>; overlapped?: boolean } = {}): HostCounters {
  return {
    interfaceStatistics: { rx_packets: 0, tx_packets: 0, rx_dropped: 0, tx_dropped: 0, ...over.stats },
    ethtool: null,
    nicDrops: { rx: 0, tx: 0 },
    qdiscs: over.qdisc ? [{ kind: over.qdisc.kind, handle: '8001:', root: true, packets: 0, bytes: 0, dropped: over.qdisc.dropped ?? 0, overlimits: over.qdisc.overlimits ?? 0, requeues: 0, backlog: 0, qlen: 0 }] : [{ kind: 'noqueue', handle: '0:', root: true, packets: 0, bytes: 0, dropped: 0, overlimits: 0, requeues: 0, backlog: 0, qlen: 0 }],
    softnet: { dropped: over.softnetDropped ?? 0, timeSqueeze: 0, perCpu: [] },
    udp: { RcvbufErrors: 0, SndbufErrors: 0, ...over.udp },
    ...(over.ip ? { ip: over.ip } : {}),
    tcpExt: over.tcpExt ?? {},
    cpu: { samples: 5, perCpu: [], busiest: over.busiest ?? null, engineCore: over.core === undefined ? null : 1, engineCoreBusy: over.core ?? null, engineWaitShare: over.wait ?? null },
    overlapped: over.overlapped ?? false,
  };
}
const udp = (sent: number, received: number, rest: Partial<UdpFigures> = {}): UdpFigures => ({ sent, received, lost: sent - received, outOfOrder: 0, duplicates: 0, jitterSeconds: 0, lossRatio: (sent - received) / sent, ...rest });
const figures = (cpuSeconds: number, realSeconds = 5): EndFigures => ({ bytes: 1, realSeconds, cpuSeconds, userCpuSeconds: 0, systemCpuSeconds: cpuSeconds, calls: 1, realBitsPerSecond: 1, cpuBitsPerSecond: 1, realCallsPerSecond: 1, cpuCallsPerSecond: 1, serviceDemand: null });
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

test('frames per datagram: one while the datagram and its IP header fit the MTU, else fragments of 8-byte multiples', () => {
  assert.deepEqual([framesPerDatagram(1472, 1500), framesPerDatagram(1473, 1500), framesPerDatagram(3000, 1500), framesPerDatagram(9000, 1500), framesPerDatagram(8972, 9000)], [1, 2, 3, 7, 1]);
  // IPv6: a 40-byte header, and 8 more for the fragment header: 1448 bytes of the datagram per fragment.
  assert.deepEqual([framesPerDatagram(1452, 1500, true), framesPerDatagram(1453, 1500, true), framesPerDatagram(2888, 1500, true), framesPerDatagram(2889, 1500, true)], [1, 2, 2, 3]);
});

test('the network place counts datagrams: a fragmented one lost whole, other traffic out of the sender\'s interface left out', () => {
  // A lab run: 4,000 datagrams of 3,000 B (3 frames at MTU 1500) into a 20 Mbit/s switch-port tbf,
  // and the engine's 5 FINs. The tbf dropped 6,544 frames; 1,508 datagrams arrived (and 4 FINs).
  const shape = { packetSize: 3000, mtu: 1500, ipv6: false, extraPackets: ENGINE_EXTRA_PACKETS.builtin };
  const sender = host({ stats: { tx_packets: 12_015 }, ip: { FragOKs: 4_005, FragCreates: 12_015 } });
  const receiver = host({ stats: { rx_packets: 5_471 }, ip: { ReasmReqds: 5_471, ReasmOKs: 1_512 } });
  const split = attributeLoss(udp(4_000, 1_508), sender, receiver, shape);
  assert.deepEqual([split.framesPerDatagram, split.network, split.unexplained], [3, 2_492, 0], 'sent whole and never reassembled (2,493, a FIN among them), not the 6,544 frames, and at most the 2,492 lost');
  assert.equal(attributeLoss(udp(4_000, 1_508), sender, receiver).network, 2_492, 'without the shape: the 6,544 frames, but never more than the datagrams lost');
  // A clean lab run: nothing lost, and one frame (an ARP) out of the sender the receiver's interface did not count.
  const clean = attributeLoss(udp(1_000, 1_000), host({ stats: { tx_packets: 1_006 } }), host({ stats: { rx_packets: 1_005 } }), { packetSize: 1000, mtu: 1500, ipv6: false, extraPackets: ENGINE_EXTRA_PACKETS.builtin });
  assert.deepEqual([clean.network, clean.unexplained], [0, 0], 'nothing lost: no datagram lost in the network');
  // The same without the datagrams' shape: every frame out is the leg's, the ARP too, and still no datagram lost.
  const cleanNoShape = attributeLoss(udp(1_000, 1_000), host({ stats: { tx_packets: 1_006 } }), host({ stats: { rx_packets: 1_005 } }));
  assert.deepEqual([cleanNoShape.network, cleanNoShape.unexplained], [0, 0], 'nothing lost, without the shape: no datagram lost in the network');
  const noIp = attributeLoss(udp(4_000, 1_508), host({ stats: { tx_packets: 12_015 } }), host({ stats: { rx_packets: 5_471 } }), shape);
  assert.equal(noIp.network, Math.ceil(6_544 / 3), 'without the Ip counters: at least the frames lost over 3');
  // 1,000 datagrams, 100 dropped by the receiver's socket; 3,000 more frames of other traffic left the sender's interface.
  const busy = (engine: 'builtin' | 'iperf3') => attributeLoss(udp(1_000, 900), host({ stats: { tx_packets: 1_005 + 3_000 } }), host({ stats: { rx_packets: 1_005 }, udp: { RcvbufErrors: 100 } }), { packetSize: 1000, mtu: 1500, ipv6: false, extraPackets: ENGINE_EXTRA_PACKETS[engine] });
  // The leg's own frames out are at most 1,000 and the engine's extra packets (8; 32 for iperf3's control connection), not 4,005.
  assert.deepEqual([busy('builtin').network, busy('builtin').receiverSocketBuffer, busy('builtin').unexplained], [3, 100, -3], 'the other traffic is not lost datagrams');
  assert.equal(busy('iperf3').network, 1_032 - 1_005);
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
  // The lab's starved receiver: 43% of its run waited (its run counts its idle time before and
  // after the send), 8.6 times the 5% of a core it got. Not so a short wait, nor one under 6x its
  // CPU (a loaded machine's receiver at 10% of a core, waiting 45%), nor a wait without its CPU.
  const receiverWith = (wait: number, cpuSeconds: number | null) => judgeBottleneck({ udp: udp(1_000, 500), bitsPerSecond: 1e6, retransmits: null, sender: end(clean), receiver: cpuSeconds === null ? { figures: null, diagnostics: { agent: 'B', interface: 'eth1', address: '198.18.0.2', command: [], host: host({ udp: { RcvbufErrors: 500 }, core: 1, wait }) } } : end(host({ udp: { RcvbufErrors: 500 }, core: 1, wait }), cpuSeconds) })!.verdict;
  assert.equal(receiverWith(0.43, 0.25), 'receiver CPU');
  assert.equal(receiverWith(0.2, 0.02), 'receiver socket buffer', 'a fifth of the run waited is no starvation');
  assert.equal(receiverWith(0.45, 0.5), 'receiver socket buffer', 'waiting 4.5 times its 10% of a core');
  assert.equal(receiverWith(0.45, null), 'receiver socket buffer', 'without the engine\'s CPU, the wait alone says nothing of starvation');
  // Starvation is a receiver's rule: a TCP sender behind a shaper (3% of a core) that waited 30% on a loaded host is held by the link.
  const tcpShaped = judgeBottleneck({ udp: null, bitsPerSecond: 2e7, retransmits: 0, sender: end(host({ qdisc: { kind: 'tbf', overlimits: 5_000 }, core: 1, wait: 0.3 }), 0.15), receiver: end(clean) })!;
  assert.equal(tcpShaped.verdict, 'link', tcpShaped.reason);

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

  // The CPU verdict names the busiest CPU and who had it: the engine, or the kernel's softirq work.
  const tcp = (sender: EndView, receiver: EndView) => judgeBottleneck({ udp: null, bitsPerSecond: 9e9, retransmits: 0, sender, receiver })!;
  const byEngine = tcp(end(host({ busiest: { cpu: 1, busy: 0.99, softirq: 0.05, engine: true } }), 4.9), end(clean));
  assert.equal(byEngine.verdict, 'sender CPU');
  assert.match(byEngine.reason, /the busiest CPU, cpu1, was 99% busy \(5% softirq\), mostly the engine/);
  assert.deepEqual([byEngine.evidence.senderBusiestCpu, byEngine.evidence.senderBusiestCpuSoftirq], [1, 0.05]);
  const bySoftirq = tcp(end(clean), end(host({ busiest: { cpu: 3, busy: 0.97, softirq: 0.6, engine: true }, wait: 0.55 }), 2));
  assert.equal(bySoftirq.verdict, 'receiver CPU');
  assert.match(bySoftirq.reason, /cpu3, was 97% busy \(60% softirq\), mostly softirq/);
  assert.match(tcp(end(host({ busiest: { cpu: 0, busy: 0.95, softirq: 0.1, engine: false }, wait: 0.6 }), 2), end(clean)).reason, /cpu0, .* mostly another task/);

  assert.equal(judgeBottleneck({ udp: udp(1_000, 1_000), bitsPerSecond: 1, retransmits: null, sender: end(clean), receiver: end(clean) })!.verdict, 'none');
  assert.equal(judgeBottleneck({ udp: udp(1_000, 1_000), bitsPerSecond: 1, retransmits: null, sender: end(host({ qdisc: { kind: 'tbf', overlimits: 30 } })), receiver: end(clean) })!.verdict, 'link');
  assert.equal(judgeBottleneck({ udp: null, bitsPerSecond: 95e6, retransmits: 3, sender: end(clean, 0.5, { environment: { kernel: 'k', driver: null, firmware: null, mtu: 1500, speedBitsPerSecond: 1e8, rmemMax: 1, wmemMax: 1 } }), receiver: end(clean) })!.verdict, 'link');
  assert.equal(judgeBottleneck({ udp: null, bitsPerSecond: 1e6, retransmits: 3, sender: end(clean), receiver: end(clean, 4.8) })!.verdict, 'receiver CPU');
  // veth reports 10 Gbit/s and carried 14.4 (a lab run, before the full-core rule): a speed the payload passed was no limit.
  const nominal = judgeBottleneck({ udp: null, bitsPerSecond: 14.4e9, retransmits: 3, sender: end(clean, 0.5, { environment: { kernel: 'k', driver: 'veth', firmware: null, mtu: 1500, speedBitsPerSecond: 1e10, rmemMax: 1, wmemMax: 1 } }), receiver: end(clean) })!;
  assert.notEqual(nominal.verdict, 'link', nominal.reason);
});

test('a TCP leg: its retransmits beside the drops each place counted, as context', () => {
  const b = judgeBottleneck({ udp: null, bitsPerSecond: 1e6, retransmits: 40, sender: end(host({ stats: { tx_packets: 1_000 }, qdisc: { kind: 'pfifo_fast', dropped: 7 } })), receiver: end(host({ stats: { rx_packets: 990 }, tcpExt: { TCPRcvQDrop: 2, TCPOFODrop: 1 }, softnetDropped: 3 })) })!;
  assert.deepEqual(
    [b.evidence.retransmits, b.evidence.senderSocket, b.evidence.network, b.evidence.receiverBacklog, b.evidence.receiverSocketBuffer],
    [40, 7, 10, 3, 3],
  );
  assert.equal(b.verdict, 'receiver socket buffer', b.reason);
});

/** Interval samples of `seconds` each at these Mbit/s. */
const samples = (mbits: number[], seconds = 0.5): Interval[] => mbits.map((m, i) => ({ start: i * seconds, end: (i + 1) * seconds, bitsPerSecond: m * 1e6 }));
const times = (busySeconds: number, receiveWindowLimitedSeconds = 0, connections = 1) => ({ tcpTimes: { connections, busySeconds, receiveWindowLimitedSeconds, sendBufferLimitedSeconds: 0 } });

test('steadiness: the coefficient of variation of the full samples after the first, a trailing sliver left out', () => {
  // After the first (TCP's start): 95, 96, 97 -> mean 96, sample sd 1, cv 1/96; the 0.1 s sliver at 44 is not a sample.
  const st = steadiness([...samples([60, 95, 96, 97], 1), { start: 4, end: 4.1, bitsPerSecond: 44e6 }])!;
  assert.equal(st.samples, 3);
  assert.ok(Math.abs(st.cv - 1 / 96) < 1e-12, String(st.cv));
  assert.equal(steadiness(samples([96], 1)), null, 'one sample says nothing of steadiness');
  assert.equal(steadiness(samples([90, 100], 1))!.samples, 2, 'two samples: both are used');
});

test('a TCP leg that nothing at either end limited, at a steady rate the congestion window set: path, not none', () => {
  const lab = host({ stats: { tx_packets: 40_000 }, core: 1, wait: 0.02 });
  const far = host({ stats: { rx_packets: 39_000 }, core: 1, wait: 0.28 });
  // The README tour's A -> D through the switch port's 100 Mbit/s tbf (figures of a lab run: 3 s, 0.5 s samples).
  const tour = { udp: null, bitsPerSecond: 95.3e6, retransmits: 0, intervals: samples([96.5, 95.6, 95.5, 95.6, 94.8, 95.9, 89.7]), sender: end(lab, 0.08, times(3.196)), receiver: end(far, 0.56) };
  const path = judgeBottleneck({ ...tour, sender: { ...tour.sender, figures: figures(0.08, 3.289) } })!;
  assert.equal(path.verdict, 'path', path.reason);
  assert.equal(path.confident, true);
  assert.equal(path.reason, "path: 95.3 Mbit/s held steady (cv 2.5% over 6 samples); the receiver's window and the send buffer held the sender back 0% of the time it had data to send; the engines used 2% and 11% of a core; no drops at either end: something between the two interfaces (a shaper, a slower link) set the rate; 0 retransmits");
  assert.deepEqual([path.evidence.intervalSamples, path.evidence.receiveWindowLimitedShare, path.evidence.network], [6, 0, 1_000]);

  const sender = (t: object, cpuSeconds = 0.08, real = 3.289) => ({ ...tour.sender, figures: figures(cpuSeconds, real), diagnostics: { ...tour.sender.diagnostics!, ...t } });
  // Unshaped veth at load 3 (a lab run that the first rule called path): steady enough, its window
  // rarely shut, but its engines at 56% and 69% of a core: a CPU limit is not ruled out.
  const free = judgeBottleneck({ ...tour, bitsPerSecond: 8.41e9, intervals: samples([7800, 8600, 8300, 8900]), sender: sender(times(1.9, 0.168), 0.564 * 2.04, 2.04), receiver: end(host({ stats: { rx_packets: 39_000 }, core: 1, wait: 0.13 }), 0.69 * 5) })!;
  assert.equal(free.verdict, 'none', free.reason);
  assert.match(free.reason, /^none: no one limit found: .*the engines used 56% and 69% of a core: a CPU limit is not ruled out/);
  // 8 KiB socket buffers: the receiver's window held the sender back 39% of the time it had data.
  const window = judgeBottleneck({ ...tour, intervals: samples([1250, 1290, 1270, 1300]), sender: sender(times(1.72, 0.671), 1.3, 2.0), receiver: end(far, 3, { socketBuffers: { sendBytes: 16_384, receiveBytes: 16_384 } }) })!;
  assert.equal(window.verdict, 'receiver socket buffer', window.reason);
  assert.match(window.reason, /the receiver's window held the sender back 39% of the time it had data to send \(TCP_INFO rwnd_limited\); SO_RCVBUF 16,384 B/);
  // Four connections: busy time is summed over them.
  const four = judgeBottleneck({ ...tour, sender: sender(times(4 * 3.2, 0, 4)) })!;
  assert.equal(four.verdict, 'path', four.reason);
  // Drops at an end are an end's limit, not the path's; a window shut a tenth of the time is not the path's; a rate that varied past STEADY_CV is not steady.
  assert.equal(judgeBottleneck({ ...tour, receiver: end(host({ stats: { rx_packets: 39_000 }, softnetDropped: 3 }), 0.56) })!.verdict, 'none');
  assert.equal(judgeBottleneck({ ...tour, sender: sender(times(3.196, 0.33)) })!.verdict, 'none');
  // Four samples after the first at 1 ± k: sample sd k·2/√3, so k = cv·√3/2 gives that cv exactly.
  const cv = (c: number, k = (c * Math.sqrt(3)) / 2) => samples([100, 100 * (1 - k), 100 * (1 + k), 100 * (1 - k), 100 * (1 + k)]);
  assert.equal(judgeBottleneck({ ...tour, intervals: cv(STEADY_CV * 0.9) })!.verdict, 'path');
  assert.equal(judgeBottleneck({ ...tour, intervals: cv(STEADY_CV * 1.1) })!.verdict, 'none');
  assert.equal(judgeBottleneck({ ...tour, intervals: samples([95], 1) })!.verdict, 'path', 'too few samples for steadiness: the rest decides');
  // Without TCP_INFO (iperf3) a window limit cannot be ruled out: none, and the reason says why.
  const iperf3 = judgeBottleneck({ ...tour, sender: end(lab, 0.02) })!;
  assert.equal(iperf3.verdict, 'none');
  assert.match(iperf3.reason, /TCP_INFO times are missing: a window limit is not ruled out/);
  // A busy CPU is still that end's, whatever the rate did.
  assert.equal(judgeBottleneck({ ...tour, receiver: end(host({ core: 1, wait: 0.6 }), 0.5) })!.verdict, 'receiver CPU');
});

test("a TCP end whose engine used most of a core that was full: that end's CPU, not none", () => {
  const steadyVeth = samples([14_300, 14_400, 14_500, 14_400]);
  const tcp = (sender: EndView, receiver: EndView) => judgeBottleneck({ udp: null, bitsPerSecond: 14.4e9, retransmits: 0, intervals: steadyVeth, sender, receiver })!;
  const calm = host({ core: 0.5, wait: 0.05 });
  // A receiver's engine at 80% of a core (Node's receiver at 128 KiB on loopback: 79-83%), its
  // core 97% busy and mostly it, waiting 5%: under 90% by its own time, and by its time and wait;
  // the core was full, so the rate was niclab's.
  const full = host({ core: 0.97, wait: 0.05, busiest: { cpu: 1, busy: 0.97, softirq: 0.15, engine: true } });
  const atReceiver = tcp(end(calm, 0.5 * 5, times(4.9)), end(full, 0.8 * 5));
  assert.equal(atReceiver.verdict, 'receiver CPU', atReceiver.reason);
  assert.match(atReceiver.reason, /the engine used 80% of a core, .*the busiest CPU, cpu1, was 97% busy \(15% softirq\), mostly the engine/);
  assert.equal(tcp(end(full, 0.8 * 5, times(4.9)), end(calm, 0.5 * 5)).verdict, 'sender CPU');
  // The raw receiver's run on unshaped veth (lab): the sender's engine at 78% of a core, waiting
  // 8%, its core 80% busy (22% softirq, which this kernel's tick accounting also charges to the
  // task it interrupts): a fifth of the core idle, so not a full core.
  const veth = host({ core: 0.8, wait: 0.08, busiest: { cpu: 0, busy: 0.8, softirq: 0.22, engine: true } });
  assert.notEqual(tcp(end(veth, 0.78 * 5, times(4.9)), end(calm, 0.6 * 5)).verdict, 'sender CPU');
  // A full core the engine did not run on most of the run, or beside an engine under half a core
  // (a light TCP sender behind a shaper), is not that engine's limit.
  const elsewhere = host({ core: 0.5, wait: 0.05, busiest: { cpu: 0, busy: 0.97, softirq: 0.15, engine: false } });
  assert.notEqual(tcp(end(elsewhere, 0.8 * 5, times(4.9)), end(calm, 0.4 * 5)).verdict, 'sender CPU');
  const light = host({ core: 0.97, wait: 0.05, busiest: { cpu: 0, busy: 0.97, softirq: 0.6, engine: true } });
  assert.notEqual(tcp(end(light, 0.3 * 5, times(4.9)), end(calm, 0.4 * 5)).verdict, 'sender CPU');
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
  const result = flowResult(TEST_KINDS.stream, flow, leg, report('sender', host({ stats: { tx_packets: 1_000 } }), { udp: { sent: 1_000 } }), report('receiver', host({ stats: { rx_packets: 1_000 }, udp: { RcvbufErrors: 100 } }), { udp: { received: 900 } }));
  assert.equal(result.lossAttribution!.receiverSocketBuffer, 100);
  assert.equal(result.lossAttribution!.unexplained, 0);
  assert.equal(result.bottleneck!.verdict, 'receiver socket buffer');
});
