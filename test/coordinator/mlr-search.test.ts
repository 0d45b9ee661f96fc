import assert from 'node:assert/strict';
import { test } from 'node:test';
import { campaignOf, strategyFor } from '@niclab/shared/domain/campaigns/index';
import { mlrSearchResults, mlrSearchErrors, withMlrSearchDefaults } from '@niclab/shared/domain/campaigns/mlr-search';
import type { JobSpec, Run } from '@niclab/shared/domain/contract';
import { runSpec, type PlannedRun } from '@niclab/shared/domain/plan';
import { drive, type Path, type PathFigures } from '../helpers/search-path.js';
import { buildReport, reportTable } from '@niclab/shared/domain/report';

/**
 * The MLRsearch campaign as the coordinator drives it (strategy.next until null), against
 * paths whose loss is a known function of the offered rate, so every figure has a closed form.
 * The search's own classification is test/shared/mlrsearch.test.ts; a real path is the lab's
 * (test/lab/mlrsearch.test.ts).
 */
const flow = { from: { agent: 'A', interface: 'eth1' }, to: { agent: 'B', interface: 'eth1' } };
const spec = (search: Partial<NonNullable<JobSpec['search']>> = {}, extra: Partial<JobSpec> = {}): JobSpec =>
  ({
    engine: 'builtin', test: 'stream', protocol: 'udp', duration: 4, interval: 1, direction: 'forward', repeat: 1, retries: 0,
    flows: [flow], udp: { packetSize: 1000, rate: { packetsPerSecond: 1000 } },
    search: { algorithm: 'mlrsearch', min: { packetsPerSecond: 1000 }, max: { packetsPerSecond: 100_000 }, ...search },
    ...extra,
  }) as JobSpec;

/** No loss up to 40,000 datagrams/s, then a share that grows by 1% per 2,000 above it: NDR 40,000, PDR 0.5% at 41,000. */
const gradual = (offered: number) => Math.max(0, (offered - 40_000) / 200_000);
const gradualPath: Path = (offered) => ({ lossRatio: gradual(offered) });

test('NDR and PDR 0.5% from one job: each relevant lower bound within the goal width (0.5%) below the true rate, and the conditional throughput from the loss there', () => {
  const job = spec();
  const { runs } = drive(job, gradualPath);
  const [result] = mlrSearchResults(job, runs);
  assert.ok(result);
  assert.deepEqual([result.state, result.stoppedBy, result.limit], ['done', 'goals', null]);
  const [ndr, pdr] = result.goals;
  for (const [goal, truth] of [[ndr!, 40_000], [pdr!, 41_000]] as const) {
    const lower = goal.relevantLowerBound!.packetsPerSecond;
    const upper = goal.relevantUpperBound!.packetsPerSecond;
    assert.ok(goal.regular, JSON.stringify(goal));
    assert.ok(lower <= truth && upper > truth * 0.999, `goal ${goal.goal.lossRatio}: ${lower}-${upper} around ${truth}`);
    assert.ok((upper - lower) / upper <= 0.005 + 1e-3, `${lower}-${upper} within the width`);
    // The path's own loss at the lower bound (every trial there sees the same share): the quantile is it.
    assert.ok(Math.abs(goal.conditionalLossRatio! - gradual(lower)) <= 1 / (lower * 4), `${goal.conditionalLossRatio} vs ${gradual(lower)}`);
    assert.ok(Math.abs(goal.conditionalThroughput!.packetsPerSecond - lower * (1 - gradual(lower))) <= 1, JSON.stringify(goal.conditionalThroughput));
    assert.equal(goal.conditionalThroughput!.bitsPerSecond, goal.conditionalThroughput!.packetsPerSecond * 1000 * 8);
    assert.equal(goal.conditionalThroughput!.wireBitsPerSecond, goal.conditionalThroughput!.packetsPerSecond * 1066 * 8);
  }
  assert.ok(ndr!.relevantLowerBound!.packetsPerSecond < pdr!.relevantLowerBound!.packetsPerSecond);
});

test('trial durations grow from 1 s to the final duration (the job\'s 4 s); each run carries its own, and its spec the same', () => {
  const job = spec();
  const { plans, runs } = drive(job, gradualPath);
  const durations = plans.map((p) => p.duration!);
  assert.equal(plans[0]!.duration, 1, 'the warm-up');
  assert.ok(durations.every((d) => Number.isInteger(d) && d >= 1 && d <= 4), durations.join(','));
  assert.ok(durations.includes(4) && durations.some((d) => d < 4), durations.join(','));
  assert.ok(durations.indexOf(4) > durations.lastIndexOf(1, durations.indexOf(4)) && durations.lastIndexOf(1, durations.indexOf(4)) > 0, `short trials before the first full-length one: ${durations.join(',')}`);
  for (const plan of plans) assert.equal(runSpec(job, plan).duration, plan.duration);
  const result = mlrSearchResults(job, runs)[0]!;
  assert.equal(result.trials[0]!.purpose, 'warmup');
  assert.equal(result.trials[0]!.goals, null, 'the warm-up counts for no goal');
  assert.equal(result.trialSeconds, durations.reduce((a, b) => a + b, 0));
  // At each goal's lower bound, full-length trials (4 s) decided it.
  for (const goal of result.goals) {
    const at = result.trials.filter((t) => t.packetsPerSecond === goal.relevantLowerBound!.packetsPerSecond);
    assert.ok(at.some((t) => t.duration === 4), JSON.stringify(at));
  }
});

test('a void trial (sender short, receiver socket drops, failed run) is asked again, counts for no goal, and leaves the answer unchanged', () => {
  const clean = mlrSearchResults(spec(), drive(spec(), gradualPath).runs)[0]!;
  const voids = new Map<number, PathFigures>([
    [3, { lossRatio: 0, achieved: 0 }], // the sender stalled for the whole trial (a SIGSTOP)
    [6, { lossRatio: 0, socketDrops: 12 }],
    [9, { lossRatio: 0, error: true }],
  ]);
  const job = spec();
  const { runs } = drive(job, (offered, duration, trial) => ({ ...gradualPath(offered, duration, trial), ...voids.get(trial) }));
  const result = mlrSearchResults(job, runs)[0]!;
  assert.deepEqual(result.goals, clean.goals, 'the same answer');
  assert.equal(result.trials.length, clean.trials.length + 3);
  const kinds = [3, 6, 9].map((n) => result.trials[n - 1]!);
  assert.deepEqual(kinds.map((t) => t.void.map((v) => v.kind)), [['sender_short'], ['receiver_socket_drops'], ['error']]);
  for (const [i, t] of kinds.entries()) {
    assert.equal(t.goals, null, 'counted for no goal');
    const again = result.trials[[3, 6, 9][i]!]!;
    assert.deepEqual([again.packetsPerSecond, again.duration, again.attempt], [t.packetsPerSecond, t.duration, t.attempt + 1], 'the same input again');
  }
  assert.match(kinds[0]!.void[0]!.why, /offered 0\.0 of/);
  assert.equal(kinds[1]!.void[0]!.drops, 12);
});

test("a sender that never reaches a load is niclab's limit: the search stops, names the load, and the job fails as search_inconclusive", () => {
  const job = spec();
  // The path carries everything; the sender cannot send faster than 30,000 datagrams/s.
  const { runs } = drive(job, (offered) => ({ lossRatio: 0, achieved: Math.min(offered, 30_000) }));
  const result = mlrSearchResults(job, runs)[0]!;
  assert.deepEqual([result.state, result.stoppedBy], ['could_not_conclude', 'void_trials']);
  assert.ok(result.limit && result.limit.packetsPerSecond > 30_000 && result.limit.attempts === 3, JSON.stringify(result.limit));
  // A host other work shares may allow more: each input is then made up to 1 + maxVoidRepeats times.
  const patient = spec({ maxVoidRepeats: 5 });
  const more = mlrSearchResults(patient, drive(patient, (offered) => ({ lossRatio: 0, achieved: Math.min(offered, 30_000) })).runs)[0]!;
  assert.equal(more.limit?.attempts, 6, JSON.stringify(more.limit));
  assert.ok(result.trials.every((t) => t.void.length > 0 || t.purpose === 'warmup'), 'no load above what the sender reached was classified');
  const outcome = strategyFor(job).outcome(new Map(runs.map((r) => [r.index, r])));
  assert.equal(outcome?.code, 'search_inconclusive');
  assert.match(outcome!.message, /niclab could not make a trial at \d+ datagrams\/s/);
});

test('a path that carries max load leaves no upper bound (irregular), and the job still succeeds', () => {
  const job = spec();
  const { runs } = drive(job, () => ({ lossRatio: 0 }));
  const result = mlrSearchResults(job, runs)[0]!;
  assert.deepEqual(result.goals.map((g) => [g.irregular, g.relevantLowerBound?.packetsPerSecond]), [['no_upper_bound', 100_000], ['no_upper_bound', 100_000]]);
  assert.equal(strategyFor(job).outcome(new Map(runs.map((r) => [r.index, r]))), null);
});

test('a resumed search asks for exactly the trial that came next, duration included', () => {
  const job = spec();
  const { plans, runs } = drive(job, gradualPath);
  const strategy = strategyFor(job);
  for (const cut of [1, 4, 9, runs.length - 1]) {
    const next = strategy.next(new Map(runs.slice(0, cut).map((r) => [r.index, r])))!;
    assert.deepEqual(next, plans[cut]);
  }
  assert.equal(strategy.next(new Map(runs.map((r) => [r.index, r]))), null);
});

test('the spec: defaults shown in the stored job, goals checked as CSIT checks them, the binary search untouched', () => {
  const { spec: stored } = withMlrSearchDefaults(spec({ goals: [{ lossRatio: 0 }] }), []);
  assert.deepEqual(stored.search!.goals, [{ lossRatio: 0, exceedRatio: 0.5, finalTrialDuration: 4, durationSum: 21, width: 0.005, initialTrialDuration: 1 }]);
  assert.deepEqual([stored.search!.warmupDuration, stored.search!.searchDurationMax, stored.search!.maxVoidRepeats], [1, 600, 2]);
  const fields = (s: JobSpec) => mlrSearchErrors(s).map((e) => e.field);
  assert.deepEqual(fields(spec()), []);
  assert.deepEqual(fields(spec({ goals: [{ lossRatio: 0, finalTrialDuration: 2, initialTrialDuration: 3 }] })), ['body.search.goals[0].finalTrialDuration']);
  assert.deepEqual(fields(spec({ goals: [{ lossRatio: 0, finalTrialDuration: 30, durationSum: 10 }] })), ['body.search.goals[0].durationSum']);
  assert.deepEqual(fields(spec({}, { protocol: 'tcp' })), ['body.search']);
  assert.deepEqual(fields(spec({ min: { packetsPerSecond: 200_000 } })), ['body.search.min']);
  assert.equal(campaignOf(spec()).name, 'mlr-search');
  assert.equal(campaignOf(spec({ algorithm: 'binary', target: 'ndr' })).name, 'rate-search');
  assert.equal(campaignOf({ ...spec(), search: { target: 'ndr' } } as JobSpec).name, 'rate-search');
  // Runs at most: a trial lasts 1 s at least, 600 trial-seconds per point, one more may start.
  assert.deepEqual(campaignOf(spec()).maxRuns(spec()), { runs: 601, by: 'points' });
  // Its longest run (a token's maxDurationSeconds): the longest final trial, or the warm-up.
  assert.equal(campaignOf(spec()).longestRun(spec()), 4);
  assert.equal(campaignOf(spec()).longestRun(spec({ goals: [{ lossRatio: 0 }, { lossRatio: 0.005, finalTrialDuration: 30 }] })), 30);
  assert.equal(campaignOf(spec()).longestRun(spec({ warmupDuration: 9 }, { duration: 2 })), 9);
  // Goals are checked without max too (the schema requires it; a 500 was the cost of skipping them).
  const noMax = spec({ max: undefined, goals: [{ lossRatio: 0, finalTrialDuration: 2, initialTrialDuration: 3 }] });
  assert.deepEqual(fields(noMax), ['body.search.goals[0].finalTrialDuration']);
  // A job of 0.5 s: trials are whole seconds, its final trial 1 s (the stored goal stays valid).
  assert.equal(withMlrSearchDefaults(spec({}, { duration: 0.5 }), []).spec.search!.goals![0]!.finalTrialDuration, 1);
});

test("the report: the offered rates as its points, one section per sweep point, and the table's goal and trial rows", () => {
  const job = spec({}, { sweep: { packetSize: [100, 1000] } });
  const { runs } = drive(job, gradualPath);
  const report = buildReport({ id: 'j', status: 'succeeded', spec: job } as never, runs);
  assert.equal(report.mlrSearches?.length, 2);
  assert.equal(report.searches, undefined);
  assert.deepEqual(report.dimensions, ['packetSize', 'rate']);
  assert.equal(report.points.length, new Set(runs.map((r) => JSON.stringify(r.point))).size);
  const table = reportTable({ id: 'j', status: 'succeeded', spec: job } as never, runs, report);
  assert.match(table, /MLRsearch \(draft-ietf-bmwg-mlrsearch, RFC 9971\): 2 goal\(s\)/);
  assert.match(table, /packetSize=100: done \(goals\)/);
  assert.match(table, /^ *0 +0\.00% +50\.0% +0\.500% +\d+ +\d+ +[\d.]+ +[\d.]+ +[\d.]+ +regular$/m);
  assert.match(table, /warmup +[\d.]+ +not counted/);
});

/** A probe's round trip that grows with the load beside it: 100 µs plus 1 µs per 1,000 datagrams/s. */
const rttAt = (offered: number) => 1e-4 + offered * 1e-9;

test('latencyAt: once the search has ended, one run per fraction of the PDR\'s conditional throughput, with a probe beside each flow; the search itself unchanged', () => {
  const plain = spec({}, { flows: [flow, flow] });
  const job = spec({ latencyAt: [0.1, 0.5, 0.9] }, { flows: [flow, flow] });
  const path: Path = (offered) => ({ lossRatio: gradual(offered), rttSeconds: rttAt(offered) });
  const clean = drive(plain, path);
  const { plans, runs } = drive(job, path);
  // The trials are the search's without latencyAt, in the same order; the three latency runs follow.
  assert.deepEqual(plans.slice(0, clean.plans.length), clean.plans);
  const latencyPlans = plans.slice(clean.plans.length);
  assert.deepEqual(latencyPlans.map((p) => p.latencyAt), [0.1, 0.5, 0.9]);
  const result = mlrSearchResults(job, runs)[0]!;
  assert.deepEqual(result.goals, mlrSearchResults(plain, clean.runs)[0]!.goals, 'latency runs classify no load');
  assert.equal(result.trials.length, clean.plans.length);
  // The PDR (the highest loss ratio) is goal 1; each rate is its fraction of that conditional throughput, for its final trial (4 s).
  const ct = result.goals[1]!.conditionalThroughput!.packetsPerSecond;
  assert.ok(ct > 40_000, `PDR conditional throughput ${ct}`);
  for (const plan of latencyPlans) {
    assert.equal((plan.point.rate as { packetsPerSecond: number }).packetsPerSecond, Math.round(plan.latencyAt! * ct));
    assert.equal(plan.duration, 4);
    const flows = runSpec(job, plan).flows;
    assert.deepEqual(flows.map((f) => f.test?.kind ?? 'stream'), ['stream', 'stream', 'probe', 'probe']);
    assert.deepEqual(flows[2]!.from, flow.from);
    assert.deepEqual(flows[3]!.to, flow.to);
  }
  assert.deepEqual(runSpec(job, plans[0]!).flows, job.flows, 'a trial has no probe');
  assert.deepEqual(result.latency.map((l) => [l.fraction, l.goal, l.status, l.runIndex]), latencyPlans.map((p) => [p.latencyAt, 1, 'succeeded', p.index]));
  for (const l of result.latency) {
    assert.equal(l.packetsPerSecond, Math.round(l.fraction * ct));
    assert.deepEqual(l.flows.map((f) => f.flow), [0, 1]);
    for (const f of l.flows) {
      // The probe's own figures beside that flow, at its load; the load flow's own sending and loss.
      assert.equal(f.rttSeconds!.p50, rttAt(l.packetsPerSecond!));
      assert.equal(f.oneWayDelaySeconds!.forward.p50, rttAt(l.packetsPerSecond!) / 2);
      assert.equal(f.achievedPacketsPerSecond, l.packetsPerSecond);
      assert.equal(f.lossRatio, 0, 'below the NDR');
      assert.deepEqual([f.probeLossRatio, f.clock], [0, 'shared']);
    }
  }
  // Not the report's points (trial rates), and counted in the job's runs.
  const report = buildReport({ id: 'j', status: 'succeeded', spec: job } as never, runs);
  assert.ok(report.points.every((p) => p.flows.length === 2), 'no point has the probes\' flows');
  assert.equal(strategyFor(job).expectedRuns(new Map(runs.map((r) => [r.index, r]))), runs.length);
  assert.deepEqual(campaignOf(job).maxRuns(job), { runs: 604, by: 'points' });
  const table = reportTable({ id: 'j', status: 'succeeded', spec: job } as never, runs, report);
  assert.match(table, /latency at fractions of the PDR's conditional throughput/);
  assert.match(table, new RegExp(`^ *50\\.0% +${Math.round(0.5 * ct)} +1 +0\\.000 +${(rttAt(Math.round(0.5 * ct)) * 1e3).toFixed(3)} `, 'm'));
  // A resumed job asks the latency run that came next.
  assert.deepEqual(strategyFor(job).next(new Map(runs.slice(0, -1).map((r) => [r.index, r]))), plans.at(-1));
});

test('latencyAt without a conditional throughput (min load already fails) makes no run and says why; with bidir it is refused', () => {
  const job = spec({ latencyAt: [0.5] });
  const { plans, runs } = drive(job, () => ({ lossRatio: 0.2 }));
  assert.ok(plans.every((p) => p.latencyAt === undefined));
  const [latency] = mlrSearchResults(job, runs)[0]!.latency;
  assert.deepEqual([latency!.status, latency!.runIndex, latency!.packetsPerSecond, latency!.flows], ['not_made', null, null, []]);
  assert.match(latency!.why!, /goal 1 has no conditional throughput/);
  // A failed latency run is reported as failed, with why, and not made again.
  const trials = drive(spec(), gradualPath).plans.length;
  const failing = drive(spec({ latencyAt: [0.5] }), (offered, _duration, trial) => ({ lossRatio: gradual(offered), error: trial === trials + 1 }));
  assert.equal(failing.plans.length, trials + 1);
  const failed = mlrSearchResults(spec({ latencyAt: [0.5] }), failing.runs)[0]!.latency[0]!;
  assert.deepEqual([failed.status, failed.flows.length], ['failed', 0]);
  assert.match(failed.why!, /agent_lost/);
  assert.deepEqual(mlrSearchErrors(spec({ latencyAt: [0.5] }, { direction: 'bidir' })).map((e) => e.field), ['body.search.latencyAt']);
  assert.deepEqual(mlrSearchErrors(spec({ latencyAt: [0.5] }, { direction: 'reverse' })), []);
});

