import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import { Keys } from '@niclab/shared/stores/keys';
import { ScheduleStore } from '@niclab/shared/stores/schedule-store';
import { startTestRedis, uniquePrefix, type TestRedis } from '../helpers/redis.js';

let redis: TestRedis;
let connection: Redis;
before(async () => {
  redis = await startTestRedis();
  connection = new Redis(redis.url);
});
after(async () => {
  connection?.disconnect();
  await redis?.stop();
});

test('each firing is counted once, under its outcome: a refused firing is not also a job (niclab_schedule_firings_total sums to the firings)', async () => {
  const keys = new Keys(uniquePrefix());
  const store = new ScheduleStore(connection, keys);
  await store.create({ name: 'nightly', everySeconds: 60, spec: {} } as never, 'lab');
  await store.fired('nightly', 'job-1');
  await store.fired('nightly', 'job-2', 'refused');
  await store.fired('nightly', 'job-3', 'refused');
  await store.skipped('nightly');
  const stats = await connection.hgetall(keys.statsFirings);
  assert.deepEqual({ ...stats }, { job: '1', refused: '2', skipped: '1' });
  const row = await store.get('nightly');
  assert.equal(row?.firings, 3, 'three firings left a job');
  assert.equal(row?.refused, 2);
  assert.equal(row?.lastJobId, 'job-3');
});
