import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import type { Redis } from 'ioredis';
import type { Run } from '@niclab/shared/domain/contract';
import { createRedis } from '@niclab/shared/runtime/redis';
import { RedisGaps } from '@niclab/coordinator/liveness-watch';
import { RetryPolicy } from '@niclab/coordinator/retry-policy';
import { storeInterrupted } from '@niclab/coordinator/run-outcome';
import { redisPerFile } from '../helpers/redis.js';

/**
 * A Redis failover loses what the old master had not yet passed to its replica: a task, a
 * receiver's reply, an end's report. The run then fails waiting for it (its receiver runs out
 * its deadline, or the coordinator waits out the run's), for niclab's store, not the lab: it is
 * recorded store_interrupted and made again, whatever the job's `retries` (the fresh-clone run
 * at 4c75027 failed a failover test's job `deadline_exceeded` so).
 */
let url = '';
redisPerFile((_client, server) => {
  url = server.url;
});

const failed = (code: string, message = `the ${code} message`): Run =>
  ({ id: `run-${Math.random()}`, jobId: 'job', index: 0, point: {}, repetition: 1, status: 'failed', startedAt: '2026-12-07T00:00:00.000Z', finishedAt: '2026-12-07T00:00:21.000Z', flows: [], error: { code, message } }) as unknown as Run;

test('a run that failed for want of a message across a gap of Redis is store_interrupted, its first error in the message; nothing else changes', () => {
  for (const code of ['deadline_exceeded', 'no_report', 'peer_unavailable']) {
    const error = storeInterrupted(failed(code, 'the run passed its deadline on agent f3'), true);
    assert.equal(error?.code, 'store_interrupted', code);
    assert.match(error!.message, /Redis went away during the run .*: the run passed its deadline on agent f3$/);
    assert.deepEqual(storeInterrupted(failed(code), false), { code, message: `the ${code} message` }, `${code} with Redis there all along`);
  }
  // What the lab did is the lab's even across a gap: an engine that failed, a path that refused the MTU.
  for (const code of ['engine_failed', 'path_mtu', 'agent_lost', 'canceled']) assert.equal(storeInterrupted(failed(code), true)?.code, code);
  assert.equal(storeInterrupted({ status: 'succeeded', error: null }, true), null);
});

test('store_interrupted is made again twice whatever retries says, and does not use up the retries', () => {
  const none = new RetryPolicy(0);
  assert.equal(none.again(failed('store_interrupted')), true);
  assert.equal(none.again(failed('store_interrupted')), true);
  assert.equal(none.again(failed('store_interrupted')), false, 'at most twice: a store that keeps failing fails the run');
  assert.deepEqual(none.earlier.map((e) => e.error.code), ['store_interrupted', 'store_interrupted']);
  assert.equal(none.again(failed('agent_lost')), false, 'retries 0');

  const one = new RetryPolicy(1);
  assert.equal(one.again(failed('store_interrupted')), true);
  assert.equal(one.again(failed('agent_lost')), true, "the job's one retry is still there");
  assert.equal(one.again(failed('agent_lost')), false);
  assert.equal(new RetryPolicy(1).again(failed('deadline_exceeded')), false, 'not retryable, with a retry to spare');
});

test("past its two free remakes, store_interrupted falls back to the job's retries, which retryable errors share", () => {
  const two = new RetryPolicy(2);
  for (let i = 0; i < 2; i++) assert.equal(two.again(failed('store_interrupted')), true, `free remake ${i + 1}`);
  assert.equal(two.again(failed('store_interrupted')), true, 'the third, as the first of two retries');
  assert.equal(two.again(failed('peer_unavailable')), true, 'the second retry');
  assert.equal(two.again(failed('store_interrupted')), false, 'free remakes and retries both used up');
  assert.equal(two.again(failed('agent_lost')), false);
  assert.deepEqual(two.earlier.map((e) => e.error.code), ['store_interrupted', 'store_interrupted', 'store_interrupted', 'peer_unavailable']);
  // A retryable failure first leaves the free remakes as they were.
  const one = new RetryPolicy(1);
  assert.equal(one.again(failed('peer_unavailable')), true);
  assert.equal(one.again(failed('store_interrupted')), true);
  assert.equal(one.again(failed('store_interrupted')), true);
  assert.equal(one.again(failed('store_interrupted')), false, 'the one retry went to peer_unavailable');
});

test("RedisGaps: a connection's gap (a real server closing it) counts for a run that was under way then, not for one that starts after", async () => {
  const connection: Redis = createRedis(url, { patient: true });
  const other: Redis = createRedis(url);
  try {
    const gaps = new RedisGaps(connection);
    await connection.ping();
    // Its first ready counts as the end of a gap too (the liveness watch's window starts there): a run starts after it.
    await new Promise((resolve) => setTimeout(resolve, 5));
    const before = Date.now();
    assert.equal(gaps.since(before), false, 'no gap yet');
    const id = await connection.client('ID');
    const ready = once(connection, 'ready');
    await other.client('KILL', 'ID', String(id));
    await ready;
    assert.equal(gaps.since(before), true, 'the server closed it while the run was under way');
    await new Promise((resolve) => setTimeout(resolve, 5));
    assert.equal(gaps.since(Date.now()), false, 'a run that starts once it is back saw none');
  } finally {
    connection.disconnect();
    other.disconnect();
  }
});
