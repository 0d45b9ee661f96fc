import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import request from 'supertest';
import { AgentService } from '@niclab/agent/agent';
import type { Job, Run } from '@niclab/shared/domain/contract';
import { assertResponse } from '../helpers/contract.js';
import { asText, axisLabels, markItems, parseSvg } from '../helpers/svg.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { silentLog, startStack, testConfig, type Stack, type TestConfig } from '../helpers/stack.js';

/**
 * Groups of flows through the API, a coordinator and in-process agents on loopback: the
 * preview, a mesh job's runs (one pair each, rounds in parallel, never two runs on one
 * interface at once), its matrix, and a schedule that expands its group at each firing.
 * Every agent's `lo` is the same kernel interface here; the lab's test puts each on its own.
 */

let redis: TestRedis;
let stack: Stack;
let config: TestConfig;
const agents = new Map<string, AgentService>();

async function startAgent(id: string, rack: string): Promise<void> {
  const agent = new AgentService({ ...config, agentId: id, agentLabels: { rack } }, silentLog);
  await agent.start();
  agents.set(id, agent);
}

async function stopAgent(id: string): Promise<void> {
  await agents.get(id)?.stop();
  agents.delete(id);
}

before(async () => {
  redis = await startTestRedis();
  // Generous setup: the machine is shared, and a loaded one starts receivers slowly.
  config = testConfig(redis.url, { setupSeconds: 10 });
  stack = await startStack(config, { coordinator: true });
  stack.services.schedules.start(silentLog);
  for (const id of ['a1', 'a2', 'a3', 'a4']) await startAgent(id, 'a');
  await startAgent('b1', 'b');
});
after(async () => {
  for (const id of [...agents.keys()]) await stopAgent(id);
  await stack?.close();
  await redis?.stop();
});

const mesh = (rack: string) => ({ shape: 'mesh', members: { labels: { rack }, interface: 'lo' } });
const spec = (extra: Record<string, unknown> = {}) => ({ engine: 'builtin', protocol: 'tcp', duration: 0.5, flows: mesh('a'), ...extra });
const post = (path: string, body: unknown) => request(stack.app).post(path).set('content-type', 'application/json').send(JSON.stringify(body));

async function finished(id: string, timeoutMs = 60_000): Promise<Job & { runs: Run[] }> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const job = (await request(stack.app).get(`/v1/jobs/${id}`)).body as Job & { runs: Run[] };
    if (['succeeded', 'failed', 'canceled'].includes(job.status)) return job;
    assert.ok(Date.now() < deadline, `job ${id} still ${job.status}`);
    await sleep(200);
  }
}

const ends = (run: Run) => run.flows.flatMap((f) => [`${f.from.agent}:${f.from.interface}`, `${f.to.agent}:${f.to.interface}`]);
const overlap = (x: Run, y: Run) => Date.parse(x.startedAt!) < Date.parse(y.finishedAt!) && Date.parse(y.startedAt!) < Date.parse(x.finishedAt!);

describe('groups', () => {
  test('the preview shows the pairs, rounds and skipped members of a group now, and runs nothing', async () => {
    const res = await post('/v1/groups/preview', mesh('a'));
    assertResponse('previewGroup', res);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.equal(res.body.pairs.length, 12);
    assert.equal(res.body.rounds.length, 6, 'a mesh of 4: 2(N-1) rounds');
    assert.deepEqual(res.body.skipped, []);
    const disjoint = await post('/v1/groups/preview', { shape: 'disjoint', a: { labels: { rack: 'a' }, interface: 'lo' }, b: { labels: { rack: 'b' }, interface: 'eth99' } });
    assert.equal(disjoint.body.pairs.length, 0);
    assert.deepEqual(disjoint.body.skipped.map((s: { agent: string; reason: string }) => `${s.agent} ${s.reason}`), ['b1 no_interface']);
    const bad = await post('/v1/groups/preview', { shape: 'disjoint', members: { labels: {}, interface: 'lo' } });
    assert.equal(bad.status, 422);
    assert.deepEqual(bad.body.errors.map((e: { field: string }) => e.field).sort(), ['body.a', 'body.b', 'body.members']);
    assert.deepEqual((await request(stack.app).get('/v1/jobs')).body.items, [], 'no job');
  });

  test('a mesh job runs each pair once, its rounds in parallel, never two runs on one interface at once; its report is the matrix', async () => {
    const res = await post('/v1/jobs', spec());
    assertResponse('createJob', res);
    assert.equal(res.status, 202, JSON.stringify(res.body));
    assert.equal(res.body.spec.flows.length, 12);
    assert.equal(res.body.spec.group.shape, 'mesh');
    assert.equal(res.body.progress.runsTotal, 12);
    assert.equal(res.body.expansion.rounds.length, 6);
    const job = await finished(res.body.id);
    assert.deepEqual(job.pairs?.failures, [], 'every pair measured');
    assert.equal(job.status, 'succeeded', JSON.stringify(job.runs.map((r) => [r.index, r.startedAt, r.finishedAt, r.flows[0]?.from.agent, r.flows[0]?.to.agent, r.error?.message])));
    const pairs = job.runs.map((r) => `${r.flows[0]!.from.agent}>${r.flows[0]!.to.agent}`);
    assert.equal(new Set(pairs).size, 12, `every pair once: ${pairs.join(' ')}`);
    assert.ok(job.runs.every((r) => r.flows.length === 1), 'one flow per run');
    let parallel = 0;
    for (const [i, x] of job.runs.entries()) {
      for (const y of job.runs.slice(i + 1)) {
        if (!overlap(x, y)) continue;
        parallel++;
        const shared = ends(x).filter((e) => ends(y).includes(e));
        assert.deepEqual(shared, [], `runs ${x.index} and ${y.index} overlap on ${shared.join(', ')}`);
      }
    }
    assert.ok(parallel >= 6, `the runs of each round go together (${parallel} overlapping pairs of runs)`);
    const report = await request(stack.app).get(`/v1/jobs/${job.id}/report`);
    assertResponse('getReport', report);
    const [matrix] = report.body.matrix;
    assert.deepEqual(matrix.sources.map((e: { agent: string }) => e.agent), ['a1', 'a2', 'a3', 'a4']);
    matrix.cells.forEach((row: ({ verdict: string; value: { mean: number } } | null)[], i: number) =>
      row.forEach((cell, j) => (i === j ? assert.equal(cell, null) : assert.ok(cell!.value.mean > 0 && cell!.verdict !== 'failed'))),
    );
    const table = await request(stack.app).get(`/v1/jobs/${job.id}/report?format=table`);
    assert.match(table.text, /mesh matrix: 12 pairs in 6 rounds/);
    // Each cell: the figure, then the bottleneck its run gave ('3187.36 [none]').
    assert.match(table.text, /^a4:lo\s+([\d.?]+(?: \[[a-zA-Z ]+\])?\s+){3}-$/m);
    // Each run's flow names its pair in the job's flows (a run measures spec.flows[pair], not flow 0).
    for (const run of job.runs) {
      const flow = run.flows[0]!;
      const pair = job.spec.flows[flow.flowIndex]!;
      assert.deepEqual([pair.from, pair.to], [flow.from, flow.to], `run ${run.index}'s flowIndex ${flow.flowIndex} is its pair`);
    }
    // The figure is the matrix: a cell per measured pair at the report's mean.
    const svg = await asText(request(stack.app).get(`/v1/jobs/${job.id}/report?format=svg`));
    assert.equal(svg.status, 200, String(svg.body));
    const cells = markItems(parseSvg(svg.body as string), 'cells', 'rect');
    assert.equal(cells.length, 12, JSON.stringify(cells));
    const label = (e: { agent: string; interface: string }) => `${e.agent}:${e.interface}`;
    // Columns and rows in the matrix's order, so a mesh's empty cells are the diagonal.
    assert.deepEqual(axisLabels(parseSvg(svg.body as string)), [matrix.destinations.map(label), matrix.sources.map(label)]);
    for (const [i, row] of matrix.cells.entries()) {
      for (const [j, cell] of (row as ({ value: { mean: number } } | null)[]).entries()) {
        if (!cell) continue;
        const drawn = cells.find((c) => c.source === label(matrix.sources[i]) && c.destination === label(matrix.destinations[j]));
        assert.ok(drawn, `a cell for ${label(matrix.sources[i])} -> ${label(matrix.destinations[j])} in ${JSON.stringify(cells[0])}`);
        assert.ok(Math.abs(Number(drawn['throughput (Mbit/s)']) - cell.value.mean / 1e6) < 0.001 * (cell.value.mean / 1e6), `${JSON.stringify(drawn)} vs ${cell.value.mean} bit/s`);
      }
    }
    // A group's pairs are different links: no A/B figure between group jobs.
    const compared = await request(stack.app).get(`/v1/compare?baseline=${job.id}&candidate=${job.id}`);
    assert.equal(compared.status, 422);
    assert.deepEqual(compared.body.errors.map((e: { field: string }) => e.field), ['query.baseline', 'query.candidate']);
  });

  test('a pair that fails does not fail the job: the job succeeds with the failed pair listed and why, its matrix cell and heatmap cell say so', async () => {
    await startAgent('c1', 'c');
    // An agent that is registered and online, but nothing takes its tasks: its runs end at their deadline.
    const { agents: registry } = stack.services;
    const ghost = { ...(await registry.get('c1'))!, id: 'ghost' };
    const beat = () => void registry.heartbeat({ ...ghost, online: undefined, lastSeen: undefined } as never).catch(() => undefined);
    beat();
    const timer = setInterval(beat, 500);
    try {
      const star = { shape: 'star', starDirection: 'to', center: { labels: { rack: 'b' }, interface: 'lo' }, members: { labels: { rack: 'c' }, interface: 'lo' } };
      const submitted = await post('/v1/jobs', spec({ flows: star }));
      assert.equal(submitted.status, 202, JSON.stringify(submitted.body));
      const job = await finished(submitted.body.id, 90_000);
      assertResponse('getJob', await request(stack.app).get(`/v1/jobs/${job.id}`));
      assert.equal(job.status, 'succeeded', JSON.stringify(job.error));
      assert.equal(job.error, null);
      assert.deepEqual({ ...job.pairs, failures: undefined }, { total: 2, measured: 1, failed: 1, failures: undefined });
      const [failure] = job.pairs!.failures;
      assert.equal(failure!.from.agent, 'ghost');
      assert.ok(failure!.error.code && failure!.error.message, JSON.stringify(failure));
      const report = await request(stack.app).get(`/v1/jobs/${job.id}/report`);
      assertResponse('getReport', report);
      const [matrix] = report.body.matrix;
      const row = matrix.sources.findIndex((e: { agent: string }) => e.agent === 'ghost');
      assert.equal(matrix.cells[row][0].verdict, 'failed');
      assert.equal(matrix.cells[row][0].error.code, failure!.error.code);
      assert.ok(matrix.cells[1 - row][0].value.mean > 0, 'the other pair keeps its figure');
      const table = await request(stack.app).get(`/v1/jobs/${job.id}/report?format=table`);
      assert.match(table.text, new RegExp(`ghost:lo\\s+FAILED ${failure!.error.code}`));
      assert.match(table.text, /pairs measured: 1 of 2; 1 failed/);
      const svg = await asText(request(stack.app).get(`/v1/jobs/${job.id}/report?format=svg`));
      const drawn = parseSvg(svg.body as string);
      const failed = markItems(drawn, 'failures', 'rect');
      assert.equal(failed.length, 1, JSON.stringify(failed));
      assert.equal(failed[0]!.source, 'ghost:lo');
      assert.match(failed[0]!.error!, new RegExp(`^${failure!.error.code}: `));
      assert.equal(markItems(drawn, 'cells', 'rect').length, 1);
    } finally {
      clearInterval(timer);
      await registry.deregister({ ...ghost } as never);
      await stopAgent('c1');
    }
  });

  test('a schedule expands its group at each firing: a host that joins is in the next one, a stopped member is skipped and the rest run', async () => {
    await stopAgent('a4');
    await stopAgent('a3');
    const created = await post('/v1/schedules', { name: 'rack-a', everySeconds: 3, spec: spec() });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.spec.flows.shape, 'mesh', 'the schedule keeps the group, not its pairs');
    const jobsOf = async () => ((await request(stack.app).get('/v1/jobs')).body.items as Job[]).filter((j) => j.spec.labels?.schedule === 'rack-a').reverse();
    const firing = async (n: number) => {
      const deadline = Date.now() + 30_000;
      for (;;) {
        const jobs = await jobsOf();
        if (jobs[n]) return finished(jobs[n]!.id);
        assert.ok(Date.now() < deadline, `no firing ${n + 1}`);
        await sleep(200);
      }
    };
    const first = await firing(0);
    assert.equal(first.spec.flows.length, 2, 'a1 and a2');
    // A stopped agent stays registered, offline: its label still names it, so it is reported.
    assert.deepEqual(first.expansion!.skipped.map((s) => `${s.agent} ${s.reason}`), ['a3 offline', 'a4 offline']);
    await startAgent('a3', 'a');
    // The firing after the one under way when a3 joined.
    const second = await firing(2);
    assert.equal(second.spec.flows.length, 6, 'a3 joined');
    assert.equal(second.status, 'succeeded');
    await stopAgent('a2');
    const third = await firing(4);
    assert.equal(third.status, 'succeeded', JSON.stringify(third.error));
    assert.equal(third.spec.flows.length, 2, 'a1 and a3');
    assert.deepEqual(third.expansion!.skipped.map((s) => `${s.agent} ${s.reason}`), ['a2 offline', 'a4 offline']);
    assert.equal((await request(stack.app).delete('/v1/schedules/rack-a')).status, 204);
  });
});
