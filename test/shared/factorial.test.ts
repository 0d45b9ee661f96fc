import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { FlowResult, Job, JobSpec, Run } from '@niclab/shared/domain/contract';
import { strategyFor } from '@niclab/shared/domain/campaigns/index';
import { analyseFactorial, cellOrder, factorialFigure, type Cell } from '@niclab/shared/domain/campaigns/factorial';
import { buildReport, reportCsv, reportTable } from '@niclab/shared/domain/report';
import { compareJobs } from '@niclab/shared/domain/compare';
import { endTuningAt, sysctlHosts, tunedEnds, tuningConflicts } from '@niclab/shared/domain/end-tuning';
import type { PlannedRun } from '@niclab/shared/domain/plan';
import { submissionErrors, withDefaults } from '@niclab/api/submission';
import { campaignOf } from '@niclab/shared/domain/campaigns/index';
import type { Agent } from '@niclab/shared/domain/contract';

/**
 * The factorial's statistics against a closed form: effects, standard errors and intervals
 * worked by hand for designed data sets (the t quantiles from a table: scipy.stats.t.ppf), then
 * the whole report of synthetic runs; each end's merged tuning; what one host cannot hold.
 */
const T_975_5 = 2.5705818356363146;
const T_975_8 = 2.306004135204166;
const close = (actual: number | null | undefined, expected: number, what: string) =>
  assert.ok(actual !== null && actual !== undefined && Math.abs(actual - expected) <= 1e-9 * Math.max(1, Math.abs(expected)), `${what}: ${actual}, by hand ${expected}`);

const A = { agent: 'A', interface: 'eth1' };
const B = { agent: 'B', interface: 'eth1' };
const C = { agent: 'C', interface: 'eth1' };
const TUNING = { sender: { sysctl: { 'net.ipv4.tcp_wmem': '4096 16384 1048576' } }, receiver: { sysctl: { 'net.ipv4.tcp_rmem': '4096 131072 1048576' } } };
const spec = (extra: Partial<JobSpec> = {}): JobSpec =>
  ({ engine: 'builtin', test: 'stream', protocol: 'tcp', duration: 2, interval: 1, direction: 'forward', repeat: 3, retries: 0, bufferLength: 131072, streams: 1, noDelay: false, flows: [{ from: A, to: B }], tuning: TUNING, factorial: { of: 'ends' }, ...extra }) as JobSpec;
const stream = factorialFigure(spec());

// Cells of 2, 3, 2 and 2 runs (none, sender, receiver, both): means 11, 12, 10, 32; squares about
// them 2 + 2 + 2 + 8 = 14 over N − 4 = 5 degrees of freedom, so s² = 2.8.
const UNEQUAL: Record<Cell, number[]> = { none: [10, 12], sender: [11, 13, 12], receiver: [9, 11], both: [30, 34] };

test('the effects and intervals of a designed data set, by hand: unequal cells, pooled variance on N − 4 degrees of freedom', () => {
  const r = analyseFactorial(UNEQUAL, stream, 0.95);
  const s2 = 14 / 5;
  assert.equal(r.runs, 9);
  assert.equal(r.degreesOfFreedom, 5);
  close(r.pooledStandardDeviation, Math.sqrt(s2), 'pooled sd');
  // Main effects and interaction: weights ±½ on every cell, Σ c²/n = ¼ (1/2 + 1/3 + 1/2 + 1/2).
  const se = Math.sqrt(s2 * 0.25 * (1 / 2 + 1 / 3 + 1 / 2 + 1 / 2));
  for (const [name, estimate] of [['sender', (12 + 32 - 11 - 10) / 2], ['receiver', (10 + 32 - 11 - 12) / 2], ['interaction', (32 - 10 - (12 - 11)) / 2]] as const) {
    const c = r.effects[name];
    close(c.estimate, estimate, `${name} estimate`);
    close(c.standardError, se, `${name} standard error`);
    close(c.confidenceInterval![0], estimate - T_975_5 * se, `${name} low`);
    close(c.confidenceInterval![1], estimate + T_975_5 * se, `${name} high`);
    assert.equal(c.significant, true, name);
  }
  // Each end alone against none: the sender 12 − 11 over n 3 and 2, the receiver 10 − 11 over 2 and 2.
  const senderSe = Math.sqrt(s2 * (1 / 3 + 1 / 2));
  close(r.alone.sender.estimate, 1, 'sender alone');
  close(r.alone.sender.confidenceInterval![0], 1 - T_975_5 * senderSe, 'sender alone low');
  close(r.alone.receiver.confidenceInterval![1], -1 + T_975_5 * Math.sqrt(s2), 'receiver alone high');
  assert.deepEqual([r.alone.sender.significant, r.alone.receiver.significant], [false, false]);
  assert.deepEqual(r.harmedBy, []);
  // A cell's interval: its mean ± t·s/√n, with the pooled s.
  const both = r.cells.find((c) => c.tuned === 'both')!;
  close(both.mean, 32, 'both mean');
  close(both.confidenceInterval![0], 32 - T_975_5 * Math.sqrt(s2 / 2), 'both low');
  assert.deepEqual(r.cells.map((c) => [c.tuned, c.n]), [['none', 2], ['sender', 3], ['receiver', 2], ['both', 2]]);
});

// Means 20, 21, 10, 40, each cell 3 runs with squares 2: s² = 8 / 8 = 1.
const HARMED: Record<Cell, number[]> = { none: [20, 21, 19], sender: [20, 22, 21], receiver: [10, 11, 9], both: [40, 41, 39] };

test('tuning one end alone harms the figure when its cell is significantly worse than none: in the figure\'s own direction', () => {
  const r = analyseFactorial(HARMED, stream, 0.95);
  const half = T_975_8 * Math.sqrt(1 / 3 + 1 / 3);
  close(r.alone.receiver.estimate, -10, 'receiver alone');
  close(r.alone.receiver.confidenceInterval![1], -10 + half, 'receiver alone high');
  close(r.effects.interaction.estimate, (40 - 10 - (21 - 20)) / 2, 'interaction');
  close(r.effects.interaction.confidenceInterval![0], 14.5 - T_975_8 * Math.sqrt(0.25 * 4 / 3), 'interaction low');
  assert.deepEqual(r.harmedBy, ['receiver']);
  assert.match(r.verdict, /tuning the receiver alone harms throughput \(−10\.00 Mbit\/s|tuning the receiver alone harms throughput/);
  // A round trip is better lower: 10 below none is no harm there, and the sender's +1 is not significant.
  const rtt = analyseFactorial(HARMED, { ...stream, name: 'rttP50Seconds', higherIsBetter: false }, 0.95);
  assert.deepEqual(rtt.harmedBy, []);
  assert.match(rtt.verdict, /tuning the receiver alone improves/);
});

test('no analysis without a run in every cell; no intervals without degrees of freedom', () => {
  const missing = analyseFactorial({ ...UNEQUAL, receiver: [] }, stream, 0.95);
  assert.equal(missing.effects.sender.estimate, null);
  assert.match(missing.verdict, /no analysis: the receiver cell has no succeeded run/);
  assert.deepEqual(missing.cells.map((c) => [c.tuned, c.mean, c.confidenceInterval]), [['none', 11, null], ['sender', 12, null], ['receiver', null, null], ['both', 32, null]], 'the means of the cells that ran, without intervals');
  const once = analyseFactorial({ none: [1], sender: [2], receiver: [3], both: [10] }, stream, 0.95);
  assert.equal(once.degreesOfFreedom, 0);
  close(once.effects.interaction.estimate, (10 - 3 - (2 - 1)) / 2, 'interaction without spread');
  assert.deepEqual([once.effects.interaction.confidenceInterval, once.effects.interaction.significant, once.pooledStandardDeviation], [null, null, null]);
  assert.match(once.verdict, /no intervals/);
});

test('the cells run in rotation: each repetition starts one cell later, so a drift falls on every cell alike', () => {
  assert.deepEqual([1, 2, 3, 4, 5].map(cellOrder), [
    ['none', 'sender', 'receiver', 'both'], ['sender', 'receiver', 'both', 'none'], ['receiver', 'both', 'none', 'sender'], ['both', 'none', 'sender', 'receiver'], ['none', 'sender', 'receiver', 'both'],
  ]);
  const job = spec({ repeat: 2, sweep: { streams: [1, 4] } });
  const strategy = strategyFor(job);
  const finished = new Map<number, Run>();
  const order: string[] = [];
  for (let plan = strategy.next(finished); plan; plan = strategy.next(finished)) {
    order.push(`${plan.point.streams}:${plan.point.tuned}:${plan.repetition}`);
    finished.set(plan.index, { index: plan.index, status: 'succeeded' } as Run);
  }
  assert.equal(strategy.expectedRuns(new Map()), 16);
  // Each sweep point's runs together (the sweep outermost), its repetitions in rotation.
  const cells = (rep: number) => (rep === 1 ? ['none', 'sender', 'receiver', 'both'] : ['sender', 'receiver', 'both', 'none']);
  assert.deepEqual(order, [1, 4].flatMap((streams) => [1, 2].flatMap((rep) => cells(rep).map((cell) => `${streams}:${cell}:${rep}`))));
});

/** A succeeded run of one stream flow at `bitsPerSecond` in `plan`'s cell. */
const runOf = (plan: PlannedRun, bitsPerSecond: number): Run =>
  ({
    id: `r${plan.index}`, jobId: 'j', index: plan.index, point: plan.point, repetition: plan.repetition, status: 'succeeded', startedAt: null, finishedAt: null, error: null,
    flows: [{ flowIndex: 0, direction: 'forward', from: A, to: B, sender: null, receiver: null, bitsPerSecond, retransmits: 0, udp: null, rr: null, intervals: [], nic: { from: null, to: null }, pathVerified: true, error: null, diagnostics: {} } as unknown as FlowResult],
  }) as Run;

/** A factorial job of 3 repetitions driven to its end, each cell's runs taking `values` (Mbit/s) in turn. */
function factorialJob(id: string, values: Record<Cell, number[]>): { record: Job; runs: Run[] } {
  const job = spec({ repeat: 3 });
  const strategy = strategyFor(job);
  const finished = new Map<number, Run>();
  const next = new Map(Object.entries(values).map(([cell, list]) => [cell, [...list]]));
  for (let plan = strategy.next(finished); plan; plan = strategy.next(finished)) finished.set(plan.index, runOf(plan, next.get(plan.point.tuned!)!.shift()! * 1e6));
  const record = { id, status: 'succeeded', spec: job, createdAt: '', startedAt: null, finishedAt: null, progress: { runsDone: 12, runsTotal: 12 }, error: null } as unknown as Job;
  return { record, runs: [...finished.values()] };
}

test('the report of synthetic runs: the factorial section, its CSV rows and its table, in Mbit/s', () => {
  const { record, runs } = factorialJob('j', HARMED);
  const finished = new Map(runs.map((r) => [r.index, r]));
  const report = buildReport(record, [...finished.values()]);
  assert.deepEqual(report.dimensions, ['tuned']);
  assert.deepEqual(report.points.map((p) => [p.point.tuned, p.runs.succeeded]), [['none', 3], ['sender', 3], ['receiver', 3], ['both', 3]]);
  const [f] = report.factorials!;
  close(f!.effects.receiver.estimate, ((10 + 40 - 20 - 21) / 2) * 1e6, 'receiver main effect');
  close(f!.alone.receiver.confidenceInterval![0], (-10 - T_975_8 * Math.sqrt(2 / 3)) * 1e6, 'receiver alone low');
  assert.deepEqual(f!.harmedBy, ['receiver']);
  const csv = reportCsv(report).split('\n');
  assert.equal(csv[0]!.split(',')[0], 'tuned');
  // One header row: the cell's dimension (tuned), flow `factorial`, the metric, n, mean, the pooled sd, the interval.
  const row = (prefix: string) => csv.find((l) => l.startsWith(prefix))?.split(',');
  const both = row('both,factorial,,,,cellMean,')!;
  assert.deepEqual(both.slice(6, 9).map(Number), [3, 40e6, 1e6]);
  close(Number(both[11]), (40 - T_975_8 / Math.sqrt(3)) * 1e6, 'both low in the CSV');
  const interaction = row(',factorial,,,,interaction,')!;
  assert.deepEqual(interaction.slice(6, 8).map(Number), [12, 14.5e6]);
  close(Number(interaction[12]), (14.5 + T_975_8 * Math.sqrt(1 / 3)) * 1e6, 'interaction high in the CSV');
  assert.equal(csv.filter((l) => l.includes(',factorial,')).length, 9, 'four cells and five contrasts');
  const table = reportTable(record, [...finished.values()], report);
  assert.match(table, /receiver alone - none\s+-10\.00\s+-11\.88 to -8\.12\s+yes/);
  assert.match(table, /verdict: tuning the sender alone does not significantly change throughput .*tuning the receiver alone harms throughput/);
});

test("each end's tuning: the shorthand merged with its role's block (sysctls name by name), its cell's blocks only, a swept MTU over both", () => {
  const job = spec({ tuning: { mtu: 9000, sysctl: { 'net.core.rmem_max': '1000000', 'net.ipv4.tcp_wmem': '4096 16384 262144' }, sender: { sysctl: { 'net.ipv4.tcp_wmem': '4096 16384 1048576' }, txqueuelen: 5000 }, receiver: { mtu: 4000 } } });
  assert.deepEqual(endTuningAt(job, {}, 'sender'), { mtu: 9000, txqueuelen: 5000, sysctl: { 'net.core.rmem_max': '1000000', 'net.ipv4.tcp_wmem': '4096 16384 1048576' } });
  assert.deepEqual(endTuningAt(job, {}, 'receiver'), { mtu: 4000, sysctl: { 'net.core.rmem_max': '1000000', 'net.ipv4.tcp_wmem': '4096 16384 262144' } });
  assert.deepEqual(endTuningAt(job, { tuned: 'receiver' }, 'sender'), { mtu: 9000, sysctl: { 'net.core.rmem_max': '1000000', 'net.ipv4.tcp_wmem': '4096 16384 262144' } }, 'an untuned end gets the shorthand alone');
  assert.equal(endTuningAt(spec(), { tuned: 'none' }, 'sender'), undefined, 'no shorthand: nothing at all');
  assert.deepEqual(endTuningAt(spec({ tuning: TUNING }), { mtu: 1500, tuned: 'sender' }, 'receiver'), { mtu: 1500 });
  // Reverse: the flow's `to` end sends, and gets the sender's block.
  const ends = tunedEnds(spec({ direction: 'reverse' }), { tuned: 'both' });
  assert.deepEqual(ends.map((e) => [e.agent, e.role, Object.keys(e.tuning?.sysctl ?? {})]), [['B', 'sender', ['net.ipv4.tcp_wmem']], ['A', 'receiver', ['net.ipv4.tcp_rmem']]]);
  // Whole hosts only where an end sets sysctls: the receiver's cell takes B alone.
  assert.deepEqual(sysctlHosts(spec(), { tuned: 'receiver' }), ['B']);
  assert.deepEqual(sysctlHosts(spec(), { tuned: 'none' }), []);
});

test('what one host or one interface would need two of at once is refused, naming the block\'s field', () => {
  // bidir: A:eth1 sends one leg and receives the other.
  const bidir = tuningConflicts(spec({ direction: 'bidir', tuning: { sender: { mtu: 9000 }, receiver: { mtu: 1500 } } }), {});
  assert.deepEqual(bidir.map((e) => e.field), ['body.tuning.sender.mtu', 'body.tuning.sender.mtu']);
  assert.match(bidir[0]!.message, /would set mtu of B:eth1 to two values at once: 1500 for B:eth1 as the receiver of flow 0, 9000 for B:eth1 as the sender of flow 0's reverse leg/);
  // B receives from A and sends to C: its sysctls would differ.
  const chain = spec({ flows: [{ from: A, to: B }, { from: B, to: C }] });
  const both = tuningConflicts(chain, { tuned: 'both' });
  assert.equal(both.length, 1);
  assert.equal(both[0]!.field, 'body.tuning.receiver.sysctl.net.ipv4.tcp_rmem');
  assert.match(both[0]!.message, /on agent B at once \(in the factorial's "both" cell\)/);
  // The same sysctls at both roles: one host can hold them, in every cell but the one-end ones.
  const same = { sysctl: { 'net.ipv4.tcp_rmem': '4096 131072 1048576' } };
  const shared = spec({ flows: chain.flows, tuning: { sender: same, receiver: same } });
  assert.deepEqual(tuningConflicts(shared, { tuned: 'both' }), []);
  assert.equal(tuningConflicts(shared, { tuned: 'sender' })[0]!.field, 'body.tuning.sender.sysctl.net.ipv4.tcp_rmem');
  assert.deepEqual(tuningConflicts(spec({ tuning: { mtu: 9000 } }), {}), [], 'the shorthand alone never conflicts');
});

/** An online agent with the builtin engine and one interface, eth1. */
const agent = (id: string, address: string): Agent => ({
  id, hostname: id, labels: {}, online: true, lastSeen: '2026-01-01T00:00:00.000Z', startedAt: '2026-01-01T00:00:00.000Z', version: 'test', kernel: 'test', heartbeatSeconds: 5,
  engines: { builtin: { available: true } },
  interfaces: [{ name: 'eth1', mac: null, mtu: 1500, speedBitsPerSecond: null, operstate: 'up', driver: 'veth', addresses: [{ family: 'IPv4', address, prefixLength: 24 }] }],
});

test('a factorial on two hosts is accepted: 4 cells × repeat runs per sweep point; the same blocks on a chain through one host are not', () => {
  const agents = [agent('A', '198.18.0.1'), agent('B', '198.18.0.2'), agent('C', '198.18.0.3')];
  const job = withDefaults(spec({ repeat: 3, sweep: { streams: [1, 2] } }));
  assert.deepEqual(submissionErrors(job, agents), []);
  assert.deepEqual(campaignOf(job).maxRuns(job), { runs: 24, by: 'points' });
  // B receives from A and sends to C: in the sender's cell B sends tuned and receives untuned.
  const errors = submissionErrors(withDefaults(spec({ repeat: 3, flows: [{ from: A, to: B }, { from: B, to: C }] })), agents);
  assert.ok(errors.length > 0 && errors.every((e) => e.field.startsWith('body.tuning.')), JSON.stringify(errors));
  assert.ok(errors.some((e) => /in the factorial's "sender" cell/.test(e.message)), JSON.stringify(errors));
});

test('two factorial jobs compared cell by cell: only the cell that changed is judged', () => {
  const baseline = factorialJob('a', HARMED);
  const candidate = factorialJob('b', { ...HARMED, both: [80, 81, 79] });
  const comparison = compareJobs(baseline.record, baseline.runs, candidate.record, candidate.runs);
  assert.deepEqual(comparison.points.map((p) => [p.point.tuned, p.verdict]), [['none', 'no significant change'], ['sender', 'no significant change'], ['receiver', 'no significant change'], ['both', 'better']]);
});
