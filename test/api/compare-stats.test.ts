/**
 * The comparison's verdicts as statistics: a change from a baseline of 0, Holm's adjustment
 * against its closed form, and a seeded simulation of identical jobs that counts false
 * verdicts (the chance of any in a 12-point comparison, per figure and over five figures).
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { FlowResult, Job, JobSpec, Run } from '@niclab/shared/domain/contract';
import { compareJobs, comparisonTable } from '@niclab/shared/domain/compare';
import { holm } from '@niclab/shared/domain/statistics';
import { seededRandom as random } from '../helpers/random.js';

const path = { from: { agent: 'A', interface: 'eth1' }, to: { agent: 'D', interface: 'eth1' } };
const base: JobSpec = { engine: 'builtin', test: 'stream', protocol: 'tcp', retries: 0, duration: 10, bufferLength: 131072, streams: 1, noDelay: false, direction: 'forward', interval: 1, repeat: 3, flows: [path] };
const job = (id: string, spec: JobSpec): Job => ({
  id, owner: 'anonymous', status: 'succeeded', createdAt: '2026-12-01T00:00:00.000Z', startedAt: null, finishedAt: null, progress: { runsDone: 0, runsTotal: 0 }, error: null, finding: null, waitingFor: null, spec,
});
const flow = (flowIndex: number, f: Partial<FlowResult>): FlowResult => ({
  flowIndex, direction: 'forward', ...path, sender: null, receiver: null, bitsPerSecond: null, retransmits: null, udp: null, rr: null, intervals: [],
  nic: { from: null, to: null }, pathVerified: true, error: null, diagnostics: {}, ...f,
});
const runOf = (i: number, point: Run['point'], flows: FlowResult[]): Run => ({
  id: `r${i}`, jobId: 'j', index: i, point, repetition: i + 1, status: 'succeeded', startedAt: null, finishedAt: null, error: null, flows,
});

const udpSpec: JobSpec = { ...base, protocol: 'udp', udp: { packetSize: 1470, rate: { packetsPerSecond: 1000 } } };
const udpRuns = (lost: number[], sent = 100_000) => lost.map((l, i) => runOf(i, {}, [flow(0, { bitsPerSecond: 11e6, udp: { sent, received: sent - l, lost: l, outOfOrder: 0, duplicates: 0, jitterSeconds: 1e-4, lossRatio: l / sent } })]));

test('loss from 0 to about 5% is worse: no % change (null, with the reason), the difference with its interval judges it', () => {
  const c = compareJobs(job('a', udpSpec), udpRuns([0, 0, 0]), job('b', udpSpec), udpRuns([4_900, 5_000, 5_100]), 1, 'udpLossRatio');
  const [p] = c.points;
  assert.equal(p!.verdict, 'worse', p!.judged);
  assert.equal(p!.changePercent, null);
  assert.equal(p!.changePercentInterval, null);
  assert.match(p!.changePercentReason!, /baseline mean is 0/);
  assert.ok(Math.abs(p!.difference! - 0.05) < 1e-12);
  // Welch with a spread-free baseline: the candidate's t-interval, t(0.975, 2) = 4.30265 times 0.001 / sqrt(3).
  const half = (4.30265273 * 0.001) / Math.sqrt(3);
  assert.ok(Math.abs(p!.differenceInterval![0]! - (0.05 - half)) < 1e-8 && Math.abs(p!.differenceInterval![1]! - (0.05 + half)) < 1e-8, JSON.stringify(p!.differenceInterval));
  assert.ok(p!.pValue! < 0.001 && p!.adjustedPValue === p!.pValue, 'one point: Holm leaves its p alone');
  assert.equal(p!.judged, 'udpLossRatio (lower is better): 0.000 -> 5.000 %, from 0 (no % change): worse');
  const table = comparisonTable(c, []);
  assert.match(table, /^\s+all\s+:\s+0\.000\s+5\.000\s+Δ\+5\.000\s+Δ\[4\.752, 5\.248\]\s+p=\S+\s+adj=\S+\s+worse$/m);
  assert.match(table, /^Δ: the change from a baseline of 0/m);
  // And back again: from 5% to 0 is better, -100%, and the interval stops there (Welch's went to -105%: a loss below 0).
  const back = compareJobs(job('b', udpSpec), udpRuns([4_900, 5_000, 5_100]), job('a', udpSpec), udpRuns([0, 0, 0]), 1, 'udpLossRatio').points[0]!;
  assert.equal(back.verdict, 'better');
  assert.ok(Math.abs(back.changePercent! + 100) < 1e-9);
  assert.equal(back.differenceIntervalMethod, 'clipped-t');
  assert.ok(Math.abs(back.changePercentInterval![0]! + 100) < 1e-9 && Math.abs(back.changePercentInterval![1]! + 100 - (half / 0.05) * 100) < 1e-6, JSON.stringify(back.changePercentInterval));
});

test('from 0, a change below the figure\'s least change is no significant change, whatever its p; 0 against 0 is no change', () => {
  // 2, 3 and 4 datagrams in a million: p = 0.035, but 0.0003 % is below the 0.001 % the table shows.
  const tiny = compareJobs(job('a', udpSpec), udpRuns([0, 0, 0]), job('b', udpSpec), udpRuns([2, 3, 4], 1_000_000), 1, 'udpLossRatio');
  assert.ok(tiny.points[0]!.pValue! < 0.05, `p ${tiny.points[0]!.pValue}`);
  assert.equal(tiny.points[0]!.verdict, 'no significant change');
  assert.equal(tiny.minChange, 1e-5);
  const none = compareJobs(job('a', udpSpec), udpRuns([0, 0, 0]), job('b', udpSpec), udpRuns([0, 0, 0]), 1, 'udpLossRatio').points[0]!;
  assert.equal(none.verdict, 'no significant change');
  assert.equal(none.difference, 0);
  assert.equal(none.changePercent, null);
});

test('retransmits from 0 and probe loss from 0 are judged too', () => {
  const tcp = (retransmits: number[]) => retransmits.map((r, i) => runOf(i, {}, [flow(0, { bitsPerSecond: 94e6, retransmits: r })]));
  const r = compareJobs(job('a', base), tcp([0, 0, 0]), job('b', base), tcp([30, 40, 50]), 1, 'retransmits').points[0]!;
  assert.equal(r.verdict, 'worse', r.judged);
  assert.equal(r.changePercent, null);
  const probeSpec: JobSpec = { ...base, test: 'probe', probe: { interval: 10, packetSize: 64 } } as JobSpec;
  const rtt = { min: 1e-4, mean: 2e-4, p50: 2e-4, p90: 3e-4, p99: 4e-4, max: 5e-4 };
  const phase = (lost: number) => ({ sent: 1000, lost: { total: lost }, rttSeconds: rtt, ipdvSeconds: { roundTrip: rtt }, oneWayDelaySeconds: null });
  const probe = (lost: number[]) => lost.map((l, i) => runOf(i, {}, [flow(0, { probe: { loaded: phase(l) } as unknown as FlowResult['probe'] })]));
  const p = compareJobs(job('a', probeSpec), probe([0, 0, 0]), job('b', probeSpec), probe([48, 50, 52]), 1, 'probeLossRatio').points[0]!;
  assert.equal(p.verdict, 'worse', p.judged);
  assert.ok(Math.abs(p.difference! - 0.05) < 1e-12);
});

test("Holm's adjustment, against the closed form; a null is no member of the family", () => {
  // Sorted 0.005, 0.01, 0.03, 0.04 of m = 4: 4 x 0.005, 3 x 0.01, 2 x 0.03, then max(0.06, 1 x 0.04).
  const adjusted = holm([0.01, 0.04, 0.03, null, 0.005]);
  const expected = [0.03, 0.06, 0.06, null, 0.02];
  adjusted.forEach((a, i) => (expected[i] === null ? assert.equal(a, null) : assert.ok(Math.abs(a! - expected[i]!) < 1e-15, `${i}: ${a}`)));
  assert.deepEqual(holm([0.03, 0.02]), [0.04, 0.04], "monotone: never below a smaller p's adjusted value");
  assert.deepEqual(holm([]), []);
});

// Three points: a real 20% rise at the first, noise at the others.
const sweepSpec: JobSpec = { ...base, sweep: { bufferLength: [8192, 32768, 131072] } };
const sweepRuns = (values: Record<number, number[]>) => Object.entries(values).flatMap(([b, mbit]) => mbit.map((m, i) => runOf(i, { bufferLength: Number(b) }, [flow(0, { bitsPerSecond: m * 1e6 })])));

test('a comparison of several points: the verdict follows the Holm-adjusted p, and both ps are given', () => {
  const c = compareJobs(
    job('a', sweepSpec), sweepRuns({ 8192: [100, 101, 99], 32768: [200, 201.5, 198.5], 131072: [300, 303, 297] }),
    job('b', sweepSpec), sweepRuns({ 8192: [120, 121, 119], 32768: [204, 205.5, 202.5], 131072: [300, 302, 298] }),
  );
  assert.deepEqual(c.correction, { method: 'holm', family: 'figure', alpha: 0.050000000000000044 });
  const [rise, noise, same] = c.points;
  assert.equal(rise!.verdict, 'better');
  // +2% at p = 0.031: significant alone, not among three (Holm: the second smallest of three, times 2).
  assert.ok(noise!.pValue! < 0.05, `raw p ${noise!.pValue}`);
  assert.ok(Math.abs(noise!.adjustedPValue! - 2 * noise!.pValue!) < 1e-12, `adjusted ${noise!.adjustedPValue}`);
  assert.equal(noise!.verdict, 'no significant change');
  assert.equal(same!.adjustedPValue, 1);
  assert.match(comparisonTable(c, ['bufferLength']), /^\s+bufferLength=32768\s+:\s+200\.00\s+204\.00\s+2\.00\s+\[[-\d., ]+\]\s+p=0\.0\d+\s+adj=0\.\d+\s+no significant change$/m);
});

const POINTS = Array.from({ length: 12 }, (_, i) => 1024 * 2 ** i);
const rrFlow = { ...path, test: { kind: 'rr', engine: 'builtin', streams: 1, noDelay: true, rr: { requestSize: 1, responseSize: 1 } } } as JobSpec['flows'][number];
const simSpec: JobSpec = { ...base, sweep: { bufferLength: POINTS }, flows: [path, rrFlow] };

/**
 * One job of `n` runs per point: five figures (throughput, transactions/s, round trip p50, p90,
 * p99), each normal about its own mean with its own coefficient of variation, all independent.
 */
function simulatedRuns(next: () => number, n: number, cv: number[]): Run[] {
  const normal = () => Math.sqrt(-2 * Math.log(1 - next())) * Math.cos(2 * Math.PI * next());
  const noisy = (mean: number, k: number) => mean * (1 + cv[k]! * normal());
  return POINTS.flatMap((bufferLength, i) => Array.from({ length: n }, (_, r) => {
    const rtt = { min: 0, mean: 0, p50: noisy(1e-3 * (i + 1), 2), p90: noisy(2e-3 * (i + 1), 3), p99: noisy(4e-3 * (i + 1), 4), max: 0 };
    return runOf(r, { bufferLength }, [
      flow(0, { bitsPerSecond: noisy(1e8 * (i + 1), 0) }),
      flow(1, { rr: { requestSize: 1, responseSize: 1, transactions: 1, transactionsPerSecond: noisy(1000 * (i + 1), 1), rttSeconds: rtt } }),
    ]);
  }));
}

test('identical jobs, 12 points, n 3-10, cv 2-5% (seeded): any false verdict on the judged figure at most 5%; over five figures at most 5 x 5%', (ctx) => {
  const next = random(26);
  const trials = 1000;
  let judgedFalse = 0;
  let anyFalse = 0;
  for (let i = 0; i < trials; i++) {
    const n = 3 + Math.floor(next() * 8);
    const cv = Array.from({ length: 5 }, () => 0.02 + 0.03 * next());
    const c = compareJobs(job('a', simSpec), simulatedRuns(next, n, cv), job('b', simSpec), simulatedRuns(next, n, cv));
    assert.equal(c.metrics.length, 5, c.metrics.map((m) => m.metric.name).join());
    const falseIn = (points: typeof c.points) => points.some((p) => p.verdict === 'better' || p.verdict === 'worse');
    if (falseIn(c.points)) judgedFalse++;
    if (c.metrics.some((m) => falseIn(m.points))) anyFalse++;
  }
  const share = (k: number) => `${((k / trials) * 100).toFixed(1)}%`;
  ctx.diagnostic(`${trials} comparisons of identical jobs: some false verdict among the judged figure's 12 points in ${share(judgedFalse)}, among all 5 figures' 60 in ${share(anyFalse)}`);
  assert.ok(judgedFalse / trials <= 0.05, `judged figure: ${share(judgedFalse)}`);
  // Each figure is a family of its own at 5%: over five, at most 25% (Bonferroni), about 1 - 0.95^5 when they are independent.
  assert.ok(anyFalse / trials <= 0.25, `all figures: ${share(anyFalse)}`);
});
