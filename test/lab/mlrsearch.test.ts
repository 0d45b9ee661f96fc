import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { ChildProcess } from 'node:child_process';
import { bareIperf3Udp, flow, NOT_ROOT, startTestLab, type TestLab } from '../helpers/lab.js';
import { irttDuring, quantile, startIrttServer } from '../helpers/irtt.js';

/**
 * An MLRsearch against a shaper whose rate is known (test/lab/search.test.ts has the binary
 * search on the same link): B's link is a 20 Mbit/s tbf, which meters whole Ethernet frames
 * (payload + 42 bytes). It runs in the serial tier: its NDR is lost to one datagram, and a
 * sender the files beside it keep off the CPU for longer than the shaper's 56 ms queue makes
 * void trials (sender_late); in the concurrent tier at load 12 one load was void eleven times
 * in a row and the search could not conclude.
 */
const SIZE = 1000;
const SHAPER_PPS = 20e6 / ((SIZE + 42) * 8); // 2399.2

describe('MLRsearch on a shaped lab link', { skip: NOT_ROOT }, () => {
  let t: TestLab;
  before(async () => {
    t = await startTestLab(2, 'A=none,B=20mbit');
  });
  after(async () => {
    await t?.close();
  });

  const host = (name: string) => t.lab.hosts.find((h) => h.name === name)!;

  // An MLRsearch of NDR and PDR 0.5% in one job. A trial of T s passes up to QUEUE_SECONDS / T
  // above the rate (the shaper's queue takes the excess), so what the shaper carries in a
  // final trial is SHAPER_PPS × (1 + QUEUE_SECONDS / T): the NDR's closed form, and the PDR's
  // that over (1 − 0.005). Final trials of 5 s with a duration sum of 10 s: a load is decided
  // by two of them, and one unlucky trial (a stalled sender's burst on this shared host) does
  // not move it. Then latency at 10/50/90% of the PDR's conditional throughput, with irtt on the
  // same path for the whole job (every 50 ms: 0.09% of the shaper, inside the 1% asked) as the
  // reference of the probe's round trips.
  test('MLRsearch: NDR and PDR 0.5% from one job, each within 1% of what the shaper carries in its final trials; bare iperf3 agreeing within a 1% step; latency at 10/50/90% of the PDR against irtt', async () => {
    const QUEUE_SECONDS = 0.056;
    const FINAL = 5;
    const goal = { finalTrialDuration: FINAL, durationSum: 2 * FINAL };
    let server: ChildProcess | undefined;
    const [job, irtt] = await (async () => {
      server = await startIrttServer(host('B'));
      return irttDuring(host('A'), host('B'), () => t.client.succeed({
        engine: 'builtin', protocol: 'udp', duration: FINAL, socketBuffer: 4194304,
        udp: { packetSize: SIZE, rate: { packetsPerSecond: 1000 } },
        // This host runs other test files beside this one: a sender they keep off the CPU for
        // longer than the shaper's queue makes void trials (sender_late), each made again.
        search: { algorithm: 'mlrsearch', min: { packetsPerSecond: Math.round(SHAPER_PPS * 0.85) }, max: { packetsPerSecond: Math.round(SHAPER_PPS * 1.15) }, goals: [{ lossRatio: 0, ...goal }, { lossRatio: 0.005, ...goal }], latencyAt: [0.1, 0.5, 0.9], maxVoidRepeats: 10 },
        flows: [flow('A', 'B')],
      }, 600_000), 50);
    })().finally(() => server?.pid && process.kill(server.pid, 'SIGTERM'));
    const { body: report } = await t.client.call('getReport', 'GET', `/v1/jobs/${job.id}/report`);
    const result = report.mlrSearches[0];
    console.log(await (await fetch(`${t.client.base}/v1/jobs/${job.id}/report?format=table`)).text());
    assert.deepEqual([result.state, result.stoppedBy], ['done', 'goals'], JSON.stringify(result));
    const carried = SHAPER_PPS * (1 + QUEUE_SECONDS / FINAL);
    const [ndr, pdr] = result.goals;
    for (const [name, g, expected] of [['NDR', ndr, carried], ['PDR 0.5%', pdr, carried / (1 - 0.005)]] as const) {
      assert.ok(g.regular, `${name}: ${JSON.stringify(g)}`);
      const lower = g.relevantLowerBound.packetsPerSecond;
      console.log(`MLRsearch ${name}: lower bound ${lower} pps, upper ${g.relevantUpperBound.packetsPerSecond}, conditional throughput ${g.conditionalThroughput.packetsPerSecond.toFixed(1)} pps; ${(lower / expected).toFixed(4)} of the ${expected.toFixed(1)} a ${FINAL} s trial carries, ${(lower / SHAPER_PPS).toFixed(4)} of the shaper's ${SHAPER_PPS.toFixed(1)}`);
      assert.ok(Math.abs(lower / expected - 1) <= 0.01, `${name}: ${lower} pps vs ${expected.toFixed(1)}`);
    }
    // Short trials before final ones; void trials (niclab's own limit on this shared host) are the search's to repeat, and counted here.
    const voids = result.trials.filter((trial: { void: unknown[] }) => trial.void.length > 0);
    console.log(`${result.trials.length} trials, ${result.trialSeconds} trial-seconds, ${voids.length} void${voids.length ? `: ${voids.map((trial: { void: { why: string }[] }) => trial.void.map((v) => v.why).join('; ')).join(' | ')}` : ''}`);
    assert.ok(result.trials.some((trial: { duration: number }) => trial.duration === FINAL) && result.trials.some((trial: { duration: number }) => trial.duration < FINAL));

    // The reference: bare iperf3 -u for the final trial's length, one 1% step below each lower
    // bound (within its goal) and two above the PDR's (beyond it).
    const bare = [];
    for (const [at, step] of [[ndr.relevantLowerBound.packetsPerSecond, -1], [pdr.relevantLowerBound.packetsPerSecond, -1], [pdr.relevantLowerBound.packetsPerSecond, 2]] as const) {
      const packetsPerSecond = Math.round(at * (1 + step / 100));
      const r = await bareIperf3Udp(host('A'), host('B'), FINAL, { packetSize: SIZE, packetsPerSecond, socketBuffer: 4194304 });
      bare.push({ packetsPerSecond, lost: r.lost, sent: r.sent, lossRatio: r.lossRatio });
    }
    console.log(`bare iperf3: ${JSON.stringify(bare)}`);

    // Latency at 10, 50 and 90% of the PDR's conditional throughput: one run each after the
    // search, the probe beside the load. irtt stamps in its processes (0.2-0.3 ms more than the
    // kernel's stamps on this lab, test/lab/probe.test.ts), so it bounds the probe from above.
    const ct = pdr.conditionalThroughput.packetsPerSecond;
    assert.deepEqual(result.latency.map((l: { fraction: number; status: string; packetsPerSecond: number }) => [l.fraction, l.status, l.packetsPerSecond]), [0.1, 0.5, 0.9].map((f) => [f, 'succeeded', Math.round(f * ct)]));
    for (const l of result.latency) {
      const run = job.runs.find((r: { index: number }) => r.index === l.runIndex);
      const probe = run.flows.find((f: { flowIndex: number }) => f.flowIndex === 1).probe;
      const start = Date.parse(probe.schedule.startedAt);
      const window = irtt.filter((s) => s.at >= start + 300 && s.at <= start + FINAL * 1000 - 300).map((s) => s.rttMs);
      const [f] = l.flows;
      const [p50, irttP50] = [f.rttSeconds.p50 * 1e3, quantile(window, 0.5)];
      console.log(`latency at ${l.fraction * 100}% (${l.packetsPerSecond} pps, loss ${(f.lossRatio * 100).toFixed(3)}%): probe RTT p50 ${p50.toFixed(3)} p90 ${(f.rttSeconds.p90 * 1e3).toFixed(3)} p99 ${(f.rttSeconds.p99 * 1e3).toFixed(3)} ms; irtt p50 ${irttP50.toFixed(3)} p99 ${quantile(window, 0.99).toFixed(3)} ms (${window.length} samples)`);
      assert.ok(window.length >= 40, `irtt samples in the run: ${window.length}`);
      assert.ok(f.lossRatio <= 0.005, `at ${l.fraction} of the PDR the load is within the PDR's loss: ${JSON.stringify(f)}`);
      assert.ok(Math.abs(f.achievedPacketsPerSecond / l.packetsPerSecond - 1) <= 0.01, JSON.stringify(f));
      assert.ok(p50 <= irttP50 + 0.05, `probe p50 ${p50} ms against irtt's ${irttP50} ms`);
    }
    // No loss is strict on a shared host (see the binary NDR above): one step below the NDR, at most the PDR's loss.
    assert.ok(bare[0]!.lossRatio <= 0.005, `bare iperf3 one step below the NDR: ${JSON.stringify(bare[0])}`);
    assert.ok(bare[1]!.lossRatio <= 0.005, `bare iperf3 one step below the PDR: ${JSON.stringify(bare[1])}`);
    assert.ok(bare[2]!.lossRatio > 0.005, `bare iperf3 two steps above the PDR: ${JSON.stringify(bare[2])}`);
  });
});
