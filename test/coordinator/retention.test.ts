import assert from 'node:assert/strict';
import { test } from 'node:test';
import request from 'supertest';
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
  assert.deepEqual(await stack.coordinator!.sweepRetention(), { jobs: 1, summaries: 0 });
  const oldest = before.at(-1);
  assert.equal((await request(stack.app).get(`/v1/jobs/${oldest}`)).status, 404);
  assert.equal((await request(stack.app).get(`/v1/jobs/${c}`)).status, 200);
  assert.equal((await request(stack.app).get('/v1/jobs')).body.items.length, 2);
  // 31 days on: every job is past its 30 days; its summaries (365 days) remain.
  assert.deepEqual(await stack.coordinator!.sweepRetention(Date.now() + 31 * 86400_000), { jobs: 2, summaries: 0 });
  assert.deepEqual((await request(stack.app).get('/v1/jobs')).body.items, []);
  assert.equal((await request(stack.app).get('/v1/results?agent=keeper')).body.items.length, 3);
  assert.deepEqual(await stack.coordinator!.sweepRetention(Date.now() + 366 * 86400_000), { jobs: 0, summaries: 3 });
  // Nothing of the deleted jobs is left in Redis but the run summaries' history (now empty) and counters.
  const keys = await stack.services.redis.keys(`${stack.config.prefix}:run*`);
  assert.deepEqual(keys, []);
  assert.deepEqual(await stack.services.redis.keys(`${stack.config.prefix}:history:*`), [], 'the history and its indexes are empty');
});
