import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import request from 'supertest';
import { Coordinator } from '@niclab/coordinator/coordinator';
import { createRedis } from '@niclab/shared/runtime/redis';
import { startStack, silentLog, testConfig, type Stack } from '../helpers/stack.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { waitFor } from '../helpers/processes.js';

// Issue 31: with NICLAB_REDIS_WAIT_REPLICAS an acknowledged write is on a replica before it is
// acknowledged. A real master and a real replica (REPLICAOF); the replica is frozen (SIGSTOP)
// to make WAIT come back short, as a replica cut off by a failover would.
let master: TestRedis;
let replica: TestRedis;
let stack: Stack;
/** Started by the test; stopped after it however it ends (a coordinator left running keeps the file from exiting). */
let coordinator: Coordinator | undefined;
const lo = { agent: 'wait-a', interface: 'lo' };
const job = { engine: 'builtin', duration: 0.5, interval: 0.5, flows: [{ from: lo, to: lo }] };
const post = (path: string, body: unknown) => request(stack.app).post(path).set('content-type', 'application/json').send(JSON.stringify(body));

before(async () => {
  [master, replica] = await Promise.all([startTestRedis(), startTestRedis()]);
  const client = createRedis(replica.url);
  await client.replicaof('127.0.0.1', new URL(master.tcpUrl).port);
  await waitFor('the replica to follow the master', async () => /master_link_status:up/.test(await client.info('replication')), 10_000, 50);
  client.disconnect();
  // The API and one agent; coordinators are started by the tests.
  stack = await startStack(testConfig(master.url, { redisWaitReplicas: 1, redisWaitMs: 300 }), { agents: [lo.agent] });
});

after(async () => {
  if (replica) process.kill(replica.pid, 'SIGCONT');
  await coordinator?.stop();
  await stack?.close();
  await Promise.all([replica?.stop(), master?.stop()]);
});

test('a 202 and a 201 wait for the replica; frozen, the API answers 503 with Retry-After, and a lease granted meanwhile is let go: the job runs only once the replica confirms', async () => {
  const accepted = await post('/v1/jobs', job);
  assert.equal(accepted.status, 202, JSON.stringify(accepted.body));
  const waiting = await post('/v1/jobs', job);
  assert.equal(waiting.status, 202);

  process.kill(replica.pid, 'SIGSTOP');
  try {
    const refused = await post('/v1/jobs', job);
    assert.equal(refused.status, 503, JSON.stringify(refused.body));
    assert.match(refused.headers['content-type'] ?? '', /^application\/problem\+json/);
    assert.equal(refused.headers['retry-after'], '1');
    assert.match(refused.body.detail, /reached 0 of the 1 Redis replicas it must be on within 300 ms/);
    const schedule = await post('/v1/schedules', { name: 'wait', everySeconds: 60, spec: job });
    assert.equal(schedule.status, 503, 'a schedule is not created unreplicated either');

    // A coordinator starts with the replica frozen: it takes the first job, and every lease
    // it is granted reaches no replica, so it lets it go and the job stays queued, waiting.
    coordinator = new Coordinator(stack.config, silentLog);
    await coordinator.start();
    const seen = await waitFor('the job to wait for the replicas', async () => {
      const { body } = await request(stack.app).get(`/v1/jobs/${accepted.body.id}`);
      return body.waitingFor?.[0]?.startsWith('Redis replicas') ? body : null;
    }, 10_000, 50);
    assert.equal(seen.status, 'queued');
    assert.equal(seen.progress.runsDone, 0);
  } finally {
    process.kill(replica.pid, 'SIGCONT');
  }
  // The replica back: the grant is confirmed and both jobs accepted before the freeze run.
  for (const id of [accepted.body.id, waiting.body.id]) {
    const done = await waitFor(`job ${id} to succeed`, async () => {
      const { body } = await request(stack.app).get(`/v1/jobs/${id}`);
      return body.status === 'succeeded' || body.status === 'failed' ? body : null;
    }, 30_000, 100);
    assert.equal(done.status, 'succeeded', JSON.stringify(done.error));
    assert.equal(done.waitingFor, null);
  }
  assert.equal((await post('/v1/jobs', job)).status, 202, 'accepted again once the replica confirms');
});

test('a WAIT vouches only for a write its own server has: with the key made on another server (another master, in a failover), none confirmed, though the replica is there', async () => {
  const { waitForReplicas } = await import('@niclab/shared/stores/replication');
  const waiter = createRedis(master.url);
  const keys = stack.services.keys;
  try {
    assert.equal(await waitForReplicas(waiter, keys, 1, 300, ['job', 'made-elsewhere']), 0);
    await waiter.hset(keys.job('made-here'), 'status', 'queued');
    assert.equal(await waitForReplicas(waiter, keys, 1, 300, ['job', 'made-here']), 1);
  } finally {
    waiter.disconnect();
  }
});
