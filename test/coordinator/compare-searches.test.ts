import assert from 'node:assert/strict';
import { test } from 'node:test';
import { compareJobs, comparisonTable, searchVerdict } from '@niclab/shared/domain/compare';
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
  // Against a faster path, uncapped (its NDR 44,000): it met the goal far above the capped max,
  // but nothing is known of the capped path above 30,000, so it cannot be shown better (+46%).
  const faster = searched('faster', mlr(), knee(44_000));
  const [up] = compare(capped, faster).searches;
  assert.ok(up!.changePercent! > 40, up!.judged);
  assert.deepEqual([up!.verdict, up!.reason], ['no significant change', 'the baseline found no upper bound (its max carried), so the candidate cannot be shown better'], up!.judged);
  // And the other way round: a capped candidate, whose rate is 32% lower, cannot be shown worse.
  const [down] = compare(faster, capped).searches;
  assert.ok(down!.changePercent! < -30, down!.judged);
  assert.deepEqual([down!.verdict, down!.reason], ['no significant change', 'the candidate found no upper bound (its max carried), so it cannot be shown worse'], down!.judged);
  // Both capped at 30,000 (paths of 40,000 and 35,000): both reasons, and no verdict either way.
  const [both] = compare(capped, searched('capped2', mlr({ max: { packetsPerSecond: 30_000 } }), knee(35_000))).searches;
  assert.equal(both!.verdict, 'no significant change', both!.judged);
  assert.match(both!.reason!, /baseline found no upper bound .*; the candidate found no upper bound \(its max carried\), so it cannot be shown worse$/);
});

test('the verdict needs both the brackets apart and the rate moved the same way by minChangePercent: a candidate above the baseline\'s bracket but forwarding less is no better', () => {
  const at = (lower: number, upper: number | null, rate: number) => ({ point: {}, algorithm: 'mlrsearch' as const, lossRatio: 0.2, exceedRatio: 0.5, lower, upper, rate });
  // Met a 20% goal at 1,010, above the baseline's failed 1,005, but lost 19% there: forwarded 818 against 1,000.
  assert.equal(searchVerdict(at(1000, 1005, 1000), at(1010, 1020, 818), 1), 'no significant change');
  assert.equal(searchVerdict(at(1000, 1005, 1000), at(1010, 1020, 1010), 1), 'better');
  // At the very load where the baseline failed, the candidate passed: that is above.
  assert.equal(searchVerdict(at(1000, 1005, 1000), at(1005, 1020, 1015), 1), 'better');
  assert.equal(searchVerdict(at(1000, 1005, 1000), at(1005, 1020, 1005), 1), 'no significant change', 'within minChangePercent');
  // Failed at or below where the baseline passed, and forwarding less: worse; forwarding more (less loss at its lower bound): not worse.
  assert.equal(searchVerdict(at(1000, 1005, 1000), at(900, 1000, 890), 1), 'worse');
  assert.equal(searchVerdict(at(1000, 1005, 800), at(900, 1000, 890), 1), 'no significant change');
});

test('a binary PDR against an MLRsearch PDR on the same path compare equal: both rates are forwarded ones', () => {
  const b = searched('bin-pdr', binary({ target: 'pdr', lossRatio: 0.005 }), knee(40_000));
  const m = searched('mlr-pdr', mlr({ goals: [{ lossRatio: 0.005 }] }), knee(40_000));
  const [pdr] = compare(b, m).searches;
  // The PDR 0.5% at 41,000 offered forwards 41,000 × 0.995 = 40,795; each within its width below.
  assert.ok(pdr!.baseline!.rate! < pdr!.baseline!.lower!, `the binary side's rate is forwarded: ${pdr!.judged}`);
  for (const side of [pdr!.baseline!, pdr!.candidate!]) assert.ok(side.rate! <= 40_795 && side.rate! >= 40_795 * 0.99, pdr!.judged);
  assert.ok(Math.abs(pdr!.changePercent!) < 1, pdr!.judged);
  assert.equal(pdr!.verdict, 'no significant change', pdr!.judged);
});

test('a binary NDR against an MLRsearch with two NDR goals: a row for each, whichever is the baseline', () => {
  const b = searched('bin', binary(), knee(40_000));
  const m = searched('mlr2', mlr({ goals: [{ lossRatio: 0, exceedRatio: 0.5 }, { lossRatio: 0, exceedRatio: 0 }] }), knee(40_000));
  const rows = (x: typeof b, y: typeof b) => compare(x, y).searches.map((s) => [s.lossRatio, s.exceedRatio, s.verdict]);
  assert.deepEqual(rows(b, m), [[0, null, 'no significant change'], [0, null, 'no significant change']]);
  assert.deepEqual(rows(m, b), rows(b, m));
});

test('a search against a job that is no search: not comparable, saying which; two jobs that are no search: no search comparison', () => {
  const sweep = { job: { id: 'plain', spec: { ...base } as unknown as JobSpec, status: 'succeeded' } as unknown as Job, runs: [] as Run[] };
  const s = searched('s', mlr(), knee(40_000));
  const mixed = compare(s, sweep).searches;
  assert.deepEqual(mixed.map((x) => [x.verdict, x.reason]), [['not comparable', 'the candidate is no search'], ['not comparable', 'the candidate is no search']]);
  assert.deepEqual(compare(sweep, sweep).searches, []);
});
