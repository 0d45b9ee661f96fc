import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import request from 'supertest';
import { CHANGE_DEFAULTS, steps } from '@niclab/shared/domain/changes/detect';
import { ConfigError, loadConfig } from '@niclab/shared/runtime/config';
import { jobStore } from '@niclab/shared/stores/job-queue';
import { Keys } from '@niclab/shared/stores/keys';
import { syntheticSchedule, syntheticSearchSchedule } from '../helpers/changes.js';
import { seededRandom } from '../helpers/random.js';
import { uniquePrefix } from '../helpers/redis.js';
import { asText, chartTitle, markItems, markPositions, parseSvg } from '../helpers/svg.js';
import { stackPerFile, type Stack } from '../helpers/stack.js';

/**
 * Change points through the real stores and the API (issue 29): a schedule's runs saved as the
 * coordinator saves them (JobStore.saveRun, whose observers find the steps), on a private Redis.
 * The series is synthetic, so its step is known: 15 runs at 100 Mbit/s, then 90 with the
 * sender's tbf rate 10% lower, then 80.
 */
let stack: Stack;
stackPerFile({}, (s) => {
  stack = s;
  fire = syntheticSchedule(s.services.store, 'nightly');
});

let fire: ReturnType<typeof syntheticSchedule>;

type Change = { id: string; series: { figure: string; goal?: unknown }; before: { runId: string; finishedAt: string; mean: number }; after: { runId: string; finishedAt: string; mean: number }; relative: number; relativeInterval: [number, number]; verdict: string; unit: string; changed: { end: string; field: string; before: unknown; after: unknown }[]; acknowledged: unknown };
const changes = async (query = 'schedule=nightly') => (await request(stack.app).get(`/v1/changes?${query}`).expect(200)).body as { items: Change[]; next: string | null };
const metric = async (name: string) =>
  (await stack.services.metrics.render()).split('\n').filter((l) => l.startsWith(`${name}{`)).map((l) => l.replace(/^[^{]+/, ''));

test('a 10% step in a schedule\'s throughput: one change point between the right runs, naming the tbf rate; acknowledged, it is not raised again', async () => {
  const runs: string[] = [];
  // One run before the step, the receive buffers changed too: what changed is read between the
  // runs on either side of the step, so that change is not blamed.
  const rmem = (i: number) => ({ differs: i >= 14 ? { tcpRmem: '4096 262144 6291456' } : {} });
  for (let i = 0; i < 15; i++) runs.push(await fire(100, 12_500_000, rmem(i)));
  // A failed run extends no series: its figure is no level of the link's.
  await fire(1, 12_500_000, { status: 'failed', ...rmem(15) });
  assert.deepEqual((await changes()).items, [], 'no step yet');
  for (let i = 0; i < 15; i++) runs.push(await fire(90, 11_250_000, rmem(15)));

  const { items, next } = await changes();
  assert.equal(items.length, 1, JSON.stringify(items, null, 1));
  assert.equal(next, null);
  const [change] = items as [Change];
  // Between runs 15 and 16 (0-based 14 and 15), ±1.
  assert.ok(Math.abs(runs.indexOf(change.after.runId) - 15) <= 1 && runs.indexOf(change.before.runId) === runs.indexOf(change.after.runId) - 1, `between ${runs.indexOf(change.before.runId)} and ${runs.indexOf(change.after.runId)}`);
  assert.ok(Math.abs(change.relative + 0.1) <= 0.03, `step ${change.relative}`);
  assert.ok(change.relativeInterval[0] <= -0.1 && -0.1 <= change.relativeInterval[1], `interval ${change.relativeInterval}`);
  assert.equal(change.verdict, 'worse');
  assert.equal(change.unit, 'bits/s');
  assert.deepEqual(change.changed.map((c) => [c.end, c.field, c.before, c.after]), [
    ['sender', 'qdiscs.8001:.options.rate', 12_500_000, 11_250_000],
    ['receiver', 'qdiscs.8001:.options.rate', 12_500_000, 11_250_000],
  ]);
  const labels = '{schedule="nightly",figure="bitsPerSecond",verdict="worse"}';
  assert.deepEqual(await metric('niclab_change_points_open'), [`${labels} 1`]);
  assert.deepEqual(await metric('niclab_change_points_total'), [`${labels} 1`]);

  const acked = await request(stack.app).post(`/v1/changes/${change.id}/acknowledge`).send({ as: 'expected', note: 'the lab shaped A to 90 Mbit/s' }).expect(200);
  assert.deepEqual({ as: acked.body.acknowledged.as, note: acked.body.acknowledged.note, by: acked.body.acknowledged.by }, { as: 'expected', note: 'the lab shaped A to 90 Mbit/s', by: 'anonymous' });
  assert.deepEqual(await metric('niclab_change_points_open'), [], 'an acknowledged change point is no longer open: its alert clears');
  assert.deepEqual(await metric('niclab_change_points_total'), [`${labels} 1`]);

  // More runs at the new level: the same step, found again, is not raised again.
  for (let i = 0; i < 10; i++) await fire(90, 11_250_000, rmem(15));
  assert.deepEqual((await changes()).items.map((c) => c.id), [change.id]);
  assert.notEqual((await changes()).items[0]!.acknowledged, null);

  // A later step on top of it is a new change point, open.
  for (let i = 0; i < 8; i++) await fire(80, 10_000_000, rmem(15));
  const after = (await changes()).items;
  assert.equal(after.length, 2, JSON.stringify(after.map((c) => [c.before.mean, c.after.mean])));
  assert.ok(Math.abs(after[1]!.relative + 0.111) <= 0.03, `second step ${after[1]!.relative}`);
  assert.deepEqual(await metric('niclab_change_points_open'), [`${labels} 1`]);
  assert.deepEqual(await metric('niclab_change_points_total'), [`${labels} 2`]);

  // Paged by cursor: the first page's next gives the second, and the last says null.
  const first = await changes('schedule=nightly&limit=1');
  assert.deepEqual([first.items.map((c) => c.id), first.next], [[change.id], change.id]);
  const second = await changes(`schedule=nightly&limit=1&cursor=${first.next}`);
  assert.deepEqual([second.items.map((c) => c.id), second.next], [[after[1]!.id], null]);
  // Filters: another figure, another agent, another schedule have none.
  assert.deepEqual((await changes('figure=rttP50Seconds')).items, []);
  assert.equal((await changes('agent=B&interface=eth1')).items.length, 2);
  assert.deepEqual((await changes('agent=C')).items, []);
});

/** A change point's figure as the API draws it (supertest keeps an image's body as bytes). */
async function svgOf(id: string): Promise<string> {
  const res = await asText(request(stack.app).get(`/v1/changes/${id}?format=svg`));
  assert.equal(res.status, 200, String(res.body));
  assert.match(res.headers['content-type'] ?? '', /^image\/svg\+xml/);
  return res.body as string;
}

test("one change point with its series: each run's value as /v1/results has it, and the SVG draws them with the two means and the step between the right runs", async () => {
  const [first, second] = (await changes()).items as [Change, Change];
  const detail = (await request(stack.app).get(`/v1/changes/${first.id}`).expect(200)).body as { change: Change; points: { runId: string; finishedAt: string; value: number }[] };
  assert.deepEqual(detail.change, first);
  // The series' runs, against the history's own summary of each (a failed run has no point).
  const results = (await request(stack.app).get('/v1/results?schedule=nightly&from=2026-11-01T00:00:00Z').expect(200)).body.items as { runId: string; status: string; flows: { bitsPerSecond: number }[] }[];
  const succeeded = results.filter((r) => r.status === 'succeeded');
  assert.equal(succeeded.length, 48, 'the first test saved 15 + 15 + 10 + 8 runs that succeeded');
  assert.deepEqual(detail.points.map((p) => [p.runId, p.value]), succeeded.map((r) => [r.runId, r.flows[0]!.bitsPerSecond]));

  const svg = parseSvg(await svgOf(first.id));
  const runs = markPositions(svg, 'runs', 'symbol');
  assert.equal(runs.length, 48);
  const means = markItems(svg, 'means', 'rule').map((m) => Number(m.mean));
  assert.deepEqual(means.map((m) => m.toFixed(3)), [first.before.mean, first.after.mean].map((m) => (m / 1e6).toFixed(3)));
  const [step] = markPositions(svg, 'step', 'rule');
  const x = (runId: string) => runs[detail.points.findIndex((p) => p.runId === runId)]!.x;
  assert.ok(x(first.before.runId) < step!.x && step!.x < x(first.after.runId), `the step at ${step!.x}, between the runs at ${x(first.before.runId)} and ${x(first.after.runId)}`);
  assert.match(chartTitle(svg).text, /^throughput −10\.\d% \[.*\] \(worse\): A:eth1 -> B:eth1$/);
  assert.match(chartTitle(svg).subtitle, /changed: sender A:eth1 qdiscs\.8001:\.options\.rate 12500000 → 11250000/);
  // The second step's own segments: its means are its own.
  const later = markItems(parseSvg(await svgOf(second.id)), 'means', 'rule').map((m) => Number(m.mean).toFixed(3));
  assert.deepEqual(later, [second.before.mean, second.after.mean].map((m) => (m / 1e6).toFixed(3)));
  await request(stack.app).get(`/v1/changes/${'0'.repeat(16)}-${randomUUID()}`).expect(404);

  // A comparison of two runs of the schedule says whether it spans the step: the runs just
  // before and after it do, two runs before it or two after it do not.
  const job = (runId: string) => fire.jobs.get(runId)!;
  const between = async (a: string, b: string) => (await request(stack.app).get(`/v1/compare?baseline=${job(a)}&candidate=${job(b)}`).expect(200)).body.changesBetween.map((c: Change) => c.id);
  const at = detail.points.findIndex((p) => p.runId === first.after.runId);
  const run = (i: number) => detail.points[i]!.runId;
  assert.deepEqual(await between(run(at - 1), run(at)), [first.id]);
  assert.deepEqual(await between(run(at + 3), run(at - 4)), [first.id], 'either order');
  assert.deepEqual(await between(run(0), run(at - 1)), []);
  assert.deepEqual(await between(run(at), run(at + 5)), []);
  const table = (await request(stack.app).get(`/v1/compare?baseline=${job(run(at - 1))}&candidate=${job(run(at))}&format=table`).expect(200)).text;
  assert.match(table, new RegExp(`between them: a change point in schedule nightly's bitsPerSecond on A:eth1 -> B:eth1, -10\\.\\d% \\(worse\\) after the run of ${first.after.finishedAt}, acknowledged expected \\(${first.id}\\)`));
});

test('the detection options are the configuration\'s: a minStep of 15% raises no 10% step, and a bad value is refused by name', async () => {
  const config = loadConfig({ NICLAB_CHANGE_MIN_STEP: '0.15', NICLAB_CHANGE_MIN_SEGMENT: '6' });
  assert.deepEqual(config.changes, { ...CHANGE_DEFAULTS, minStep: 0.15, minSegment: 6 });
  assert.deepEqual(loadConfig({}).changes, CHANGE_DEFAULTS);
  assert.throws(() => loadConfig({ NICLAB_CHANGE_MIN_SEGMENT: '2.5' }), (e: Error) => e instanceof ConfigError && /NICLAB_CHANGE_MIN_SEGMENT.*whole number/.test(e.message));
  assert.throws(() => loadConfig({ NICLAB_CHANGE_MAX_P: '2' }), (e: Error) => e instanceof ConfigError && /NICLAB_CHANGE_MAX_P/.test(e.message));
  // The same series through a store at those options, and one at the defaults, side by side.
  const [strict, usual] = [config.changes, CHANGE_DEFAULTS].map((options) => jobStore(stack.services.redis, new Keys(uniquePrefix()), options));
  const [fireStrict, fireUsual] = [strict!, usual!].map((s) => syntheticSchedule(s.store, 'configured', 3));
  for (const mbit of [...Array<number>(12).fill(100), ...Array<number>(8).fill(90)]) {
    await fireStrict!(mbit, 12_500_000);
    await fireUsual!(mbit, 12_500_000);
  }
  assert.equal((await usual!.changes.query({ since: 0, limit: 10 })).items.length, 1);
  assert.deepEqual((await strict!.changes.query({ since: 0, limit: 10 })).items, []);
});

test("a schedule's rate search: its rate found per firing is the series, not its trials; a 10% lower capacity is one change point naming the shaper", async () => {
  const fireSearch = syntheticSearchSchedule(stack.services.store, 'search-nightly');
  for (let i = 0; i < 12; i++) await fireSearch(40_000 + (i % 3) * 20);
  for (let i = 0; i < 6; i++) await fireSearch(36_000 + (i % 3) * 20);
  const { items } = await changes('schedule=search-nightly');
  assert.deepEqual(items.map((c) => [c.series.figure, c.series.goal, c.verdict, c.unit]), [['searchPacketsPerSecond', { algorithm: 'binary', lossRatio: 0, exceedRatio: null }, 'worse', 'datagrams/s']], JSON.stringify(items, null, 1));
  const [change] = items as [Change];
  // The rates found, against the capacities: the search's 1% resolution below each.
  assert.ok(change.before.mean <= 40_040 && change.before.mean >= 40_000 * 0.98, `before ${change.before.mean}`);
  assert.ok(change.after.mean <= 36_040 && change.after.mean >= 36_000 * 0.98, `after ${change.after.mean}`);
  assert.ok(Math.abs(change.relative + 0.1) < 0.02, `step ${change.relative}`);
  assert.deepEqual(change.changed.filter((c) => c.end === 'sender').map((c) => c.field), ['qdiscs.8001:.options.rate']);
  // One point a firing: 18, whatever the trials.
  assert.equal((await request(stack.app).get(`/v1/changes/${change.id}`).expect(200)).body.points.length, 18);
  assert.match(chartTitle(parseSvg(await svgOf(change.id))).subtitle, /schedule search-nightly, binary loss 0, flow 0/);
});

test('a step whose run moves as more runs come in (15, then 16, then 15) is one change point, not three', async () => {
  // A 5% step under 2% noise whose first detections put it one run late (seed 9 of a scan).
  const r = seededRandom(9);
  const z = () => Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
  const values = Array.from({ length: 40 }, (_, i) => (i < 15 ? 100 : 95) * (1 + 0.02 * z()));
  const moved = values.map((_, n) => steps(values.slice(0, n + 1))[0]?.index ?? -1).filter((i) => i >= 0);
  assert.ok(new Set(moved).size > 1, `the step must move for this test to mean anything: ${moved}`);
  const fireMoving = syntheticSchedule(stack.services.store, 'moving');
  for (const value of values) await fireMoving(value, 12_500_000, { exact: true });
  const { items } = await changes('schedule=moving');
  assert.equal(items.length, 1, `steps at ${[...new Set(moved)]}: ${JSON.stringify(items.map((c) => c.after.runId))}`);
});

test('bad input: an unknown cursor, an unknown change point, an acknowledgement without its kind', async () => {
  const id = `${'0'.repeat(16)}-${randomUUID()}`;
  const cursor = await request(stack.app).get(`/v1/changes?cursor=${id}`).expect(422);
  assert.equal(cursor.type, 'application/problem+json');
  assert.ok(cursor.body.errors.some((e: { field: string }) => e.field === 'query.cursor'), JSON.stringify(cursor.body));
  await request(stack.app).post(`/v1/changes/${id}/acknowledge`).send({ as: 'expected' }).expect(404);
  const kind = await request(stack.app).post(`/v1/changes/${id}/acknowledge`).send({ as: 'fine' }).expect(422);
  assert.ok(kind.body.errors.some((e: { field: string }) => e.field === 'body.as'), JSON.stringify(kind.body));
  await request(stack.app).get('/v1/changes?figure=retransmits').expect(422);
});
