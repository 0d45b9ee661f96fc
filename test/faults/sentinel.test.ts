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


/** `count` connections as the API makes them (fail fast), each sending a command every 50 ms until `stop`. */
async function busyConnections(url: string, count: number) {
  const { createRedis } = await import('@niclab/shared/runtime/redis');
  const connections = Array.from({ length: count }, (_, i) => createRedis(url, { name: `follow-${i}` }));
  let busy = true;
  const loops = connections.map(async (c) => {
    while (busy) {
      await c.incr('follow').catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  });
  return {
    connections,
    on: (port: number) => connections.filter((c) => c.status === 'ready' && c.stream?.remotePort === port).length,
    async stop() {
      busy = false;
      await Promise.all(loops);
      for (const c of connections) c.disconnect();
    },
  };
}

test('every connection a process made follows a failover: 40 busy ones through a SIGKILL of the master, each on the new master', { timeout: 60_000 }, async () => {
  const { loadConfig } = await import('@niclab/shared/runtime/config');
  const { startSentinelSet } = await import('../helpers/sentinel.js');
  const { waitFor } = await import('../helpers/processes.js');
  const set = await startSentinelSet({ downAfterMs: 1000 });
  const busy = await busyConnections(loadConfig(set.apiEnv).redisUrl!, 40);
  try {
    await waitFor('every connection ready', () => busy.on(set.port('redis-0')) === 40, 10_000, 50);
    // ioredis's own failover detector ended all 40 here for good ('Connection is closed').
    set.signal('redis-0', 'SIGKILL');
    await waitFor('every connection on redis-1', () => busy.on(set.port('redis-1')) === 40, 30_000, 100).catch((error: Error) => {
      throw new Error(`${error.message}: ${JSON.stringify(busy.connections.map((c) => c.status))}`);
    });
  } finally {
    await busy.stop();
    await set.stop();
  }
});

test('a master frozen past the switch keeps its connections open: the sentinels\' word moves each to the new master before the old one wakes', { timeout: 60_000 }, async () => {
  const { loadConfig } = await import('@niclab/shared/runtime/config');
  const { startSentinelSet } = await import('../helpers/sentinel.js');
  const { waitFor } = await import('../helpers/processes.js');
  const set = await startSentinelSet({ downAfterMs: 1000 });
  const busy = await busyConnections(loadConfig(set.apiEnv).redisUrl!, 20);
  try {
    await waitFor('every connection ready', () => busy.on(set.port('redis-0')) === 20, 10_000, 50);
    set.signal('redis-0', 'SIGSTOP');
    await waitFor('the sentinels to name redis-1', async () => (await set.master()) === set.port('redis-1'), 15_000, 100);
    await waitFor('the 20 on redis-1 while redis-0 is still frozen', () => busy.on(set.port('redis-1')) === 20, 5000, 50).catch((error: Error) => {
      throw new Error(`${error.message}: ${busy.on(set.port('redis-1'))} moved, ${JSON.stringify(busy.connections.map((c) => [c.status, c.stream?.remotePort]))}`);
    });
  } finally {
    set.signal('redis-0', 'SIGCONT');
    await busy.stop();
    await set.stop();
  }
});
