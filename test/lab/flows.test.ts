import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { command } from '@niclab/shared/runtime/command';
import { bareIperf3Flows, bareIperf3Udp, flow, linkCounters, mbit, NOT_ROOT, qdiscDrops, snmpCounter, startTestLab, type TestLab } from '../helpers/lab.js';
import { waitFor } from '../helpers/processes.js';

// 4 hosts, every link 100 Mbit/s in both directions. Bare iperf3 on such a link gets ~95 Mbit/s.
describe('multi-host runs on a 4-host lab at 100 Mbit/s', { skip: NOT_ROOT }, () => {
  let t: TestLab;
  before(async () => {
    t = await startTestLab(4, '100mbit');
    // One short run first, as a lab engineer warms a path: the very first connections on a
    // fresh lab overshoot the 100 Mbit/s shaper in slow start (CI saw 11-52 retransmits and
    // 82-89 Mbit/s on them, then 0 and 95 once the kernel had cached the path's ssthresh).
    await t.client.succeed({ engine: 'builtin', duration: 1, interval: 1, flows: [flow('A', 'D')] }, 60_000);
  });
  after(async () => {
    await t?.close();
  });

  const run = (spec: Record<string, unknown>) => t.client.succeed({ engine: 'builtin', ...spec }, 120_000);

  const host = (name: string) => t.lab.hosts.find((h) => h.name === name)!;
  const middle = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)]!;
  const show = (rows: number[][]) => rows.map((r) => r.map((v) => v.toFixed(1)).join('/')).join(' ');

  /** One measurement of every flow of a run, in Mbit/s, and the niclab job when niclab measured. */
  type Measure = () => Promise<{ rates: number[]; job?: any }>;
  const niclab = (spec: Record<string, unknown>): Measure => async () => {
    const job = await run(spec);
    return { job, rates: job.runs[0].flows.map((f: { bitsPerSecond: number }) => mbit(f.bitsPerSecond)) };
  };
  /** Bare iperf3 on the same paths at once (one client and server per path), as received by each server. */
  const bare = (paths: [string, string][], seconds: number): Measure => async () => {
    const results = await bareIperf3Flows(paths.map(([from, to]) => ({ from: host(from), to: host(to) })), seconds);
    return { rates: results.map((r) => mbit(r.server.end.sum_received.bits_per_second as number)) };
  };

  /**
   * Measurements taken in turn, A B A B A B (or A B C ...), so that the machine's drift over a
   * minute (about 5% here) falls on each alike. Per measure: medians per flow, the median of
   * the per-flow sums, every run, and the niclab jobs. `ratio(a, b)` is the median over rounds
   * of a's sum over b's sum: each ratio compares runs a few seconds apart.
   */
  async function alternate(measures: Record<string, Measure>, rounds = 3) {
    const rows: Record<string, number[][]> = {};
    const jobs: Record<string, any[]> = {};
    for (let i = 0; i < rounds; i++) {
      for (const [key, measure] of Object.entries(measures)) {
        const { rates, job } = await measure();
        (rows[key] ??= []).push(rates);
        if (job) (jobs[key] ??= []).push(job);
      }
    }
    const sum = (r: number[]) => r.reduce((x, y) => x + y, 0);
    const medians = Object.fromEntries(Object.entries(rows).map(([key, r]) => [key, r[0]!.map((_, i) => middle(r.map((row) => row[i]!)))]));
    const sums = Object.fromEntries(Object.entries(rows).map(([key, r]) => [key, middle(r.map(sum))]));
    const ratio = (a: string, b: string) => middle(rows[a]!.map((r, i) => sum(r) / sum(rows[b]![i]!)));
    const all = Object.entries(rows).map(([key, r]) => `${key} ${show(r)}`).join(' | ');
    return { medians, sums, ratio, all, jobs, rows };
  }

  /**
   * niclab within this band of bare iperf3 on the same paths, measured alternately: the median
   * over rounds of niclab's sum over bare's. On this shared 2-core machine the pair ratio of two
   * runs a few seconds apart stays within a few percent (see the diagnostics); a wrong figure
   * (double counting, a lost flow, a wrong unit) is far outside.
   */
  // TCP legs of 2 s (3 for the fan-in and bidir; they were 4 to 6, then 3 to 4, for the budget): TCP fills a
  // 100 Mbit/s shaper in well under a tenth of a second here, and bare iperf3 pays the same start
  // beside niclab. Bidir stays at 3 s (its pair ratios went 0.975 and 0.963 at 2 s, where 3 s gave
  // 0.967-1.015), and so do the UDP legs: the shapers' bursts are a larger share of a shorter run.
  const BAND = [0.95, 1.05] as const;
  const inBand = (ratio: number) => ratio >= BAND[0] && ratio <= BAND[1];
  /** What a 100 Mbit/s tbf can carry; payload is less (headers), so no flow's figure may exceed it. */
  const LINK = 100;

  // Fan-in: how the shaper's 100 Mbit/s splits among the senders is the kernel's TCP, and it is
  // chance. In one CI run bare iperf3's three flows went 10/10/79, 24/23/49 and 11/11/78 while
  // niclab's went 31-33 each, and a local run had niclab at 72/16/12 beside bare at 35/34/28: no
  // per-flow share is a property of the tool. What is: the flows' sum matches bare iperf3's fan-in
  // on the same hosts (alternating), and each flow's figure is the traffic of its own sender, as
  // the kernel counted it on that sender's eth1 (read by the test around each niclab job).
  // A,B,C -> D only: A,B -> D asserted the same on a subset of the same paths (folded for the budget).
  for (const senders of [['A', 'B', 'C']] as const) {
    test(`${senders.join(',')} -> D: the sum within 5% of bare iperf3's fan-in on the same hosts (alternating); each flow's bytes are what its own sender's eth1 sent, as the kernel counted; a receiver of its own per sender`, async (ctx) => {
      const paths = senders.map((s) => [s, 'D'] as [string, string]);
      const sent: number[][] = [];
      const counted: Measure = async () => {
        const before = await Promise.all(senders.map((s) => linkCounters(host(s).namespace)));
        const measured = await niclab({ duration: 3, flows: senders.map((s) => flow(s, 'D')) })();
        const after = await Promise.all(senders.map((s) => linkCounters(host(s).namespace)));
        sent.push(after.map((a, i) => a.txBytes - before[i]!.txBytes));
        return measured;
      };
      const { medians, sums, ratio, all, jobs, rows } = await alternate({ niclab: counted, bare: bare(paths, 3) });
      const share = (key: string) => rows[key]!.map((r) => r.map((v) => (v / r.reduce((x, y) => x + y, 0)).toFixed(2)).join('/')).join(' ');
      ctx.diagnostic(`${senders.join(',')}->D: niclab medians ${medians.niclab!.map((r) => r.toFixed(1)).join(', ')} Mbit/s, bare iperf3 ${medians.bare!.map((r) => r.toFixed(1)).join(', ')}; sums ${sums.niclab!.toFixed(1)} vs ${sums.bare!.toFixed(1)}, pair ratio ${ratio('niclab', 'bare').toFixed(3)}; shares per round niclab ${share('niclab')} | bare ${share('bare')} (${all})`);
      assert.ok(inBand(ratio('niclab', 'bare')), `sum: niclab over bare iperf3 fan-in, median pair ratio ${ratio('niclab', 'bare').toFixed(3)}; allowed ${BAND.join('-')} (${all})`);
      jobs.niclab!.forEach((job, round) => {
        job.runs[0].flows.forEach((f: any, i: number) => {
          assert.equal(f.receiver.bytes, f.sender.bytes);
          assert.ok(mbit(f.bitsPerSecond) < LINK, `flow ${i}: ${mbit(f.bitsPerSecond).toFixed(1)} Mbit/s through a ${LINK} Mbit/s link`);
          // Its sender's eth1 carried its payload, plus TCP/IP headers (about 4%) and retransmits: not another flow's.
          const tx = sent[round]![i]!;
          assert.ok(tx >= f.sender.bytes && tx <= f.sender.bytes * 1.1, `round ${round}, flow ${i} from ${senders[i]}: niclab says ${f.sender.bytes} bytes, ${senders[i]}'s eth1 sent ${tx}`);
          // niclab's own counter delta of that eth1 (around its engine) lies inside the test's (around the whole job).
          assert.ok(f.nic.from.txBytes >= f.sender.bytes && f.nic.from.txBytes <= tx, `round ${round}, flow ${i}: niclab's nic.from.txBytes ${f.nic.from.txBytes}, the sender's bytes ${f.sender.bytes}, ip -s link around the job ${tx}`);
        });
      });
      // One receiver host served every sender at once: a receiver process and port of its own each.
      const ports = new Set(jobs.niclab![0].runs[0].flows.map((f: { diagnostics: { receiver: { port: number } } }) => f.diagnostics.receiver.port));
      assert.equal(ports.size, senders.length);
    });
  }

  test('A -> B together with C -> D (disjoint links): each within 5% of bare iperf3 on the same two pairs at once (alternating), below the link rate', async (ctx) => {
    const { medians, rows, all } = await alternate({ niclab: niclab({ duration: 2, flows: [flow('A', 'B'), flow('C', 'D')] }), bare: bare([['A', 'B'], ['C', 'D']], 2) });
    // Per flow: its median pair ratio, niclab over bare on the same pair in the same round.
    const ratios = [0, 1].map((i) => middle(rows.niclab!.map((r, round) => r[i]! / rows.bare![round]![i]!)));
    ctx.diagnostic(`A->B with C->D: niclab medians ${medians.niclab!.map((r) => r.toFixed(1)).join(', ')}, bare iperf3 ${medians.bare!.map((r) => r.toFixed(1)).join(', ')} Mbit/s; pair ratios ${ratios.map((r) => r.toFixed(3)).join(', ')} (${all})`);
    for (const ratio of ratios) assert.ok(inBand(ratio), `niclab over bare iperf3 per pair, median pair ratios ${ratios.map((r) => r.toFixed(3)).join(', ')}; allowed ${BAND.join('-')} (${all})`);
    for (const rate of rows.niclab!.flat()) assert.ok(rate <= LINK, `niclab ${rate.toFixed(1)} Mbit/s of payload on a ${LINK} Mbit/s link (${all})`);
  });

  test('leases: two jobs on D submitted together never overlap; a job on A -> B runs beside them', async () => {
    const spec = (from: string, to: string) => ({ engine: 'builtin', duration: 2, flows: [flow(from, to)] });
    const [first, second, third] = await Promise.all([t.client.submit(spec('C', 'D')), t.client.submit(spec('C', 'D')), t.client.submit(spec('A', 'B'))]);
    const waiting = await waitFor('one of the D jobs to wait for a lease', async () => {
      for (const id of [first.body.id, second.body.id]) {
        const { body } = await t.client.job(id);
        if (body.status === 'queued' && body.waitingFor?.length) return body;
      }
      return null;
    }, 5000, 25);
    assert.ok(['C:eth1', 'D:eth1'].includes(waiting.waitingFor[0]), JSON.stringify(waiting.waitingFor));
    const runs = [];
    for (const { body } of [first, second, third]) {
      const { job } = await t.client.finish(body.id, 30_000);
      assert.equal(job.status, 'succeeded');
      runs.push({ start: Date.parse(job.runs[0].startedAt), end: Date.parse(job.runs[0].finishedAt) });
    }
    const [a, b, c] = runs as { start: number; end: number }[];
    const overlap = (x: { start: number; end: number }, y: { start: number; end: number }) => x.start < y.end && y.start < x.end;
    assert.ok(!overlap(a!, b!), `D runs overlapped: ${JSON.stringify([a, b])}`);
    assert.ok(overlap(c!, a!) || overlap(c!, b!), `A -> B did not run in parallel: ${JSON.stringify(runs)}`);
  });

  test('direction reverse: D sends to A over the same named interfaces', async (ctx) => {
    // Bare iperf3 on the same path, D sending to A.
    const { medians, ratio, all, jobs } = await alternate({ niclab: niclab({ duration: 2, direction: 'reverse', flows: [flow('A', 'D')] }), bare: bare([['D', 'A']], 2) });
    const rates = medians.niclab!;
    const [f] = jobs.niclab![0].runs[0].flows;
    ctx.diagnostic(`reverse A<-D: niclab median ${rates[0]!.toFixed(1)}, bare iperf3 D->A ${medians.bare![0]!.toFixed(1)} Mbit/s, pair ratio ${ratio('niclab', 'bare').toFixed(3)} (${all})`);
    assert.equal(f.direction, 'reverse');
    assert.equal(f.diagnostics.sender.agent, 'D');
    assert.equal(f.diagnostics.receiver.agent, 'A');
    // The issue sets no figure for reverse; A -> D's 90 less a margin for this shared machine.
    assert.ok(rates[0]! >= 85, `median ${rates[0]} Mbit/s (runs ${all})`);
    assert.ok(inBand(ratio('niclab', 'bare')), `niclab over bare iperf3 D->A, median pair ratio ${ratio('niclab', 'bare').toFixed(3)}; allowed ${BAND.join('-')} (${all})`);
    assert.ok(rates[0]! <= LINK, `niclab ${rates[0]} Mbit/s of payload on a ${LINK} Mbit/s link`);
    assert.equal(f.receiver.bytes, f.sender.bytes);
    assert.ok(f.nic.to.txBytes >= f.sender.bytes && f.nic.from.rxBytes >= f.receiver.bytes);
    assert.equal(f.pathVerified, true);
  });

  test('direction bidir: both directions of A <-> D at once, each measured', async (ctx) => {
    const LEG = 3;
    // Bare iperf3 both ways at once on the same path: A->D and D->A, a client and server each.
    const { medians, rows, all, jobs } = await alternate({ niclab: niclab({ duration: LEG, direction: 'bidir', flows: [flow('A', 'D')] }), bare: bare([['A', 'D'], ['D', 'A']], LEG) });
    const rates = medians.niclab!;
    const job = jobs.niclab![0];
    const flows = job.runs[0].flows;
    const ratios = [0, 1].map((i) => middle(rows.niclab!.map((r, round) => r[i]! / rows.bare![round]![i]!)));
    ctx.diagnostic(`bidir A<->D: niclab medians forward ${rates[0]!.toFixed(1)}, reverse ${rates[1]!.toFixed(1)}; bare iperf3 ${medians.bare!.map((r) => r.toFixed(1)).join(', ')} Mbit/s; pair ratios ${ratios.map((r) => r.toFixed(3)).join(', ')} (${all})`);
    assert.deepEqual(flows.map((f: { direction: string }) => f.direction), ['forward', 'reverse']);
    assert.ok(flows.every((f: { flowIndex: number }) => f.flowIndex === 0));
    // Each direction has its own 100 Mbit/s; only the other direction's ACKs share it. The
    // floor leaves room for four engine processes sharing this machine's two cores.
    for (const rate of rates) assert.ok(rate >= 70, `medians ${rates.join(', ')} Mbit/s (runs ${all})`);
    // Four engine processes (two Node senders, two receivers) share two cores here, where bare
    // iperf3's four are C: niclab may fall 10% short of bare iperf3 when other tests load the machine
    // (seen: 0.941), never above it.
    const BIDIR = [0.9, BAND[1]] as const;
    for (const ratio of ratios) assert.ok(ratio >= BIDIR[0] && ratio <= BIDIR[1], `niclab over bare iperf3 per direction, median pair ratios ${ratios.map((r) => r.toFixed(3)).join(', ')}; allowed ${BIDIR.join('-')} (${all})`);
    for (const rate of rows.niclab!.flat()) assert.ok(rate <= LINK, `niclab ${rate.toFixed(1)} Mbit/s of payload on a ${LINK} Mbit/s link (${all})`);
    const [forward, reverse] = flows;
    const took = Date.parse(job.runs[0].finishedAt) - Date.parse(job.runs[0].startedAt);
    assert.ok(took < 2 * LEG * 1000, `both directions ran at once (the run took ${took} ms for ${LEG} s legs)`);
    assert.equal(forward.diagnostics.sender.agent, 'A');
    assert.equal(reverse.diagnostics.sender.agent, 'D');
  });

  test('A -> D, builtin TCP and iperf3 TCP: they agree within 3% on a 100 Mbit link and each is within 5% of bare iperf3 (3 alternating rounds), below the link rate; both measure CPU at both ends; the builtin\'s bytes agree, both named interfaces carried them, retransmits as the kernel counts them', async (ctx) => {
    const spec = (engine: string) => ({ engine, duration: 2, flows: [flow('A', 'D')] });
    // A's RetransSegs is read around each builtin run only: the other tools' retransmits are not its.
    const retransSegs = () => snmpCounter(host('A').namespace, 'Tcp', 'RetransSegs');
    let kernel = 0;
    const builtin: Measure = async () => {
      const before = await retransSegs();
      const measured = await niclab(spec('builtin'))();
      kernel += (await retransSegs()) - before;
      return measured;
    };
    // Both engines' figures pass through the same flowResult, so their agreement alone proves
    // nothing about it: bare iperf3 on the same path is the third party.
    const { medians, ratio, all, jobs } = await alternate({ builtin, iperf3: niclab(spec('iperf3')), bare: bare([['A', 'D']], 2) }, 3);
    const engines = ratio('builtin', 'iperf3');
    const reported = jobs.builtin!.map((job) => job.runs[0].flows[0].retransmits as number);
    ctx.diagnostic(`A->D builtin/iperf3 median pair ratio ${engines.toFixed(3)}, builtin/bare ${ratio('builtin', 'bare').toFixed(3)}, iperf3/bare ${ratio('iperf3', 'bare').toFixed(3)}; medians builtin ${medians.builtin![0]!.toFixed(1)}, iperf3 ${medians.iperf3![0]!.toFixed(1)}, bare ${medians.bare![0]!.toFixed(1)} Mbit/s (${all}); builtin retransmits ${reported.join('+')}, namespace A's RetransSegs +${kernel}`);
    assert.ok(Math.abs(engines - 1) <= 0.03, `median builtin/iperf3 ratio ${engines} (${all})`);
    for (const engine of ['builtin', 'iperf3']) assert.ok(inBand(ratio(engine, 'bare')), `${engine} over bare iperf3, median pair ratio ${ratio(engine, 'bare').toFixed(3)}; allowed ${BAND.join('-')} (${all})`);
    for (const job of [...jobs.builtin!, ...jobs.iperf3!]) {
      const [f] = job.runs[0].flows;
      assert.ok(f.sender.cpuSeconds > 0 && f.receiver.cpuSeconds > 0, `${job.spec.engine}: CPU at both ends`);
      const bps = mbit(f.bitsPerSecond);
      assert.ok(bps <= LINK, `${job.spec.engine} ${bps.toFixed(1)} Mbit/s of payload on a ${LINK} Mbit/s link`);
      // iperf3's sender counts what it wrote into its socket, and what was still queued there at
      // the end never left: the path is proven by what arrived (it was 0.6 MB of 5.5 short on a 20 Mbit/s link).
      assert.equal(f.pathVerified, true, `${job.spec.engine}: wrote ${f.sender.bytes} B, ${f.receiver.bytes} B arrived, A:eth1 sent ${f.nic.from.txBytes} B, D:eth1 took in ${f.nic.to.rxBytes} B`);
    }
    // A's namespace carried nothing else during the builtin's runs: its TCP RetransSegs grew by exactly what the builtin sender read from TCP_INFO.
    assert.equal(reported.reduce((a, b) => a + b, 0), kernel);
    const [f] = jobs.builtin![0].runs[0].flows;
    assert.equal(f.receiver.bytes, f.sender.bytes);
    assert.equal(f.pathVerified, true);
    assert.equal(f.nic.from.agent, 'A');
    assert.equal(f.nic.to.agent, 'D');
    assert.ok(f.nic.from.txBytes >= f.sender.bytes, 'A:eth1 sent the bytes');
    assert.ok(f.nic.to.rxBytes >= f.receiver.bytes, 'D:eth1 received the bytes');
    // Headers and ACKs only: the counters exceed the payload by a few percent, not by another flow.
    assert.ok(f.nic.from.txBytes < f.sender.bytes * 1.1);
    assert.equal(f.diagnostics.sender.address, '198.18.0.1');
    assert.equal(f.diagnostics.receiver.address, '198.18.0.4');
  });

  test('UDP offered above the link: the loss is the shaper\'s alone, as nominal and as bare iperf3 -u at the same offered rate (alternating); received as D\'s NIC counted', async (ctx) => {
    // A sends unshaped for this test, so the 100 Mbit/s bottleneck is D's receive side (the switch port).
    const nsA = host('A').namespace;
    const nsD = host('D').namespace;
    const sw = t.lab.switchNamespace;
    const reshape = (rate: string) => Promise.all([
      command('tc', ['-n', nsA, 'qdisc', 'replace', 'dev', 'eth1', 'root', 'tbf', 'rate', rate, 'burst', '500000b', 'latency', '50ms']),
      command('tc', ['-n', sw, 'qdisc', 'replace', 'dev', 'pA', 'root', 'tbf', 'rate', rate, 'burst', '500000b', 'latency', '50ms']),
    ]);
    // Where a datagram from A to D can be dropped: the shapers on its path, and D's socket; and what D's NIC received.
    const counters = async () => ({
      shapers: (await qdiscDrops(nsA, 'eth1')) + (await qdiscDrops(sw, 'pA')) + (await qdiscDrops(sw, 'pD')),
      socket: await snmpCounter(nsD, 'Udp', 'RcvbufErrors'),
      nic: (await linkCounters(nsD)).rxPackets,
    });
    const offered = 150e6;
    const size = 1400;
    // 4 MiB holds a quarter second of what reaches D: a receiver that keeps up drops nothing in its socket.
    const socketBuffer = 4194304;
    const counted = async <T>(measure: () => Promise<T>) => {
      const before = await counters();
      const result = await measure();
      const after = await counters();
      return { result, shapers: after.shapers - before.shapers, socket: after.socket - before.socket, nic: after.nic - before.nic };
    };
    // tbf meters whole frames; `offered` is payload: per 1400-byte datagram the link also
    // carries 42 bytes of headers, so 100 Mbit/s delivers 97.1 Mbit/s of payload at best.
    const expected = 1 - (100e6 * (size / (size + 42))) / offered;
    await reshape('1gbit');
    try {
      const rounds = [];
      for (let i = 0; i < 3; i++) {
        const job = await counted(() => run({ engine: 'iperf3', protocol: 'udp', duration: 3, socketBuffer, udp: { packetSize: size, rate: { bitsPerSecond: offered } }, flows: [flow('A', 'D')] }));
        const reference = await counted(() => bareIperf3Udp(host('A'), host('D'), 3, { packetSize: size, packetsPerSecond: offered / (size * 8), socketBuffer }));
        rounds.push({ job, reference });
      }
      for (const { job: { result, shapers, socket, nic }, reference } of rounds) {
        const { udp } = result.runs[0].flows[0];
        ctx.diagnostic(`UDP 150 Mbit/s into 100 Mbit/s (nominal loss ${expected.toFixed(3)}): niclab lossRatio ${udp.lossRatio.toFixed(3)}, sent ${udp.sent}, received ${udp.received}, lost ${udp.lost}, shaper drops ${shapers}, D's RcvbufErrors +${socket}, D's NIC rx ${nic} | bare iperf3 -u lossRatio ${reference.result.lossRatio.toFixed(3)}, sent ${reference.result.sent}, lost ${reference.result.lost}, shaper drops ${reference.shapers}, RcvbufErrors +${reference.socket}`);
      }
      for (const { job: { result, shapers, socket, nic } } of rounds) {
        const { udp } = result.runs[0].flows[0];
        assert.ok(udp.lossRatio > 0.2, `the shaper must drop about a third: ${udp.lossRatio}`);
        // About 8.7 kpps reach D with a quarter second of socket buffer: the receiver keeps up.
        assert.equal(socket, 0, `D's UdpRcvbufErrors grew by ${socket}`);
        // Every datagram niclab calls lost is one a shaper dropped; iperf3's control connection and ARP share the path: a handful of packets.
        assert.ok(Math.abs(udp.lost - shapers) <= Math.max(20, udp.sent * 0.002), `niclab lost ${udp.lost}, the shapers dropped ${shapers}`);
        // Independent of lost := sent - received: D's NIC received the datagrams niclab counts, plus
        // the control connection's and ARP's few dozen frames.
        assert.ok(udp.received <= nic && nic - udp.received <= 100, `D's NIC received ${nic} frames, niclab ${udp.received} datagrams`);
      }
      const loss = middle(rounds.map((r) => r.job.result.runs[0].flows[0].udp.lossRatio as number));
      const bareLoss = middle(rounds.map((r) => r.reference.result.lossRatio));
      // Both sides: the offered rate is constant and the shaper's fixed; 0.02 leaves room for the
      // shapers' 500 kB bursts (about 1% of a 3 s run at 150 Mbit/s offered) and the start and end of the run.
      assert.ok(Math.abs(loss - expected) <= 0.02, `median loss ratio ${loss.toFixed(3)}; nominal ${expected.toFixed(3)} (within 0.02)`);
      assert.ok(Math.abs(loss - bareLoss) <= 0.02, `median loss ratio ${loss.toFixed(3)}; bare iperf3 -u at the same offered rate ${bareLoss.toFixed(3)} (within 0.02)`);
    } finally {
      await reshape('100mbit');
    }
  });

  test('an interface that is down is refused at submission, naming the field', async () => {
    const nsB = t.lab.hosts[1]!.namespace;
    await command('ip', ['-n', nsB, 'link', 'set', 'eth1', 'down']);
    try {
      await waitFor('agent B to report eth1 down', async () => {
        const { body } = await t.client.call('getAgent', 'GET', '/v1/agents/B');
        return body.interfaces.find((i: { name: string }) => i.name === 'eth1')?.operstate === 'down';
      });
      const res = await t.client.submit({ engine: 'builtin', duration: 1, flows: [flow('A', 'B')] });
      assert.equal(res.status, 422);
      assert.equal(res.body.errors[0].field, 'body.flows[0].to.interface');
      assert.match(res.body.errors[0].message, /eth1.*B.*down/);
    } finally {
      await command('ip', ['-n', nsB, 'link', 'set', 'eth1', 'up']);
    }
  });

  test('a flow whose named source interface does not carry its traffic has pathVerified false', async () => {
    // A gets eth2 (one end of a veth pair that stays inside A) with its own address; traffic
    // from that address to D still leaves through eth1 (routing goes by destination), so eth2
    // never carries it.
    const nsA = t.lab.hosts[0]!.namespace;
    const nsD = t.lab.hosts[3]!.namespace;
    await command('ip', ['-n', nsA, 'link', 'add', 'eth2', 'type', 'veth', 'peer', 'name', 'eth2p']);
    await command('ip', ['-n', nsA, 'link', 'set', 'eth2p', 'up']);
    await command('ip', ['-n', nsA, 'addr', 'add', '198.19.255.1/32', 'dev', 'eth2']);
    await command('ip', ['-n', nsA, 'link', 'set', 'eth2', 'up']);
    await command('ip', ['-n', nsD, 'route', 'add', '198.19.255.1/32', 'via', '198.18.0.1']);
    await waitFor('agent A to report eth2 with its address', async () => {
      const { body } = await t.client.call('getAgent', 'GET', '/v1/agents/A');
      return body.interfaces.some((i: { name: string; addresses: { address: string }[] }) => i.name === 'eth2' && i.addresses.some((a) => a.address === '198.19.255.1'));
    });
    const job = await run({ duration: 2, flows: [{ from: { agent: 'A', interface: 'eth2' }, to: { agent: 'D', interface: 'eth1' } }] });
    const [f] = job.runs[0].flows;
    assert.ok(f.receiver.bytes > 0, 'the traffic did arrive');
    assert.equal(f.diagnostics.sender.address, '198.19.255.1');
    assert.ok(f.nic.from.txBytes < f.sender.bytes / 100, `eth2 sent ${f.nic.from.txBytes} bytes`);
    assert.equal(f.pathVerified, false);
  });
});
