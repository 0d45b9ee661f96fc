import { ApiClient } from './api-client.js';
import { spawnNiclab, waitFor, type NiclabProcess, waitForApi } from './processes.js';
import { freePort, startTestRedis, uniquePrefix, type TestRedis } from './redis.js';

/** A niclab of separate processes on a private Redis: `niclab api` and one `niclab agent` per id. */
export interface TestNiclab {
  redis: TestRedis;
  api: NiclabProcess;
  agents: NiclabProcess[];
  client: ApiClient;
  /** The environment the processes share (Redis, key prefix, port, fast heartbeats). */
  env: Record<string, string>;
  stop(): Promise<void>;
}

/**
 * `token`: what the test's client sends, for an API with a policy file in `extraEnv`. The setup
 * allowance is the product's (10 s): beside other tests a receiver has taken over 3 s to start.
 */
export async function startNiclab(agentIds: string[], extraEnv: Record<string, string> = {}, token?: string): Promise<TestNiclab> {
  const redis = await startTestRedis();
  const port = await freePort();
  const env = { REDIS_URL: redis.url, NICLAB_PREFIX: uniquePrefix(), NICLAB_PORT: String(port), NICLAB_HEARTBEAT_SECONDS: '1', NICLAB_SETUP_SECONDS: '10', ...extraEnv };
  const api = spawnNiclab(['api'], env);
  const agents = agentIds.map((id) => spawnNiclab(['agent', '--id', id], env));
  const client = new ApiClient(`http://127.0.0.1:${port}`, token);
  const stop = async () => {
    await Promise.all(agents.map((a) => a.stop()));
    await api.stop();
    await redis.stop();
  };
  try {
    // The API compiles the contract's validators as it starts: beside several agents starting on a loaded 2-core machine that took 17 s.
    await waitForApi(client.base);
    for (const id of agentIds) await waitFor(`agent ${id} to be online`, async () => (await client.call('getAgent', 'GET', `/v1/agents/${id}`)).body.online);
  } catch (error) {
    await stop();
    throw error;
  }
  return { redis, api, agents, client, env, stop };
}
