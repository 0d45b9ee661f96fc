import assert from 'node:assert/strict';
import { test } from 'node:test';
import request from 'supertest';
import { syntheticSchedule } from '../helpers/changes.js';
import { stackPerFile, type Stack } from '../helpers/stack.js';
import { waitFor } from '../helpers/processes.js';

let stack: Stack;
const lo = { agent: 'keeper', interface: 'lo' };
// 3 s heartbeats: the agent shares this busy process with the API and the coordinator, and on a loaded machine missed three of 1 s.
stackPerFile({ config: { retentionJobs: 2, retentionDays: 30, resultsRetentionDays: 365, heartbeatSeconds: 3 }, agents: ['keeper'], coordinator: true }, (s) => (stack = s));

async function runJob(labels: Record<string, string>): Promise<string> {
  const res = await request(stack.app).post('/v1/jobs').send({ duration: 0.5, interval: 0.5, labels, flows: [{ from: lo, to: lo }] });
  assert.equal(res.status, 202, JSON.stringify(res.body));
  await waitFor(`job ${res.body.id}`, async () => (await request(stack.app).get(`/v1/jobs/${res.body.id}`)).body.status === 'succeeded', 30_000);
  return res.body.id;
}

test('history: every finished run has a summary, filtered by agent, label and time', async () => {
  const a = await runJob({ kernel: 'stock' });
  const b = await runJob({ kernel: 'patched' });
  const all = (await request(stack.app).get('/v1/results?agent=keeper')).body;
  assert.deepEqual(all.items.map((s: { jobId: string }) => s.jobId), [a, b], 'oldest first');
  assert.equal(all.truncated, false);
  const [summary] = (await request(stack.app).get('/v1/results?label=kernel%3Dpatched')).body.items;
  assert.equal(summary.jobId, b);
  assert.equal(summary.flows[0].src.agent, 'keeper');
  assert.ok(summary.flows[0].bitsPerSecond > 0);
  assert.ok(Buffer.byteLength(JSON.stringify(summary)) < 2048, 'a summary stays under 2 KB');
  assert.deepEqual((await request(stack.app).get('/v1/results?agent=nobody')).body.items, []);
  const future = new Date(Date.now() + 3600_000).toISOString();
  assert.deepEqual((await request(stack.app).get(`/v1/results?from=${future}&to=${future}`)).body.items, []);
  assert.equal((await request(stack.app).get('/v1/results?limit=1')).body.truncated, true);
  assert.equal((await request(stack.app).get(`/v1/results?from=${future}`)).status, 422, 'from after to');
});

test('retention: beyond NICLAB_RETENTION_JOBS the oldest finished jobs go, past NICLAB_RETENTION_DAYS all of them; summaries stay longer', async () => {
  const before = (await request(stack.app).get('/v1/jobs')).body.items.map((j: { id: string }) => j.id);
  const c = await runJob({ kernel: 'third' });
  // Three finished jobs, two kept: the oldest is deleted with its runs.
  assert.deepEqual(await stack.coordinator!.sweepRetention(), { jobs: 1, summaries: 0, changes: 0 });
  const oldest = before.at(-1);
  assert.equal((await request(stack.app).get(`/v1/jobs/${oldest}`)).status, 404);
  assert.equal((await request(stack.app).get(`/v1/jobs/${c}`)).status, 200);
  assert.equal((await request(stack.app).get('/v1/jobs')).body.items.length, 2);
  // 31 days on: every job is past its 30 days; its summaries (365 days) remain.
  assert.deepEqual(await stack.coordinator!.sweepRetention(Date.now() + 31 * 86400_000), { jobs: 2, summaries: 0, changes: 0 });
  assert.deepEqual((await request(stack.app).get('/v1/jobs')).body.items, []);
  assert.equal((await request(stack.app).get('/v1/results?agent=keeper')).body.items.length, 3);
  assert.deepEqual(await stack.coordinator!.sweepRetention(Date.now() + 366 * 86400_000), { jobs: 0, summaries: 3, changes: 0 });
  // Nothing of the deleted jobs is left in Redis but the run summaries' history (now empty) and counters.
  const keys = await stack.services.redis.keys(`${stack.config.prefix}:run*`);
  assert.deepEqual(keys, []);
  assert.deepEqual(await stack.services.redis.keys(`${stack.config.prefix}:history:*`), [], 'the history and its indexes are empty');
});

test('change points are kept as long as run summaries, by when they were found, and their known steps go with them', async () => {
  const fire = syntheticSchedule(stack.services.store, 'retained');
  for (const mbit of [...Array<number>(12).fill(100), ...Array<number>(6).fill(90)]) await fire(mbit, mbit * 125_000);
  const [change] = (await stack.services.changes.query({ since: 0, limit: 10 })).items;
  assert.ok(change, 'the synthetic step is a change point');
  const known = stack.config.prefix + ':changes:known:' + change.id.slice(0, 16);
  assert.equal(await stack.services.redis.hget(known, change.id.slice(17)), change.id);
  assert.equal((await stack.coordinator!.sweepRetention(Date.now() + 364 * 86400_000)).changes, 0, 'found today: kept for 365 days');
  assert.equal((await stack.coordinator!.sweepRetention(Date.now() + 366 * 86400_000)).changes, 1);
  assert.equal(await stack.services.changes.get(change.id), null);
  assert.deepEqual((await stack.services.changes.query({ since: 0, limit: 10 })).items, []);
  assert.equal(await stack.services.redis.hexists(known, change.id.slice(17)), 0);
  // Still counted as found (a counter does not go down), no longer open.
  const families = (await stack.services.metrics.render()).split('\n');
  assert.ok(families.includes('niclab_change_points_total{schedule="retained",figure="bitsPerSecond",verdict="worse"} 1'), families.filter((l) => l.startsWith('niclab_change')).join('\n'));
  assert.deepEqual(families.filter((l) => l.startsWith('niclab_change_points_open{')), []);
});
