import { ApiClient } from './api-client.js';
import { spawnNiclab, waitFor, waitForApi, type NiclabProcess } from './processes.js';
import { freePort, startTestRedis, uniquePrefix, type TestRedis } from './redis.js';

/** What the fault tests work on: a private Redis, an API without a coordinator, and agents. */
export interface FaultStack {
  redis: TestRedis;
  env: Record<string, string>;
  client: ApiClient;
  /** Every process started, the test's own included once pushed: stopped by stop(). */
  processes: NiclabProcess[];
  stop(): Promise<void>;
}

/**
 * The API has no coordinator of its own, so a test can kill, stall or start coordinators
 * while the API stays up to watch; the agents are online when this returns.
 */
export async function startFaultStack(agentIds: string[]): Promise<FaultStack> {
  // A setup allowance of 6 s (a receiver gets half): at 3, a receiver beside the concurrent
  // tier at load 12 took more than its 1.5 s to start, and the run failed before the kill.
  const redis = await startTestRedis();
  const port = await freePort();
  const env = { REDIS_URL: redis.url, NICLAB_PREFIX: uniquePrefix(), NICLAB_PORT: String(port), NICLAB_HEARTBEAT_SECONDS: '1', NICLAB_SETUP_SECONDS: '6' };
  const processes = [spawnNiclab(['api', '--no-coordinator'], env), ...agentIds.map((id) => spawnNiclab(['agent', '--id', id], env))];
  const client = new ApiClient(`http://127.0.0.1:${port}`);
  const stop = async () => {
    // A stopped (SIGSTOP) process would never exit on its signal.
    for (const p of processes) if (p.child.exitCode === null && p.child.signalCode === null) process.kill(p.pid, 'SIGCONT');
    await Promise.all(processes.map((p) => p.stop()));
    await redis.stop();
  };
  // Starting is not what is tested: with the agents starting beside it on a loaded 2-core machine the API has taken over 15 s.
  await waitForApi(client.base);
  for (const id of agentIds) await waitFor(`agent ${id}`, async () => (await client.call('getAgent', 'GET', `/v1/agents/${id}`)).body.online);
  return { redis, env, client, processes, stop };
}
