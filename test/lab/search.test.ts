import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { ChildProcess } from 'node:child_process';
import { bareIperf3Udp, flow, NOT_ROOT, startTestLab, type TestLab } from '../helpers/lab.js';
import { irttDuring, quantile, startIrttServer } from '../helpers/irtt.js';

/**
 * The rate search against a shaper whose rate is known: B's link is a 20 Mbit/s tbf, which
 * meters whole Ethernet frames (payload + 8 UDP + 20 IP + 14 Ethernet bytes). Its queue (the
 * lab's `latency 50ms` plus the bucket, about 56 ms of traffic) absorbs an excess for a
 * while, so a trial of T seconds passes up to 0.056 / T above the rate: 5 s trials keep that
 * near 1%, inside the 2% the search must hit.
 */
const SHAPER_BITS = 20e6;
const SIZE = 1000;
const SHAPER_PPS = SHAPER_BITS / ((SIZE + 42) * 8); // 2399.2
const TRIAL_SECONDS = 5;

describe('rate search on a shaped lab link', { skip: NOT_ROOT }, () => {
  let t: TestLab;
  before(async () => {
    t = await startTestLab(2, 'A=none,B=20mbit');
  });
  after(async () => {
    await t?.close();
  });

  const host = (name: string) => t.lab.hosts.find((h) => h.name === name)!;
  const search = async (target: Record<string, unknown>) => {
    const job = await t.client.succeed({
      engine: 'builtin', protocol: 'udp', duration: TRIAL_SECONDS, socketBuffer: 4194304,
      udp: { packetSize: SIZE, rate: { packetsPerSecond: 1000 } },
      search: { min: { packetsPerSecond: Math.round(SHAPER_PPS * 0.85) }, max: { packetsPerSecond: Math.round(SHAPER_PPS * 1.15) }, ...target },
      flows: [flow('A', 'B')],
    }, 600_000);
    const { body: report } = await t.client.call('getReport', 'GET', `/v1/jobs/${job.id}/report`);
    return { ...report.searches[0], jobId: job.id };
  };

  test('PDR at 0.5% within 2% of the shaper three times over, bare iperf3 agreeing within a 1% step; the NDR at most the PDR', async () => {
    const found: number[] = [];
    for (let i = 0; i < 3; i++) {
      const result = await search({ target: 'pdr', lossRatio: 0.005 });
      assert.equal(result.stoppedBy, 'resolution', JSON.stringify(result.trials));
      assert.equal(result.limitedBy, 'loss', 'the shaper drops; the sender kept up');
      found.push(result.found.packetsPerSecond);
      console.log(`PDR 0.5% ${i + 1}: ${result.found.packetsPerSecond} pps (${(result.found.packetsPerSecond / SHAPER_PPS).toFixed(4)} of the shaper's ${SHAPER_PPS.toFixed(1)}), bracket ${result.bracket.low}-${result.bracket.high}, ${result.trials.length} trials`);
      assert.ok(Math.abs(result.found.packetsPerSecond / SHAPER_PPS - 1) <= 0.02, `${result.found.packetsPerSecond} pps vs the shaper's ${SHAPER_PPS.toFixed(1)}`);
    }
    assert.ok(Math.max(...found) / Math.min(...found) - 1 <= 0.02, `three searches: ${found.join(', ')}`);

    // The reference: bare iperf3 -u, the same trial length, one 1% step below the median rate
    // found (within the loss allowed) and two above (beyond it). What the path loses at a rate is
    // the least loss of two runs: a bare sender the lanes beside it keep off the CPU for longer
    // than the shaper's 56 ms queue catches up in a burst that queue drops (in a fresh-clone run
    // it lost 0.84% one step below the PDR, 2,375 pps, where the search had found 2,399-2,422),
    // and a stall can only add loss, never take it away. A second run is made only when the
    // first one's loss is over the goal; both are printed.
    const pdr = [...found].sort((a, b) => a - b)[1]!;
    const bare = [];
    const runs = [];
    for (const step of [-1, 2]) {
      const packetsPerSecond = Math.round(pdr * (1 + step / 100));
      let least: { step: number; packetsPerSecond: number; lost: number; sent: number; lossRatio: number } | undefined;
      for (let attempt = 0; attempt < 2 && !(least && least.lossRatio <= 0.005); attempt++) {
        const result = await bareIperf3Udp(host('A'), host('B'), TRIAL_SECONDS, { packetSize: SIZE, packetsPerSecond, socketBuffer: 4194304 });
        const measured = { step, packetsPerSecond, lost: result.lost, sent: result.sent, lossRatio: result.lossRatio };
        runs.push(measured);
        if (!least || measured.lossRatio < least.lossRatio) least = measured;
      }
      bare.push(least!);
    }
    console.log(`bare iperf3 around ${pdr} pps (least loss of each step): ${JSON.stringify(bare)}; every run: ${JSON.stringify(runs)}`);
    assert.ok(bare[0]!.lossRatio <= 0.005, `bare iperf3 one step below: ${JSON.stringify(bare[0])}`);
    assert.ok(bare[1]!.lossRatio > 0.005, `bare iperf3 two steps above: ${JSON.stringify(bare[1])}`);

    // No loss at all is the stricter target: on a shared host a stalled sender's catch-up burst
    // can cost a datagram below the shaper's rate (bare iperf3 lost 1 of 11,499 at 0.96 of it
    // at load 15, and 1 of 11,988 at 0.9995 of it), so the NDR is only held to be at most the
    // PDR and above half the shaper's rate. (Measured: 2,419 pps, 1.008 of the shaper.)
    const ndr = await search({ target: 'ndr', min: { packetsPerSecond: Math.round(SHAPER_PPS * 0.5) } });
    console.log(`NDR: ${ndr.found?.packetsPerSecond} pps, ${ndr.trials.length} trials\n${await (await fetch(`${t.client.base}/v1/jobs/${ndr.jobId}/report?format=table`)).text()}`);
    assert.ok(ndr.found && ndr.found.packetsPerSecond <= Math.max(...found), `NDR ${JSON.stringify(ndr.found)} vs PDR ${found.join(', ')}`);
  });
});
