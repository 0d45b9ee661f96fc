import assert from 'node:assert/strict';
import { test } from 'node:test';
import { strategyFor } from '@niclab/shared/domain/campaigns/index';
import type { JobSpec, Run } from '@niclab/shared/domain/contract';
import type { PlannedRun } from '@niclab/shared/domain/plan';
import { judgeTrial, searchResults, searchErrors } from '@niclab/shared/domain/campaigns/rate-search';
import { buildReport, reportTable } from '@niclab/shared/domain/report';

/**
 * The search as the coordinator drives it (strategy.next until null), against paths whose
 * behaviour is known exactly: a run's figures come from a function of its offered rate.
 * What a real path gives is the lab's test (test/lab/search.test.ts).
 */
const flow = { from: { agent: 'A', interface: 'eth1' }, to: { agent: 'B', interface: 'eth1' } };
const spec = (search: Partial<NonNullable<JobSpec['search']>>, extra: Partial<JobSpec> = {}): JobSpec =>
  ({
    engine: 'builtin', test: 'stream', protocol: 'udp', duration: 1, interval: 1, direction: 'forward', repeat: 1, retries: 0,
    flows: [flow], udp: { packetSize: 1000, rate: { packetsPerSecond: 1000 } },
    search: { target: 'ndr', min: { packetsPerSecond: 1000 }, max: { packetsPerSecond: 100_000 }, resolutionPercent: 1, confirmations: 1, maxTrials: 40, ...search },
    ...extra,
  }) as JobSpec;

interface PathFigures { lost: number; achieved?: number; error?: boolean }
type Path = (offered: number, trial: number) => PathFigures;

function runOf(plan: PlannedRun, figures: PathFigures, flows = 1): Run {
  const offered = (plan.point.rate as { packetsPerSecond: number }).packetsPerSecond;
  const achieved = figures.achieved ?? offered;
  const sent = Math.round(achieved);
  const udp = { sent, received: sent - figures.lost, lost: figures.lost, lossRatio: sent ? figures.lost / sent : 0, outOfOrder: 0, duplicates: 0, jitterSeconds: 0, achievedPacketsPerSecond: achieved };
  return {
    id: `r${plan.index}`, jobId: 'j', index: plan.index, point: plan.point, repetition: plan.repetition,
    status: figures.error ? 'failed' : 'succeeded', startedAt: null, finishedAt: null,
    error: figures.error ? { code: 'agent_lost', message: 'lost' } : null,
    flows: figures.error ? [] : Array.from({ length: flows }, () => ({ udp })),
  } as unknown as Run;
}

/** Drives the strategy to its end, as processJob does; returns the runs in order. */
function drive(job: JobSpec, path: Path, limit = 500): Run[] {
  const strategy = strategyFor(job);
  const finished = new Map<number, Run>();
  let trial = 0;
  for (let plan = strategy.next(finished); plan; plan = strategy.next(finished)) {
    assert.ok(trial++ < limit, 'the search ends');
    assert.equal(finished.has(plan.index), false, 'a new index for every trial');
    finished.set(plan.index, runOf(plan, path((plan.point.rate as { packetsPerSecond: number }).packetsPerSecond, trial), job.flows.length));
  }
  return [...finished.values()];
}

/** A shaper: everything above `capacity` datagrams/s is lost. */
const shaper = (capacity: number): Path => (offered) => ({ lost: Math.max(0, Math.round(offered - capacity)) });

test('NDR through a path that loses above 43,210 pps: the bracket closes around it within the resolution, each passing rate confirmed', () => {
  const job = spec({});
  const runs = drive(job, shaper(43_210));
  const [result] = searchResults(job, runs);
  assert.ok(result);
  assert.equal(result.stoppedBy, 'resolution');
  const { low, high } = result.bracket;
  assert.ok(low !== null && high !== null);
  assert.ok(low <= 43_210 && high > 43_210, `bracket ${low}-${high}`);
  assert.ok((high - low) / high <= 0.01, `bracket ${low}-${high} within 1%`);
  assert.equal(result.found?.packetsPerSecond, low);
  assert.equal(result.found?.bitsPerSecond, low * 1000 * 8);
  assert.equal(result.found?.wireBitsPerSecond, low * 1066 * 8);
  assert.equal(result.limitedBy, 'loss');
  assert.equal(result.trials[0]!.packetsPerSecond, 100_000, 'the first trial is at max');
  // Every rate that passed was tried twice (one confirmation) and passed both times.
  const passed = new Map<number, number>();
  for (const t of result.trials) if (t.passed) passed.set(t.packetsPerSecond, (passed.get(t.packetsPerSecond) ?? 0) + 1);
  for (const [rate, count] of passed) assert.equal(count, 2, `${rate} pps passed ${count} times`);
  // log2(99,000 / 1%) halvings at most, each passing one confirmed: well under 40.
  assert.ok(result.trials.length <= 24, `${result.trials.length} trials`);
});

test('a coarser resolution stops sooner; confirmations 0 tries each rate once', () => {
  const fine = searchResults(spec({}), drive(spec({}), shaper(43_210)))[0]!;
  const coarse = searchResults(spec({ resolutionPercent: 10, confirmations: 0 }), drive(spec({ resolutionPercent: 10, confirmations: 0 }), shaper(43_210)))[0]!;
  assert.ok(coarse.trials.length < fine.trials.length / 2, `${coarse.trials.length} vs ${fine.trials.length}`);
  assert.ok((coarse.bracket.high! - coarse.bracket.low!) / coarse.bracket.high! <= 0.1);
  assert.equal(new Set(coarse.trials.map((t) => t.packetsPerSecond)).size, coarse.trials.length);
});

test('a rate that passes once and fails its confirmation is a failing rate', () => {
  // Noisy around 50,000: the first trial at a rate in 50,000-60,000 passes, every later one loses.
  const seen = new Set<number>();
  const noisy: Path = (offered) => {
    if (offered <= 50_000) return { lost: 0 };
    if (offered <= 60_000 && !seen.has(offered)) return seen.add(offered), { lost: 0 };
    return { lost: 5 };
  };
  const [result] = searchResults(spec({}), drive(spec({}), noisy));
  assert.ok(result!.found!.packetsPerSecond <= 50_000 && result!.found!.packetsPerSecond >= 49_500, JSON.stringify(result!.bracket));
});

test('max passing ends at max; min failing finds nothing; a sender that falls short limits the search', () => {
  const atMax = searchResults(spec({}), drive(spec({}), shaper(1e9)))[0]!;
  assert.deepEqual([atMax.stoppedBy, atMax.found?.packetsPerSecond, atMax.trials.length, atMax.limitedBy], ['max', 100_000, 2, null]);

  const hopeless = searchResults(spec({}), drive(spec({}), shaper(500)))[0]!;
  assert.equal(hopeless.stoppedBy, 'min');
  assert.equal(hopeless.found, null);
  assert.ok(hopeless.trials.some((t) => t.packetsPerSecond === 1000 && !t.passed), 'min itself was tried');

  // The receiver takes everything; the sender cannot send faster than 30,000 pps.
  const slowSender: Path = (offered) => ({ lost: 0, achieved: Math.min(offered, 30_000) });
  const limited = searchResults(spec({}), drive(spec({}), slowSender))[0]!;
  assert.equal(limited.limitedBy, 'sender');
  // A trial passes while its sender reaches 99% of the offered rate: at most 30,000 / 0.99.
  assert.ok(limited.found!.packetsPerSecond <= 30_303 && limited.found!.packetsPerSecond >= 29_700, JSON.stringify(limited.bracket));
});

test('the sender check reads what the sender offered over the whole run: a stall fails the trial, whichever engine said it', () => {
  const job = spec({}, { duration: 4 });
  const trial = (...udps: object[]) => judgeTrial(job, { index: 0, point: { rate: { packetsPerSecond: 4000 } }, status: 'succeeded', flows: udps.map((udp) => ({ udp: { lost: 0, lossRatio: 0, ...udp } })) } as unknown as Run);
  // Issue 26: stopped for 3 of 4 s, the builtin sent 5,277 and said 4,002 pps (sent over its time
  // to the last burst); it now says sent / duration. iperf3's sender says nothing: sent / duration too.
  for (const stalled of [{ sent: 5277, achievedPacketsPerSecond: 5277 / 4 }, { sent: 5277 }]) {
    const t = trial(stalled);
    assert.deepEqual([t.passed, t.failedBy, t.flows[0]!.achievedPacketsPerSecond], [false, 'sender', 5277 / 4]);
  }
  // All 16,000 sent is exactly the offered rate; 99% of it still tests the rate; a bidir trial with one direction short does not.
  assert.equal(trial({ sent: 16_000, achievedPacketsPerSecond: 4000 }).passed, true);
  assert.equal(trial({ sent: 15_840 }).passed, true);
  assert.equal(trial({ sent: 16_000 }, { sent: 15_000 }).failedBy, 'sender');
});

test('PDR at 1% is at least the NDR on a path whose loss grows past its capacity', () => {
  const gradual: Path = (offered) => ({ lost: offered <= 40_000 ? 0 : Math.round(offered * ((offered - 40_000) / 200_000)) });
  const ndr = searchResults(spec({}), drive(spec({}), gradual))[0]!.found!.packetsPerSecond;
  const pdrSpec = spec({ target: 'pdr', lossRatio: 0.01 });
  const pdr = searchResults(pdrSpec, drive(pdrSpec, gradual))[0]!.found!.packetsPerSecond;
  assert.ok(ndr <= 40_000 && ndr > 39_000, `ndr ${ndr}`);
  // 1% loss at offered r when (r - 40,000) / 200,000 = 0.01: r = 42,000.
  assert.ok(pdr > ndr && pdr <= 42_000 && pdr > 41_400, `pdr ${pdr}`);
});

test('a swept size searches each point in turn; several flows get the same rate and the total counts them all', () => {
  const job = spec({}, { sweep: { packetSize: [100, 1000] }, flows: [flow, { from: { agent: 'C', interface: 'eth1' }, to: flow.to }] });
  // A per-packet limit at 100 B (60,000 pps), a bit limit at 1000 B (80 Mbit/s: 10,000 pps).
  const sized = (run: Run) => run.point.packetSize!;
  const capacity = (size: number) => (size === 100 ? 60_000 : 10_000);
  const strategy = strategyFor(job);
  const finished = new Map<number, Run>();
  for (let plan = strategy.next(finished); plan; plan = strategy.next(finished)) {
    const offered = (plan.point.rate as { packetsPerSecond: number }).packetsPerSecond;
    finished.set(plan.index, runOf(plan, { lost: Math.max(0, offered - capacity(plan.point.packetSize!)) }, 2));
  }
  const ordered = [...finished.values()];
  assert.equal(searchResults(job, ordered).length, 2);
  // Points run one after the other: every 100 B trial before the first 1000 B one.
  const firstBig = ordered.findIndex((r) => sized(r) === 1000);
  assert.ok(firstBig > 0 && ordered.slice(firstBig).every((r) => sized(r) === 1000));
  const [small, big] = searchResults(job, ordered);
  assert.ok(small!.found!.packetsPerSecond <= 60_000 && small!.found!.packetsPerSecond >= 59_400);
  assert.ok(big!.found!.packetsPerSecond <= 10_000 && big!.found!.packetsPerSecond >= 9_900);
  assert.equal(big!.found!.totalPacketsPerSecond, big!.found!.packetsPerSecond * 2);
  // The report's points are the rates tried; its table names both points.
  const report = buildReport({ id: 'j', status: 'succeeded', spec: job } as never, ordered);
  assert.equal(report.points.length, new Set(ordered.map((r) => JSON.stringify(r.point))).size);
  assert.deepEqual(report.dimensions, ['packetSize', 'rate']);
  const table = reportTable({ id: 'j', status: 'succeeded', spec: job } as never, ordered, report);
  assert.match(table, /packetSize=100 +100 +\d+/);
  assert.match(table, /packetSize=1000 +1000 +\d+/);
});

test('a resumed search goes on exactly where it stopped', () => {
  const job = spec({});
  const all = drive(job, shaper(43_210));
  const strategy = strategyFor(job);
  for (const cut of [1, 5, 11]) {
    const finished = new Map(all.slice(0, cut).map((r) => [r.index, r]));
    const next = strategy.next(finished)!;
    assert.equal(next.index, all[cut]!.index);
    assert.deepEqual(next.point, all[cut]!.point);
  }
  assert.equal(strategy.next(new Map(all.map((r) => [r.index, r]))), null);
});

test('runs that fail with errors are tried again at the same rate, and three end the point', () => {
  let errors = 0;
  const flaky: Path = () => (errors++ < 1 ? { lost: 0, error: true } : { lost: 0 });
  const once = drive(spec({}), flaky);
  assert.equal(once[0]!.status, 'failed');
  assert.deepEqual(once[1]!.point, once[0]!.point, 'the same rate again');
  const strategy = strategyFor(spec({}));
  assert.equal(strategy.outcome(new Map(once.map((r) => [r.index, r]))), null, 'one trial lost to an error does not fail a search that concluded');
  const brokenRuns = drive(spec({}), () => ({ lost: 0, error: true }));
  const broken = searchResults(spec({}), brokenRuns)[0]!;
  assert.deepEqual([broken.stoppedBy, broken.found, broken.trials.length], ['errors', null, 3]);
  assert.equal(strategy.outcome(new Map(brokenRuns.map((r) => [r.index, r])))?.code, 'runs_failed');
});

test('the spec rules a search brings', () => {
  const fields = (s: JobSpec) => searchErrors(s).map((e) => e.field);
  assert.deepEqual(fields(spec({})), []);
  assert.deepEqual(fields(spec({}, { protocol: 'tcp' })), ['body.search']);
  assert.deepEqual(fields(spec({}, { sweep: { rate: [{ packetsPerSecond: 5 }] } })), ['body.sweep.rate']);
  assert.deepEqual(fields(spec({}, { repeat: 3 })), ['body.repeat']);
  assert.deepEqual(fields(spec({ lossRatio: 0.01 })), ['body.search.lossRatio']);
  assert.deepEqual(fields(spec({ min: { packetsPerSecond: 200_000 } })), ['body.search.min']);
});
