import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ENGINE_EXTRA_PACKETS } from '@niclab/shared/domain/attribution';
import { bareIperf3Udp, flow, NOT_ROOT, qdiscDrops, snmpCounter, startTestLab, steadyRate, watchRxPackets, type TestLab } from '../helpers/lab.js';

const middle = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)]!;
const show = (values: number[], digits = 0) => values.map((v) => v.toFixed(digits)).join(' ');
/** Ethernet frames per datagram at the lab's MTU of 1500: UDP payload and header in IP fragments of at most 1480 bytes. */
const framesPerDatagram = (packetSize: number) => Math.ceil((packetSize + 8) / 1480);
/** The share of a datagram's frame that is payload: 14 B Ethernet, 20 B IP and 8 B UDP headers (tbf meters whole frames). */
const payloadShare = (packetSize: number) => packetSize / (packetSize + 42);

// A and B unshaped, C behind 100 Mbit/s: the rude/crude experiment of seed 002.
describe('builtin UDP at a constant packet rate on the lab', { skip: NOT_ROOT }, () => {
  let t: TestLab;
  before(async () => {
    t = await startTestLab(3, 'A=none,B=none,C=100mbit');
  });
  after(async () => {
    await t?.close();
  });

  const run = async (spec: Record<string, unknown>) => (await t.client.succeed({ engine: 'builtin', protocol: 'udp', ...spec }, 60_000)).runs[0].flows[0];
  const host = (name: string) => t.lab.hosts.find((h) => h.name === name)!;

  /** What a run delivered to the receiver's NIC, counted in the receiver's namespace by the test itself. */
  async function atReceiver<T>(to: string, packetSize: number, seconds: number, measure: () => Promise<T>) {
    const receiver = host(to);
    const rcvbuf = await snmpCounter(receiver.namespace, 'Udp', 'RcvbufErrors');
    const delivered = await snmpCounter(receiver.namespace, 'Udp', 'InDatagrams');
    const watch = watchRxPackets(receiver.agentPid!);
    let samples;
    let result: T;
    try {
      result = await measure();
    } finally {
      samples = watch.stop();
    }
    const steady = steadyRate(samples);
    const frames = framesPerDatagram(packetSize);
    return {
      result,
      /** Datagrams per second that reached the NIC over the run's nominal seconds (a sender that stalls sends fewer, as rude's does). */
      rate: steady.packets / frames / seconds,
      /** How long datagrams kept arriving, by the test's clock. */
      burstSeconds: steady.seconds,
      /** The same in the steady middle of the run, with the bounds the sampling allows. */
      steady: steady.rate / frames,
      low: steady.low / frames,
      high: steady.high / frames,
      /** Datagrams the NIC received over the whole run (a few frames of ARP aside). */
      datagrams: steady.packets / frames,
      rcvbufErrors: (await snmpCounter(receiver.namespace, 'Udp', 'RcvbufErrors')) - rcvbuf,
      /** Datagrams C's kernel delivered to a UDP socket (its Udp InDatagrams): the test's alone, where the NIC's count also has ARP and the engines' TCP control. */
      delivered: (await snmpCounter(receiver.namespace, 'Udp', 'InDatagrams')) - delivered,
    };
  }

  /** Rounds of niclab and bare iperf3 -u alternating at one rate and size, A -> B, B's NIC counting both. */
  async function alternateAtB(packetsPerSecond: number, packetSize: number, seconds: number, rounds: number) {
    const udp = { packetSize, rate: { packetsPerSecond } };
    const runs = [];
    for (let i = 0; i < rounds; i++) {
      const niclab = await atReceiver('B', packetSize, seconds, () => run({ duration: seconds, socketBuffer: 4194304, udp, flows: [flow('A', 'B')] }));
      const bare = await atReceiver('B', packetSize, seconds, () => bareIperf3Udp(host('A'), host('B'), seconds, { packetSize, packetsPerSecond, socketBuffer: 4194304 }));
      runs.push({ niclab, bare });
    }
    return { runs, rate: middle(runs.map((r) => r.niclab.rate)), bareRate: middle(runs.map((r) => r.bare.rate)), figures: `niclab ${show(runs.map((r) => r.niclab.rate))} | bare iperf3 -u ${show(runs.map((r) => r.bare.rate))} pps` };
  }

  /** The accounting every run must keep, whatever the rate: checked against B's NIC, not against niclab's own sent - received. */
  function checkAccounting(runs: Awaited<ReturnType<typeof alternateAtB>>['runs'], seconds: number) {
    for (const { niclab: { result: f, rate: nicRate, burstSeconds, datagrams, rcvbufErrors } } of runs) {
      const { udp } = f;
      // The engine's own achieved rate is what B's NIC saw over the run (1%: the sender's run lasts up to 20 ms beyond its nominal seconds).
      assert.ok(Math.abs(udp.achievedPacketsPerSecond / nicRate - 1) <= 0.01, `niclab says it achieved ${udp.achievedPacketsPerSecond.toFixed(0)} pps; B's NIC saw ${nicRate.toFixed(0)} pps over the run's ${seconds} s`);
      assert.ok(f.sender.realSeconds <= seconds + 0.05, `the run lasted ${f.sender.realSeconds} s (${seconds} s and at most 20 ms of grace)`);
      // Not a stretched run that claims the target: datagrams reached B for no longer than the run (plus 100 ms: two readings' spacing and a loaded machine's wake-ups).
      assert.ok(burstSeconds <= seconds + 0.1, `datagrams reached B's NIC for ${burstSeconds.toFixed(3)} s in a ${seconds} s run`);
      // Every datagram B's NIC received either reached niclab's receiver or was dropped at B's socket (ARP's few frames aside).
      assert.ok(udp.received <= datagrams && datagrams - udp.received - rcvbufErrors <= 10, `B's NIC received ${datagrams} datagrams, niclab's receiver ${udp.received}, B's socket dropped ${rcvbufErrors}`);
      assert.ok(datagrams <= udp.sent + 10, `B's NIC received ${datagrams} datagrams (ARP's few frames aside), niclab sent ${udp.sent}`);
      assert.equal(f.pathVerified, true);
    }
  }

  const describeRun = ({ niclab: { result: f, datagrams, rcvbufErrors, rate, low, high }, bare }: Awaited<ReturnType<typeof alternateAtB>>['runs'][number]) =>
    `niclab: NIC ${datagrams.toFixed(0)} datagrams (${rate.toFixed(0)} pps over the run, ${low.toFixed(0)}-${high.toFixed(0)} in its steady middle), sent ${f.udp.sent}, received ${f.udp.received} (${((f.udp.received / f.udp.sent) * 100).toFixed(2)}%), RcvbufErrors +${rcvbufErrors}, achieved ${f.udp.achievedPacketsPerSecond.toFixed(0)} pps over ${f.sender.realSeconds.toFixed(3)} s, jitter ${(f.udp.jitterSeconds * 1e6).toFixed(1)} us; bare: sent ${bare.result.sent}, received ${bare.result.received}, NIC ${bare.datagrams.toFixed(0)}, RcvbufErrors +${bare.rcvbufErrors}`;

  test('1500-byte datagrams at 20,000 pps for 3 s on an unshaped link: B\'s NIC sees the target rate within 1%, and within 2% of bare iperf3 -u at the same rate and size (alternating); the receiver keeps up', async (ctx) => {
    // A rate this shared 2-core machine sustains even while other tests load it (70 kpps below it does not, for bare iperf3 either).
    const TARGET = 20_000;
    // 3 s legs (4 before, for the budget): the rate is B's NIC's count over the run, whose edges
    // (a few ms) stay well inside the 1%.
    const { runs, rate, bareRate, figures } = await alternateAtB(TARGET, 1500, 3, 3);
    ctx.diagnostic(`${TARGET / 1000} kpps x 1500 B at B's NIC: ${figures}`);
    for (const r of runs) ctx.diagnostic(`  ${describeRun(r)}`);
    assert.ok(Math.abs(rate - TARGET) / TARGET <= 0.01, `niclab delivered ${rate.toFixed(0)} pps to B's NIC (median; ${figures}); the target is ${TARGET} within 1%`);
    assert.ok(Math.abs(rate / bareRate - 1) <= 0.02, `niclab ${rate.toFixed(0)} pps vs bare iperf3 -u ${bareRate.toFixed(0)} pps at B's NIC (medians; ${figures}); each within 1% of the target, so within 2% of each other`);
    for (const { niclab: { result: f } } of runs) assert.equal(f.udp.targetPacketsPerSecond, TARGET);
    // At this rate niclab's receiver keeps up today (as bare iperf3 -u's does): nothing dropped in its socket, in most runs.
    const errors = runs.map((r) => r.niclab.rcvbufErrors);
    assert.equal(middle(errors), 0, `B's UdpRcvbufErrors grew by ${errors.join(', ')} in niclab's runs (median must be 0)`);
    const received = middle(runs.map(({ niclab: { result: { udp } } }) => udp.received / udp.sent));
    assert.ok(received >= 0.99, `niclab's receiver got ${(received * 100).toFixed(2)}% of what was sent (median of ${runs.length} runs)`);
    checkAccounting(runs, 3);
  });

  // 1500-byte datagrams at 70 kpps, seed 002's rate: niclab and bare iperf3 -u alternating, B's NIC counting both.
  const TARGET = 70_000;
  const SECONDS = 4;
  let seed: Awaited<ReturnType<typeof alternateAtB>> | undefined;

  test(`1500-byte datagrams at ${TARGET} pps for ${SECONDS} s on an unshaped link: never above the target (1%), at the target (1%) wherever bare iperf3 -u reaches it (alternating); received as B's NIC and socket counted`, async (ctx) => {
    // Three rounds, as the 20 kpps case: five took 25 s more of the serial tier.
    seed = await alternateAtB(TARGET, 1500, SECONDS, 3);
    const { runs, rate, bareRate, figures } = seed;
    ctx.diagnostic(`${TARGET / 1000} kpps x 1500 B at B's NIC: ${figures}`);
    for (const r of runs) ctx.diagnostic(`  ${describeRun(r)}`);
    // Never faster than asked, by what B's NIC saw.
    assert.ok(rate <= TARGET * 1.01, `niclab delivered ${rate.toFixed(0)} pps to B's NIC (median; ${figures}); the target is ${TARGET} within 1%`);
    // At the target within 1% where bare iperf3 -u reached it on this path; where it did not (this
    // host could not send that fast then), within 3% of what bare iperf3 -u reached beside it.
    if (bareRate >= TARGET * 0.99) assert.ok(rate >= TARGET * 0.99, `niclab delivered ${rate.toFixed(0)} pps to B's NIC where bare iperf3 -u reached ${bareRate.toFixed(0)} (medians; ${figures}); the target is ${TARGET} within 1%`);
    else {
      ctx.diagnostic(`bare iperf3 -u did not reach ${TARGET} pps either (median ${bareRate.toFixed(0)}): this host cannot send that fast now`);
      assert.ok(rate >= bareRate * 0.97, `niclab delivered ${rate.toFixed(0)} pps to B's NIC, bare iperf3 -u ${bareRate.toFixed(0)} beside it (medians; ${figures}): within 3% of it`);
    }
    // Every datagram B's NIC took reached niclab's receiver or was dropped in B's socket: whether
    // the receiver keeps up at this rate is compared with bare iperf3 -u's loss below.
    checkAccounting(runs, SECONDS);
  });

  test(`at ${TARGET} pps, niclab's sender reaches what bare iperf3 -u reaches at the same rate and size (at least 90%, alternating medians)`, () => {
    assert.ok(seed, 'the 70 kpps runs above took place');
    assert.ok(seed.rate >= Math.min(TARGET, seed.bareRate) * 0.9, `niclab delivered ${seed.rate.toFixed(0)} pps to B's NIC, bare iperf3 -u ${seed.bareRate.toFixed(0)} (${seed.figures})`);
  });

  test(`at ${TARGET} pps with a 4 MiB socket buffer on an unshaped link, niclab loses no more than bare iperf3 -u beside it (alternating medians, 1 percentage point)`, () => {
    assert.ok(seed, 'the 70 kpps runs above took place');
    // Compared with bare iperf3 -u on the same path, not with B's drop counters: a receiver that
    // drops in its own socket (issue 16: 7.6-9.3% on loopback at 50k) is the tool's loss, not the path's.
    // 1 point: either tool's receiver is starved now and then on this shared 2-core machine.
    const loss = middle(seed.runs.map(({ niclab: { result: { udp } } }) => udp.lossRatio));
    const bareLoss = middle(seed.runs.map(({ bare }) => bare.result.lossRatio));
    assert.ok(loss <= bareLoss + 0.01, `median loss ratio: niclab ${loss.toFixed(4)}, bare iperf3 -u ${bareLoss.toFixed(4)} (niclab ${seed.runs.map((r) => r.niclab.result.udp.lossRatio.toFixed(4)).join(' ')}; bare ${seed.runs.map((r) => r.bare.result.lossRatio.toFixed(4)).join(' ')})`);
  });

  let shapedLoss: { niclab: number; bare: number; nominal: number } | undefined;

  test('offered above a 100 Mbit/s link: the loss is the shaper\'s alone, as nominal and as bare iperf3 -u at the same offered rate (alternating); received as C\'s kernel delivered', async (ctx) => {
    const PPS = 12_000;
    const PACKET = 1400;
    // 4 MiB holds a quarter second of what reaches C: a receiver that keeps up, on a machine whose
    // other tests take its CPU for some milliseconds now and then, drops nothing in its socket.
    const BUFFER = 4194304;
    // The shaper passes 100 Mbit/s of whole frames; the rest of what is offered is its loss.
    const nominal = 1 - (100e6 * payloadShare(PACKET)) / (PPS * PACKET * 8);
    const shaped = async <T>(measure: () => Promise<T>) => {
      const drops = await qdiscDrops(t.lab.switchNamespace, 'pC');
      const counted = await atReceiver('C', PACKET, 4, measure);
      return { ...counted, shaper: (await qdiscDrops(t.lab.switchNamespace, 'pC')) - drops };
    };
    const runs = [];
    for (let i = 0; i < 3; i++) {
      const niclab = await shaped(() => run({ duration: 4, socketBuffer: BUFFER, udp: { packetSize: PACKET, rate: { packetsPerSecond: PPS } }, flows: [flow('A', 'C')] }));
      const bare = await shaped(() => bareIperf3Udp(host('A'), host('C'), 4, { packetSize: PACKET, packetsPerSecond: PPS, socketBuffer: BUFFER }));
      runs.push({ niclab, bare });
    }
    for (const { niclab: n, bare: b } of runs) {
      ctx.diagnostic(`${PPS / 1000} kpps x ${PACKET} B (${((PPS * PACKET * 8) / 1e6).toFixed(0)} Mbit/s) into 100 Mbit/s (nominal loss ${nominal.toFixed(3)}): niclab lossRatio ${n.result.udp.lossRatio.toFixed(3)}, sent ${n.result.udp.sent}, received ${n.result.udp.received}, lost ${n.result.udp.lost}, shaper drops ${n.shaper}, C's NIC ${n.datagrams}, C's UDP InDatagrams ${n.delivered}, RcvbufErrors +${n.rcvbufErrors} | bare iperf3 -u lossRatio ${b.result.lossRatio.toFixed(3)}, sent ${b.result.sent}, lost ${b.result.lost}, shaper drops ${b.shaper}, RcvbufErrors +${b.rcvbufErrors}`);
    }
    for (const { niclab: { result: { udp }, shaper, datagrams, delivered, rcvbufErrors } } of runs) {
      // About 8.7 kpps reach C, with a quarter second of socket buffer: a receiver that keeps up drops nothing there.
      assert.equal(rcvbufErrors, 0, `C's UdpRcvbufErrors grew by ${rcvbufErrors} at ~${((100e6 * payloadShare(PACKET)) / (PACKET * 8)).toFixed(0)} pps`);
      // Every datagram niclab calls lost is one the shaper dropped (A's side is unshaped, C's socket dropped none).
      assert.ok(Math.abs(udp.lost - shaper) <= Math.max(20, udp.sent * 0.002), `niclab lost ${udp.lost}, the shaper dropped ${shaper}`);
      // Independent of lost := sent - received: what C's kernel delivered to UDP sockets, niclab's
      // receiver counted, but for the sender's end-of-test datagrams (at most
      // ENGINE_EXTRA_PACKETS.builtin, 8). The NIC's count is only an upper bound: it also holds
      // ARP and the TCP control connection's frames, 5-12 more on a loaded machine.
      assert.ok(udp.received <= datagrams, `C's NIC received ${datagrams} datagrams, fewer than niclab's receiver's ${udp.received}`);
      const extra = delivered - udp.received;
      assert.ok(extra >= 0 && extra <= ENGINE_EXTRA_PACKETS.builtin, `C's kernel delivered ${delivered} UDP datagrams, niclab's receiver counted ${udp.received}`);
    }
    const loss = middle(runs.map((r) => r.niclab.result.udp.lossRatio));
    const bareLoss = middle(runs.map((r) => r.bare.result.lossRatio));
    shapedLoss = { niclab: loss, bare: bareLoss, nominal };
    assert.ok(loss > 0.15, `the shaper must drop about a quarter: median loss ratio ${loss}`);
    // Both sides of the nominal loss: the offered rate is constant, the shaper's rate fixed. 0.1
    // leaves room for the builtin sender's stalls on this loaded machine; the strict check is
    // below. Before issue 16's pacing, measured at load average 6-8, niclab 0.218-0.334 against a
    // nominal 0.278 and bare iperf3 -u's 0.248-0.283. A receiver that cannot keep up (0.69) or a
    // sender at half the rate (0) is far outside.
    assert.ok(Math.abs(loss - nominal) <= 0.1, `median loss ratio ${loss.toFixed(3)}; nominal ${nominal.toFixed(3)} (within 0.1)`);
    assert.ok(Math.abs(loss - bareLoss) <= 0.1, `median loss ratio ${loss.toFixed(3)}; bare iperf3 -u at the same offered rate ${bareLoss.toFixed(3)} (within 0.1)`);
  });

  test('offered above a 100 Mbit/s link: niclab loses what bare iperf3 -u loses at the same offered rate, and the nominal loss, within 0.02', () => {
    assert.ok(shapedLoss, 'the shaped runs above took place');
    assert.ok(Math.abs(shapedLoss.niclab - shapedLoss.bare) <= 0.02, `median loss ratio ${shapedLoss.niclab.toFixed(3)}; bare iperf3 -u ${shapedLoss.bare.toFixed(3)}`);
    assert.ok(Math.abs(shapedLoss.niclab - shapedLoss.nominal) <= 0.02, `median loss ratio ${shapedLoss.niclab.toFixed(3)}; nominal ${shapedLoss.nominal.toFixed(3)}`);
  });
});
