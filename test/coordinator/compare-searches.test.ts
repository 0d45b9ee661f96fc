import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compareJobs, comparisonTable } from '@niclab/shared/domain/compare';
import type { Job, JobSpec, Run } from '@niclab/shared/domain/contract';
import { drive, type Path } from '../helpers/search-path.js';

/**
 * Two searches compared (Comparison.searches), each driven to its end against a simulated path
 * whose rates have a closed form: no loss up to `capacity` datagrams/s, then a share growing by
 * 1% per 5% of capacity above it, so the NDR is the capacity and the PDR 0.5% is 1.025 × it.
 * A search gives one rate per goal, so the verdict reads the two brackets, not a t-test.
 */
const knee = (capacity: number): Path => (offered) => ({ lossRatio: Math.max(0, (offered - capacity) / (5 * capacity)) });
const flow = { from: { agent: 'A', interface: 'eth1' }, to: { agent: 'B', interface: 'eth1' } };
const base = { engine: 'builtin', test: 'stream', protocol: 'udp', duration: 4, interval: 1, direction: 'forward', repeat: 1, retries: 0, flows: [flow], udp: { packetSize: 1000, rate: { packetsPerSecond: 1000 } } };
const mlr = (search: Record<string, unknown> = {}) => ({ ...base, search: { algorithm: 'mlrsearch', min: { packetsPerSecond: 1000 }, max: { packetsPerSecond: 100_000 }, ...search } }) as unknown as JobSpec;
const binary = (search: Record<string, unknown> = {}) =>
  ({ ...base, search: { algorithm: 'binary', target: 'ndr', min: { packetsPerSecond: 1000 }, max: { packetsPerSecond: 100_000 }, resolutionPercent: 1, confirmations: 1, maxTrials: 40, ...search } }) as unknown as JobSpec;

/** A finished search job on `path`: its job and its runs, as compareJobs reads them from the store. */
function searched(id: string, spec: JobSpec, path: Path): { job: Job; runs: Run[] } {
  return { job: { id, spec, status: 'succeeded' } as unknown as Job, runs: drive(spec, path).runs };
}
const compare = (a: { job: Job; runs: Run[] }, b: { job: Job; runs: Run[] }, minChangePercent = 1) => compareJobs(a.job, a.runs, b.job, b.runs, minChangePercent);

test('a path 10% faster: both goals better, each rate within the two goal widths (0.5%) of +10%, the brackets apart; the reverse worse by the same closed form', () => {
  const slow = searched('slow', mlr(), knee(40_000));
  const fast = searched('fast', mlr(), knee(44_000));
  const up = compare(slow, fast);
  assert.deepEqual(up.searches.map((s) => [s.lossRatio, s.verdict]), [[0, 'better'], [0.005, 'better']], JSON.stringify(up.searches));
  for (const s of up.searches) {
    // Each conditional throughput lies within its goal's width below the truth, so the ratio is 1.1 within a factor of 0.995 either way.
    assert.ok(s.changePercent! >= (1.1 * 0.995 - 1) * 100 && s.changePercent! <= (1.1 / 0.995 - 1) * 100, `${s.judged}`);
    assert.ok(s.candidate!.lower! > s.baseline!.upper!, s.judged);
    assert.equal(s.reason, null);
  }
  const down = compare(fast, slow);
  assert.deepEqual(down.searches.map((s) => s.verdict), ['worse', 'worse']);
  for (const s of down.searches) assert.ok(s.changePercent! >= (1 / 1.1 * 0.995 - 1) * 100 && s.changePercent! <= (1 / (1.1 * 0.995) - 1) * 100, s.judged);
  // The table prints each goal's brackets and verdict.
  const table = comparisonTable(up, []);
  assert.match(table, /loss 0: mlrsearch \[\d+, \d+\] [\d.]+ -> mlrsearch \[\d+, \d+\] [\d.]+ pps per flow, \+\d+\.\d+%: better/);
});

test('the same path twice, and one 0.2% faster: no significant change (the brackets overlap, or the change is under minChangePercent)', () => {
  const a = searched('a', mlr(), knee(40_000));
  const same = compare(a, searched('b', mlr(), knee(40_000)));
  assert.deepEqual(same.searches.map((s) => [s.verdict, s.changePercent]), [['no significant change', 0], ['no significant change', 0]]);
  const near = compare(a, searched('c', mlr(), knee(40_080)));
  assert.deepEqual(near.searches.map((s) => s.verdict), ['no significant change', 'no significant change']);
  for (const s of near.searches) assert.ok(Math.abs(s.changePercent! - 0.2) <= 0.75, s.judged);
});

test('a coarse search (width 10%) against a fine one on the same path: both brackets hold its NDR, so they overlap, and that is no significant change even at minChangePercent 0, though the rates differ', () => {
  const coarse = searched('coarse', mlr({ goals: [{ lossRatio: 0, width: 0.1 }] }), knee(40_000));
  const fine = searched('fine', mlr({ goals: [{ lossRatio: 0, width: 0.005 }] }), knee(40_000));
  const [s] = compare(coarse, fine, 0).searches;
  assert.ok(s!.baseline!.lower! <= 40_000 && s!.baseline!.upper! > 40_000 && s!.candidate!.lower! <= 40_000 && s!.candidate!.upper! > 40_000, s!.judged);
  assert.ok(s!.candidate!.rate! > s!.baseline!.rate!, `the fine search's rate is the higher: ${s!.judged}`);
  assert.equal(s!.verdict, 'no significant change', s!.judged);
});

test('a binary NDR against an MLRsearch on the same path: matched by the loss ratio, both within their widths of the capacity, no significant change; the PDR goal the binary search lacks is not comparable', () => {
  const b = searched('bin', binary(), knee(40_000));
  const m = searched('mlr', mlr(), knee(40_000));
  const [ndr, pdr, ...rest] = compare(b, m).searches;
  assert.equal(rest.length, 0);
  assert.deepEqual([ndr!.lossRatio, ndr!.exceedRatio, ndr!.baseline!.algorithm, ndr!.candidate!.algorithm, ndr!.verdict], [0, null, 'binary', 'mlrsearch', 'no significant change']);
  assert.ok(ndr!.baseline!.rate! <= 40_000 && ndr!.baseline!.rate! >= 40_000 * 0.99, ndr!.judged);
  assert.ok(ndr!.candidate!.rate! <= 40_000 && ndr!.candidate!.rate! >= 40_000 * 0.995, ndr!.judged);
  assert.deepEqual([pdr!.lossRatio, pdr!.baseline, pdr!.verdict, pdr!.reason], [0.005, null, 'not comparable', 'the baseline has no such goal at this point']);
});

test('a side whose max carried (no upper bound): a slower path is worse than it and it better than that one, but nothing can be shown above it', () => {
  const capped = searched('capped', mlr({ max: { packetsPerSecond: 30_000 } }), knee(40_000));
  const slower = searched('slower', mlr(), knee(20_000));
  const [ndr] = compare(capped, slower).searches;
  assert.equal(ndr!.baseline!.upper, null);
  assert.equal(ndr!.baseline!.lower, 30_000);
  assert.equal(ndr!.verdict, 'worse', ndr!.judged);
  assert.equal(ndr!.reason, 'the baseline found no upper bound (its max carried), so the candidate cannot be shown better');
  // From the slower path up to the capped one: the capped lower bound is above the slower upper one.
  assert.equal(compare(slower, capped).searches[0]!.verdict, 'better');
  // Capped at 30,000 against a path whose NDR is 30,000 too: the candidate cannot be above a bound the baseline never found.
  const [both] = compare(capped, searched('capped2', mlr({ max: { packetsPerSecond: 30_000 } }), knee(35_000))).searches;
  assert.equal(both!.verdict, 'no significant change', both!.judged);
  assert.match(both!.reason!, /baseline found no upper bound .*; the candidate found no upper bound \(its max carried\), so it cannot be shown worse$/);
});

test('a search against a job that is no search: not comparable, saying which; two jobs that are no search: no search comparison', () => {
  const sweep = { job: { id: 'plain', spec: { ...base } as unknown as JobSpec, status: 'succeeded' } as unknown as Job, runs: [] as Run[] };
  const s = searched('s', mlr(), knee(40_000));
  const mixed = compare(s, sweep).searches;
  assert.deepEqual(mixed.map((x) => [x.verdict, x.reason]), [['not comparable', 'the candidate is no search'], ['not comparable', 'the candidate is no search']]);
  assert.deepEqual(compare(sweep, sweep).searches, []);
});
