import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { command } from '@niclab/shared/runtime/command';
import { flow, NOT_ROOT, snmpCounter, startTestLab, type TestLab } from '../helpers/lab.js';
import { irttStart, quantile, startIrttServer, type IrttSample, type IrttStats } from '../helpers/irtt.js';
import { pingUntil } from '../helpers/ping.js';

/**
 * The UDP latency probe against irtt, its reference, on the same path at the same time: A's
 * egress is tbf at 100 Mbit/s with a 50 ms queue, B reflects both (niclab's probe and irtt's
 * server). Each run: four TCP streams A->B and one probe flow A->B (10 ms, 64 bytes), the probe
 * alone for 2 s first; irtt and ping send every 10 ms from A for the whole job. Both ends are
 * namespaces on one kernel, so the probe reports one-way delays too.
 */
const RATE = '100mbit';
const DURATION = 4;
const IDLE = 2;

/** A host's kernel UDP counters the test reads itself: datagrams delivered to its sockets, and dropped at a full one. */
const udpCounters = async (namespace: string) => ({ in: await snmpCounter(namespace, 'Udp', 'InDatagrams'), rcvbuf: await snmpCounter(namespace, 'Udp', 'RcvbufErrors') });
type UdpCounters = Awaited<ReturnType<typeof udpCounters>>;

describe('the UDP latency probe against irtt on a loaded tbf link', { skip: NOT_ROOT }, () => {
  let t: TestLab;
  let server: ChildProcess | undefined;
  let mixed: { jobId: string; runs: any[]; irtt: IrttSample[]; irttStats: IrttStats; ping: IrttSample[] };
  /** A's and B's counters before irtt and the job, and after both. */
  const kernel: { before: UdpCounters[]; after: UdpCounters[] } = { before: [], after: [] };

  before(async () => {
    t = await startTestLab(2, `A=${RATE},B=${RATE}`);
    const [a, b] = t.lab.hosts;
    await command('tc', ['-n', a!.namespace, 'qdisc', 'change', 'dev', 'eth1', 'root', 'tbf', 'rate', RATE, 'burst', '50000b', 'latency', '50ms']);
    server = await startIrttServer(b!);
    kernel.before = await Promise.all([a!, b!].map((h) => udpCounters(h.namespace)));
    // irtt and ping for as long as the job runs.
    const probes = irttStart(a!, b!);
    const probe = { ...flow('A', 'B'), test: { kind: 'probe', engine: 'builtin', probe: { interval: 10, packetSize: 64 } } };
    const done = t.client.succeed({ engine: 'builtin', streams: 4, duration: DURATION, idleBaseline: IDLE, repeat: 3, flows: [flow('A', 'B'), probe] }, 120_000).finally(() => probes.stop());
    const [ping, job] = await Promise.all([pingUntil(a!, b!.address, done), done]);
    const { samples, stats } = await probes.stop();
    mixed = { jobId: job.id, runs: job.runs, irtt: samples, irttStats: stats, ping };
    kernel.after = await Promise.all([a!, b!].map((h) => udpCounters(h.namespace)));
  });
  after(async () => {
    if (server?.pid) process.kill(server.pid, 'SIGTERM');
    await t?.close();
  });

  /** irtt's (and ping's idle) round trips in each run's idle baseline and in its load, on the probe's own timeline. */
  const windows = () => mixed.runs.map((run) => {
    const [stream, probe] = run.flows;
    const within = (samples: IrttSample[], from: number, to: number) => samples.filter((s) => s.at >= from && s.at < to).map((s) => s.rttMs);
    // The round trips sent in the probe's own phases: its idle slots from its first, then its loaded ones.
    const { schedule, idle, loaded } = probe.probe;
    const loadStart = Date.parse(schedule.startedAt) + idle.sent * 10;
    return {
      stream, probe: probe.probe,
      idle: within(mixed.irtt, Date.parse(schedule.startedAt), loadStart), loaded: within(mixed.irtt, loadStart, loadStart + loaded.sent * 10),
      pingIdle: within(mixed.ping, Date.parse(schedule.startedAt), loadStart),
    };
  });

  /*
   * Both are isochronous 10 ms UDP probes through the same tbf queue over the same windows: they
   * sample the same queue, so their loaded medians must agree within 20% + 1 ms (irtt's slots
   * fall 0-10 ms apart from the probe's in a queue that swings by tens of ms). Idle, all see an
   * empty queue, and the probe's round trip is the kernel's receive timestamps less its
   * reflector's dwell: its median within 0.05 ms of ping's over the runs, 0.15 ms in each (the far kernel answers, and ping
   * stamps the reply in the kernel too), and no more than 0.05 ms over irtt's, which stamps in
   * its processes and reads 0.1-0.3 ms over the probe here (its two Go wake-ups). Before the
   * kernel's timestamps the probe's two Node event-loop wake-ups put it 0.1-0.45 ms over irtt.
   * The p99 (the third-largest of some 250 round trips) is the probe's weak side: at nice
   * -10 it ran 0.98-1.7x irtt's on this 2-core host at load 8-12 (its own wake-ups behind the
   * streams' processes), so it must lie within 0.8x - 2 ms and 2x + 2 ms of irtt's. Before the
   * probe ran at nice -10 its loaded p50 ran 1-11 ms over irtt's and its p99 up to 2.1x.
   */
  test("the probe's round trips follow irtt's, idle and loaded", (ctx) => {
    const problems: string[] = [];
    const idleFromPing: number[] = [];
    for (const w of windows()) {
      const [irttIdle, irttP50, irttP99, pingIdle] = [quantile(w.idle, 0.5), quantile(w.loaded, 0.5), quantile(w.loaded, 0.99), quantile(w.pingIdle, 0.5)];
      const [idleP50, loadedP50, loadedP99] = [w.probe.idle.rttSeconds.p50 * 1e3, w.probe.loaded.rttSeconds.p50 * 1e3, w.probe.loaded.rttSeconds.p99 * 1e3];
      ctx.diagnostic(`${(w.stream.bitsPerSecond / 1e6).toFixed(1)} Mbit/s; idle p50 probe ${idleP50.toFixed(3)} ms, ping ${pingIdle.toFixed(3)} ms (${w.pingIdle.length}), irtt ${irttIdle.toFixed(3)} ms; loaded p50 probe ${loadedP50.toFixed(2)} ms, irtt ${irttP50.toFixed(2)} ms; loaded p99 probe ${loadedP99.toFixed(2)} ms, irtt ${irttP99.toFixed(2)} ms (irtt ${w.idle.length}/${w.loaded.length} samples, probe ${w.probe.idle.received}/${w.probe.loaded.received})`);
      if (!(w.idle.length > 0.9 * w.probe.idle.sent && w.loaded.length > 0.9 * w.probe.loaded.sent)) problems.push(`irtt samples ${w.idle.length} idle, ${w.loaded.length} loaded`);
      // ping's own timer falls behind on this loaded host (60-70% of its slots): enough for a median.
      if (!(w.pingIdle.length > 0.4 * w.probe.idle.sent)) problems.push(`ping samples ${w.pingIdle.length} idle`);
      // Within 0.05 ms of ping's as the median of the runs (below); 0.15 ms in each: ping itself read
      // 0.091 ms in one run of CI where the probe read 0.038 and, in the other two, ping 0.033-0.040 (irtt 0.23-0.42 throughout).
      idleFromPing.push(Math.abs(idleP50 - pingIdle));
      if (!(Math.abs(idleP50 - pingIdle) <= 0.15)) problems.push(`idle p50 probe ${idleP50} ms, ping ${pingIdle} ms`);
      if (!(idleP50 <= irttIdle + 0.05)) problems.push(`idle p50 probe ${idleP50} ms, irtt ${irttIdle} ms`);
      if (JSON.stringify(w.probe.arrivalTimes) !== JSON.stringify({ sender: 'kernel', reflector: 'kernel' }) || w.probe.sendTimes !== 'kernel') problems.push(`arrival times ${JSON.stringify(w.probe.arrivalTimes)}, send times ${w.probe.sendTimes}`);
      if (!(Math.abs(loadedP50 - irttP50) <= 0.2 * irttP50 + 1)) problems.push(`loaded p50 probe ${loadedP50} ms, irtt ${irttP50} ms`);
      if (!(0.8 * irttP99 - 2 <= loadedP99 && loadedP99 <= 2 * irttP99 + 2)) problems.push(`loaded p99 probe ${loadedP99} ms, irtt ${irttP99} ms`);
      if (!(loadedP50 > 5 * idleP50)) problems.push(`the load did not show: idle ${idleP50} ms, loaded ${loadedP50} ms`);
    }
    const typical = quantile(idleFromPing, 0.5);
    if (!(typical <= 0.05)) problems.push(`idle p50 probe against ping's: ${typical.toFixed(3)} ms apart as the median of the runs (${idleFromPing.map((d) => d.toFixed(3)).join(', ')})`);
    assert.deepEqual(problems, []);
  });

  test('both ends on one kernel: one-way delays, the queue on the forward way, and out + back = the round trip', (ctx) => {
    for (const w of windows()) {
      const { probe } = w;
      assert.equal(probe.clock, 'shared');
      const owd = probe.loaded.oneWayDelaySeconds;
      const [fwd, back, rtt] = [owd.forward.p50 * 1e3, owd.return.p50 * 1e3, probe.loaded.rttSeconds.p50 * 1e3];
      const pct = (q: any) => `${(q.min * 1e3).toFixed(3)}/${(q.p50 * 1e3).toFixed(3)}/${(q.p90 * 1e3).toFixed(3)}/${(q.max * 1e3).toFixed(3)}`;
      ctx.diagnostic(`idle min/p50/p90/max: forward ${pct(probe.idle.oneWayDelaySeconds.forward)} ms, return ${pct(probe.idle.oneWayDelaySeconds.return)} ms, rtt ${pct(probe.idle.rttSeconds)}; lateness ${pct(probe.schedule.latenessSeconds)}`);
      ctx.diagnostic(`loaded p50: forward ${fwd.toFixed(3)} ms + return ${back.toFixed(3)} ms vs rtt ${rtt.toFixed(3)} ms; ipdv p99 ${(probe.loaded.ipdvSeconds.roundTrip.p99 * 1e3).toFixed(3)} ms`);
      assert.ok(owd.forward.min >= 0 && owd.return.min >= 0, `a negative one-way delay (forward min ${owd.forward.min} s, return min ${owd.return.min} s): the clocks are not one`);
      // A's egress holds the queue: the delay is on the way out, the way back (ACKs only) stays short.
      assert.ok(fwd > 5 * back, `forward ${fwd} ms, return ${back} ms`);
      assert.ok(Math.abs(fwd + back - rtt) <= 0.1 * rtt + 0.2, `forward ${fwd} + return ${back} vs rtt ${rtt}`);
    }
  });

  /*
   * The kernel's count, not the probe's own sums: B's UDP sockets were delivered the datagrams the
   * probe says its reflector got over the job, and irtt's server its own (irtt counts them: its
   * server_packets_received), and its handshake (a few); A's, the replies the probe received and
   * irtt's. Only UDP of these two ran on the lab. (Before, the test checked lost.forward +
   * lost.return = lost.total and sent - lost.forward = reflected: the figures' definitions.)
   */
  test("the probe's counts per direction are the kernel's: datagrams delivered at the reflector and back at the sender", (ctx) => {
    const phases = mixed.runs.flatMap((run) => [run.flows[1].probe.idle, run.flows[1].probe.loaded]);
    const sum = (pick: (phase: any) => number) => phases.reduce((a, phase) => a + pick(phase), 0);
    const [inA, inB] = [0, 1].map((i) => kernel.after[i]!.in - kernel.before[i]!.in) as [number, number];
    const reflected = sum((p) => p.reflected);
    const received = sum((p) => p.received);
    const counts = `the probe: sent ${sum((p) => p.sent)}, reflected ${reflected}, received ${received}, lost forward ${sum((p) => p.lost.forward)}, return ${sum((p) => p.lost.return)}; irtt: server received ${mixed.irttStats.server_packets_received}, client received ${mixed.irttStats.packets_received}; the kernel: B delivered ${inB}, A delivered ${inA}`;
    ctx.diagnostic(counts);
    // Beyond the two tools' own counts, B gets the probe's 3 FINs per run (probe-child.ts), the
    // ones the loaded shaper did not drop: 7, 9 and 9 of 9 in four runs here, and once 11 (9 and
    // two more: irtt's handshake or a resend). So B's extra is at most the FINs and 3 more; A
    // gets none of them back, and its extra was 1 in every run.
    const fins = 3 * mixed.runs.length;
    const extraB = inB - reflected - mixed.irttStats.server_packets_received;
    const extraA = inA - received - mixed.irttStats.packets_received;
    assert.ok(extraB >= 0 && extraB <= fins + 3, `B: ${extraB} beyond the tools' counts (${fins} FINs sent); ${counts}`);
    assert.ok(extraA >= 0 && extraA <= 5, `A: ${extraA} beyond the tools' counts; ${counts}`);
  });

  test('the probe is not its own bottleneck (sends on time, no socket drops)', (ctx) => {
    for (const w of windows()) {
      const { probe } = w;
      for (const phase of [probe.idle, probe.loaded]) assert.ok(phase.received > 0.95 * phase.sent, `received ${phase.received} of ${phase.sent}`);
      assert.equal(probe.idle.sent + probe.loaded.sent, probe.schedule.slots);
      assert.equal(probe.schedule.slots, Math.round(((DURATION + IDLE) * 1000 - probe.schedule.startLateSeconds * 1000) / 10));
      const late = probe.schedule.latenessSeconds;
      ctx.diagnostic(`send lateness p50 ${(late.p50 * 1e3).toFixed(3)} ms, p99 ${(late.p99 * 1e3).toFixed(3)} ms, max ${(late.max * 1e3).toFixed(3)} ms; socket drops ${JSON.stringify(probe.socketDrops)}`);
      // Reported, not a timing target (those belong in bench/): each send's lateness is its own, so no round trip carries it.
      assert.ok(late.min >= 0 && late.p50 <= late.p99 && late.p99 <= late.max, JSON.stringify(late));
      assert.deepEqual(probe.socketDrops, { sender: 0, reflector: 0 });
    }
    const ms = (ns: number | undefined) => ((ns ?? NaN) / 1e6).toFixed(3);
    ctx.diagnostic(`irtt's server processing time: median ${ms(mixed.irttStats.server_processing_time.median)} ms, mean ${ms(mixed.irttStats.server_processing_time.mean)} ms, max ${ms(mixed.irttStats.server_processing_time.max)} ms; its own timer error: median ${ms(mixed.irttStats.timer_error.median)} ms, mean ${ms(mixed.irttStats.timer_error.mean)} ms, max ${ms(mixed.irttStats.timer_error.max)} ms`);
    // The kernel's own count over the whole job agrees: no UDP receive-buffer drops at either end.
    assert.deepEqual(kernel.after.map((c, i) => c.rcvbuf - kernel.before[i]!.rcvbuf), [0, 0]);
  });

  test("the report shows the probe's idle and loaded round trips side by side", async () => {
    const text = await (await fetch(`${t.client.base}/v1/jobs/${mixed.jobId}/report?format=table`)).text();
    assert.match(text, /round trips \(probe\):/);
    assert.match(text, /idle p50 ms +idle p99 ms +loaded p50 ms +loaded p99 ms +\+p99 ms/);
    assert.match(text, /\n +1 +A:eth1 -> B:eth1 +- +\d+\.\d{3} +\d+\.\d{3} +\d+\.\d{3} +\d+\.\d{3} +\d+\.\d{3}/);
  });

  /*
   * builtin UDP's jitter against iperf3's: a flow of each, A->B at once through the same tbf, with
   * two more builtin flows loading the link to 90 Mbit/s (4 x 2,000 pps x 1,400 B), so the queue
   * varies. Each figure is the mean of the receiver's RFC 3550 J at the end of each 0.2 s
   * interval (the run's last J is the last ~16 datagrams' alone: two builtin flows of one run read
   * 59 and 208 us). iperf3 stamps each datagram when its process reads it, so its J carries its own
   * receiver's delays as well as the path's (measured: iperf3 67-531 us where the builtin flows
   * beside it read 43-198 us, and more when its receiver fell behind); the builtin's stamps are
   * the kernel's. So the builtin's is at most iperf3's and 0.05 ms; how close it comes to the
   * path's own is the closed-form test's (test/engines/builtin-udp.test.ts).
   */
  test("builtin UDP's jitter against iperf3's on the same path at the same time: never above it", async (ctx) => {
    const iperf3 = { ...flow('A', 'B'), test: { kind: 'stream', engine: 'iperf3' } };
    const job = await t.client.succeed({
      engine: 'builtin', protocol: 'udp', duration: 3, repeat: 2, interval: 0.2, udp: { packetSize: 1400, rate: { packetsPerSecond: 2000 } },
      flows: [flow('A', 'B'), iperf3, flow('A', 'B'), flow('A', 'B')],
    }, 120_000);
    const meanJitter = (f: any) => {
      const full = f.intervals.slice(1, -1);
      return (full.reduce((sum: number, i: any) => sum + i.jitterSeconds, 0) / full.length) * 1e3;
    };
    const problems: string[] = [];
    for (const run of job.runs) {
      const [builtin, bare, ...load] = run.flows;
      const [b, i] = [meanJitter(builtin), meanJitter(bare)];
      ctx.diagnostic(`mean interval jitter: builtin ${b.toFixed(3)} ms (${builtin.udp.arrivalTimes}), iperf3 ${i.toFixed(3)} ms (${bare.udp.arrivalTimes}), the load's builtin flows ${load.map((f: any) => meanJitter(f).toFixed(3)).join(', ')} ms; loss builtin ${(builtin.udp.lossRatio * 100).toFixed(2)}%, iperf3 ${(bare.udp.lossRatio * 100).toFixed(2)}%`);
      if (builtin.udp.arrivalTimes !== 'kernel' || bare.udp.arrivalTimes !== 'process') problems.push(`arrival times ${builtin.udp.arrivalTimes}, ${bare.udp.arrivalTimes}`);
      if (!(builtin.intervals.length >= 10 && bare.intervals.length >= 10)) problems.push(`intervals ${builtin.intervals.length}, ${bare.intervals.length}`);
      if (!(b <= i + 0.05)) problems.push(`mean interval jitter builtin ${b} ms, iperf3 ${i} ms`);
    }
    assert.deepEqual(problems, []);
  });

  test('a job of its own: test probe alone reports round trips, and compare reads lower as better', async () => {
    const job = await t.client.succeed({ engine: 'builtin', test: 'probe', duration: 2, probe: { interval: 5 }, flows: [flow('A', 'B')] }, 60_000);
    const [f] = job.runs[0].flows;
    assert.equal(f.probe.schedule.slots, Math.round((2000 - f.probe.schedule.startLateSeconds * 1000) / 5));
    assert.equal(f.probe.packetSize, 64);
    assert.equal(f.probe.idle, undefined);
    assert.ok(f.probe.loaded.rttSeconds.p50 > 0 && f.probe.loaded.rttSeconds.p50 < 5e-3, `idle link p50 ${f.probe.loaded.rttSeconds.p50}`);
    const report: any = await (await fetch(`${t.client.base}/v1/jobs/${job.id}/report?format=json`)).json();
    assert.deepEqual(report.headline, { name: 'rttP50Seconds', unit: 's' });
  });
});
