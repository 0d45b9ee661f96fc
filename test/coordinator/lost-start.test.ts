import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import request from 'supertest';
import { createRedis } from '@niclab/shared/runtime/redis';
import { startStack, testConfig, type Stack } from '../helpers/stack.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { waitFor } from '../helpers/processes.js';

/**
 * A job's move to running is not waited for (no WAIT), unlike the lease grant before it: a
 * Redis failover can lose it while keeping BullMQ's take of the job, so on the new master the
 * job is queued again while the coordinator that holds it makes its runs. The failover test at
 * NICLAB_FAILOVER_LAG_MS=400 lost jobs so: the coordinator logged "job finished", its end (a
 * move from running only) found the job queued and moved nothing, BullMQ completed the entry,
 * and the job stayed queued for good. Here the lost write is played by putting the job back
 * as the replica had it (queued, no startedAt, still waiting for its lease, in the queued
 * index) once the coordinator moved it.
 */
let redis: TestRedis;
let stack: Stack;
let client: Redis;
const lo = { agent: 'lost-start-a', interface: 'lo' };
// Long enough (2 s) that the job is put back well before its run ends.
const job = { engine: 'builtin', protocol: 'udp', udp: { packetSize: 200, rate: { packetsPerSecond: 100 } }, duration: 2, interval: 1, flows: [{ from: lo, to: lo }] };

before(async () => {
  redis = await startTestRedis();
  stack = await startStack(testConfig(redis.url), { agents: [lo.agent], coordinator: true });
  client = createRedis(redis.url);
});

after(async () => {
  client?.disconnect();
  await stack?.close();
  await redis?.stop();
});

test("a job whose move to running a failover lost is ended from queued by the coordinator that ran it, not left queued with its queue entry completed", async () => {
  const keys = stack.services.keys;
  const accepted = await request(stack.app).post('/v1/jobs').set('content-type', 'application/json').send(JSON.stringify(job));
  assert.equal(accepted.status, 202, JSON.stringify(accepted.body));
  const id: string = accepted.body.id;
  await waitFor('the job to move to running', async () => (await client.hget(keys.job(id), 'status')) === 'running', 15_000, 5);
  // The new master as the replica had it: the lease grant and BullMQ's take, not the move.
  const member = (await client.hget(keys.job(id), 'member'))!;
  await client.multi().hset(keys.job(id), 'status', 'queued', 'startedAt', '', 'waitingFor', JSON.stringify([`${lo.agent}:${lo.interface}`])).zrem(keys.jobIndex('running'), member).zadd(keys.jobIndex('queued'), 0, member).exec();
  const runs = Object.values(await client.hgetall(keys.runs(id))).map((run) => JSON.parse(run) as { status: string });
  assert.ok(runs.every((run) => run.status === 'running'), `put back before its run ended: ${JSON.stringify(runs)}`);

  const connection = createRedis(redis.url);
  const queue = new Queue(keys.jobsQueue, { connection, prefix: keys.bull });
  try {
    await waitFor("the job's queue entry to complete", async () => (await queue.getJobState(id)) === 'completed', 30_000, 50);
  } finally {
    await queue.close();
    connection.disconnect();
  }
  const { body } = await request(stack.app).get(`/v1/jobs/${id}`);
  assert.equal(body.status, 'succeeded', `its queue entry completed, the job ${body.status} (left so, nothing would take it again)`);
  assert.ok(body.startedAt && Date.parse(body.startedAt) <= Date.parse(body.finishedAt), `a start before its end: ${body.startedAt} ${body.finishedAt}`);
  assert.equal(body.waitingFor, null, 'waiting for nothing (its lease wait ended, a write lost with the move)');
  assert.deepEqual(body.runs.map((r: { status: string }) => r.status), ['succeeded']);
  assert.equal(await client.zscore(keys.jobIndex('queued'), member), null, 'out of the queued index');
  assert.notEqual(await client.zscore(keys.jobIndex('succeeded'), member), null, 'in the succeeded index');
});
