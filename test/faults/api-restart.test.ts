import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import { ApiClient } from '../helpers/api-client.js';
import { spawnNiclab, waitFor, type NiclabProcess, waitForApi } from '../helpers/processes.js';
import { freePort, startTestRedis, uniquePrefix, type TestRedis } from '../helpers/redis.js';

let redis: TestRedis;
let agent: NiclabProcess;
let env: Record<string, string>;
let client: ApiClient;
/** API processes a failed test would otherwise leave running (and the runner waiting for them). */
const apis: NiclabProcess[] = [];

before(async () => {
  redis = await startTestRedis();
  const port = await freePort();
  env = { REDIS_URL: redis.url, NICLAB_PREFIX: uniquePrefix(), NICLAB_PORT: String(port), NICLAB_HEARTBEAT_SECONDS: '1', NICLAB_SETUP_SECONDS: '4' };
  agent = spawnNiclab(['agent', '--id', 'r'], env);
  client = new ApiClient(`http://127.0.0.1:${port}`);
});

after(async () => {
  await Promise.all(apis.map((api) => api.stop()));
  await agent?.stop();
  await redis?.stop();
});

test('restarting the API (and its coordinator) mid-campaign loses nothing: the job finishes every run', async () => {
  const first = spawnNiclab(['api'], env);
  apis.push(first);
  await waitForApi(client.base);
  await waitFor('agent r', async () => (await client.call('getAgent', 'GET', '/v1/agents/r')).body.online);
  const submitted = await client.submit({ engine: 'builtin', duration: 1.5, repeat: 4, flows: [{ from: { agent: 'r', interface: 'lo' }, to: { agent: 'r', interface: 'lo' } }] });
  const id = submitted.body.id;
  await waitFor('the first run to finish', async () => (await client.job(id)).body.progress.runsDone >= 1, 20_000, 50);
  // Runs finished before the restart are kept as they are, not made again (README: the job
  // resumes where it was).
  const finishedBefore = (await client.job(id)).body.runs.filter((r: { status: string }) => r.status === 'succeeded');
  assert.ok(finishedBefore.length >= 1);
  assert.equal(await first.stop('SIGTERM'), 0, first.output());

  const second = spawnNiclab(['api'], env);
  try {
    await waitForApi(client.base, 'the API again');
    const { job } = await client.finish(id, 60_000);
    assert.equal(job.status, 'succeeded', JSON.stringify(job.error));
    assert.deepEqual(job.progress, { runsDone: 4, runsTotal: 4 });
    assert.equal(job.runs.length, 4);
    assert.ok(job.runs.every((r: { status: string }) => r.status === 'succeeded'), JSON.stringify(job.runs.map((r: { status: string; error: unknown }) => [r.status, r.error])));
    for (const run of finishedBefore) assert.deepEqual(job.runs[run.index], run, `run ${run.index}, finished before the restart, is kept as it was`);

    // A replica on the same Redis answers the same job and list (metrics: test/e2e/loopback).
    const replicaPort = await freePort();
    const replica = spawnNiclab(['api', '--no-coordinator'], { ...env, NICLAB_PORT: String(replicaPort) });
    try {
      const other = new ApiClient(`http://127.0.0.1:${replicaPort}`);
      await waitForApi(other.base, 'the replica');
      assert.deepEqual((await other.job(id)).body, (await client.job(id)).body);
      assert.deepEqual((await other.call('listJobs', 'GET', '/v1/jobs')).body, (await client.call('listJobs', 'GET', '/v1/jobs')).body);
    } finally {
      await replica.stop();
    }
  } finally {
    await second.stop();
  }
});

test("`niclab run --wait` follows its job through an API restart: the run that ended while the API was down is reported too, each once", async () => {
  // A coordinator of its own, so runs go on while the API is down; the CLI reconnects with
  // Last-Event-ID and the API resends what it missed from the job's backlog in Redis.
  const coordinator = spawnNiclab(['coordinator'], env);
  const first = spawnNiclab(['api', '--no-coordinator'], env);
  apis.push(coordinator, first);
  const listener = new Redis(redis.url);
  try {
    await waitForApi(client.base);
    await waitFor('agent r', async () => (await client.call('getAgent', 'GET', '/v1/agents/r')).body.online);
    const RUNS = 6;
    const cli = spawnNiclab(['run', '--from', 'r:lo', '--to', 'r:lo', '-t', '1', '--repeat', String(RUNS), '--wait'], { NICLAB_API: client.base });
    apis.push(cli);
    const jobId = (await waitFor('the job submitted', () => /^job ([0-9a-f-]{36}):/m.exec(cli.output())?.[1], 20_000, 50))!;
    await waitFor('the CLI to report run 1', () => /^run 1\//m.test(cli.output()), 20_000, 50);

    // The runs ended while no API was there, heard on the job's channel itself.
    const endedWhileDown: number[] = [];
    let down = false;
    listener.on('pmessage', (_p: string, _c: string, text: string) => {
      const event = JSON.parse(text.slice(text.indexOf(' ') + 1)) as { type: string; run?: { index: number } };
      if (down && event.type === 'run') endedWhileDown.push(event.run!.index);
    });
    await listener.psubscribe(`${env.NICLAB_PREFIX}:events:${jobId}`);
    assert.equal(await first.stop('SIGTERM'), 0, first.output());
    down = true;
    await waitFor('a run to end while the API is down', () => endedWhileDown.length > 0, 20_000, 20);
    down = false;
    const second = spawnNiclab(['api', '--no-coordinator'], env);
    apis.push(second);
    await waitForApi(client.base, 'the API again');

    assert.equal(await cli.exited, 0, cli.output());
    const reported = [...cli.output().matchAll(/^run (\d+)\/(\d+) (\w+)/gm)].map((m) => [Number(m[1]), Number(m[2]), m[3]]);
    assert.deepEqual(reported, Array.from({ length: RUNS }, (_, i) => [i + 1, RUNS, 'succeeded']), `every run once, in order (ended while the API was down: ${endedWhileDown.map((i) => i + 1).join(', ')})\n${cli.output()}`);
  } finally {
    listener.disconnect();
  }
});
