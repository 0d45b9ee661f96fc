import assert from 'node:assert/strict';
import { test } from 'node:test';

/** The Sentinel settings (issue 31); the failover itself is test/faults/sentinel-failover.test.ts. */
test('the Sentinel settings: what each process connects by, and a clear error naming the variable for each mistake', async () => {
  const { loadConfig } = await import('@niclab/shared/runtime/config');
  const { sentinelOptions } = await import('@niclab/shared/runtime/redis');
  const url = loadConfig({ NICLAB_REDIS_SENTINELS: '10.0.0.5:26379,[fd00::7]:26380', NICLAB_REDIS_MASTER: 'niclab', REDIS_URL: 'rediss://lab:s%40cret@ignored:6379' }).redisUrl!;
  assert.equal(url, 'redis-sentinel://lab:s%40cret@10.0.0.5:26379,[fd00::7]:26380/niclab?tls=1');
  const options = sentinelOptions(url);
  assert.deepEqual([options.sentinels, options.name, options.username, options.password, options.enableTLSForSentinelMode], [[{ host: '10.0.0.5', port: 26379 }, { host: 'fd00::7', port: 26380 }], 'niclab', 'lab', 's@cret', true]);
  assert.equal(loadConfig({}).redisWaitReplicas, 0, 'off for a single Redis');
  const refused = (env: Record<string, string>) => {
    try {
      loadConfig(env);
      return 'accepted';
    } catch (error) {
      return (error as Error).message;
    }
  };
  assert.match(refused({ NICLAB_REDIS_MASTER: 'niclab' }), /^NICLAB_REDIS_MASTER: is set, but NICLAB_REDIS_SENTINELS is not/);
  assert.match(refused({ NICLAB_REDIS_SENTINELS: '10.0.0.5' }), /^NICLAB_REDIS_SENTINELS: "10\.0\.0\.5" is not host:port/);
  assert.match(refused({ NICLAB_REDIS_SENTINELS: '10.0.0.5:26379' }), /^NICLAB_REDIS_MASTER: must name the master/);
  assert.match(refused({ NICLAB_REDIS_SENTINELS: '10.0.0.5:26379', NICLAB_REDIS_MASTER: 'm', REDIS_URL: 'unix:///run/redis.sock' }), /^REDIS_URL: with NICLAB_REDIS_SENTINELS/);
  assert.match(refused({ NICLAB_REDIS_WAIT_REPLICAS: 'two' }), /^NICLAB_REDIS_WAIT_REPLICAS/);
});

