import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { startPrivateRedis, type PrivateRedis } from '@niclab/shared/private-redis';
import { ApiClient } from '../helpers/api-client.js';
import { isAlive, spawnNiclab, waitFor, type NiclabProcess } from '../helpers/processes.js';
import { freePort, uniquePrefix } from '../helpers/redis.js';

const JOBS = 200;
const AGENTS = ['q1', 'q2', 'q3', 'q4', 'q5', 'q6'];

const dir = mkdtempSync(join(tmpdir(), 'niclab-aof-'));
let redis: PrivateRedis;
let redisPort: number;
let api: NiclabProcess;
let agents: NiclabProcess[] = [];
let client: ApiClient;

before(async () => {
  redisPort = await freePort();
  // AOF with fsync every second, as deploy/ runs it.
  redis = await startPrivateRedis(dir, { port: redisPort, appendonly: true, killOnSignal: true });
  const port = await freePort();
  const env = { REDIS_URL: redis.url, NICLAB_PREFIX: uniquePrefix(), NICLAB_PORT: String(port), NICLAB_HEARTBEAT_SECONDS: '1', NICLAB_SETUP_SECONDS: '5', NICLAB_LOG_LEVEL: 'warn' };
  api = spawnNiclab(['api'], env);
  agents = AGENTS.map((id) => spawnNiclab(['agent', '--id', id], env));
  client = new ApiClient(`http://127.0.0.1:${port}`);
  await waitFor('the API', async () => (await fetch(`${client.base}/readyz`).catch(() => null))?.ok ?? false);
  for (const id of AGENTS) await waitFor(`agent ${id}`, async () => (await client.call('getAgent', 'GET', `/v1/agents/${id}`)).body.online);
});
after(async () => {
  await Promise.all(agents.map((a) => a.stop()));
  await api?.stop();
  await redis?.stop();
  rmSync(dir, { recursive: true, force: true });
});

test(`SIGKILL of Redis (AOF everysec) with ${JOBS} jobs accepted: every one acknowledged 2 s before is kept and finishes; nothing is restarted`, { timeout: 400_000 }, async () => {
  const ids: string[] = [];
  for (let i = 0; i < JOBS; i++) {
    const id = AGENTS[i % AGENTS.length]!;
    // Short, light runs (UDP at 100 packets/s) so 200 jobs finish in about a minute.
    const res = await client.submit({ engine: 'builtin', protocol: 'udp', udp: { packetSize: 200, rate: { packetsPerSecond: 100 } }, duration: 0.5, interval: 0.5, labels: { n: String(i) }, flows: [{ from: { agent: id, interface: 'lo' }, to: { agent: id, interface: 'lo' } }] });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    ids.push(res.body.id);
  }
  await new Promise((resolve) => setTimeout(resolve, 2500));
  const before = await client.call('listJobs', 'GET', '/v1/jobs?status=succeeded&limit=200');
  process.kill(redis.pid, 'SIGKILL');
  await waitFor('redis to be gone', () => !isAlive(redis.pid), 5000, 20);
  const killedAt = Date.now();
  await new Promise((resolve) => setTimeout(resolve, 1500));
  redis = await startPrivateRedis(dir, { port: redisPort, appendonly: true, killOnSignal: true });
  console.log(`redis down ${Date.now() - killedAt} ms; ${before.body.items.length} jobs had succeeded before the kill`);

  let last: any[] = [];
  const statuses = await waitFor('every job to finish', async () => {
    last = await Promise.all(ids.map(async (id) => (await client.job(id).catch(() => null))?.body));
    const finished = last.filter((job) => job && ['succeeded', 'failed', 'canceled'].includes(job.status));
    return finished.length === ids.length ? last : null;
  }, 180_000, 1000).catch((error: Error) => {
    const stuck = last.filter((job) => !job || !['succeeded', 'failed', 'canceled'].includes(job.status));
    throw new Error(`${error.message}: ${stuck.length} not finished, e.g. ${JSON.stringify(stuck.slice(0, 3).map((j) => j && { id: j.id, status: j.status, progress: j.progress, runs: j.runs?.map((r: any) => [r.status, r.error?.code]) }))}\napi: ${api.output().split('\n').slice(-15).join('\n')}`);
  });
  const counts: Record<string, number> = {};
  for (const job of statuses) counts[job.status] = (counts[job.status] ?? 0) + 1;
  const failures = statuses.filter((job) => job.status !== 'succeeded').map((job) => `${job.id}: ${job.error?.code} ${job.error?.message}`);
  console.log(`after the restart: ${JSON.stringify(counts)}${failures.length ? `\n${failures.join('\n')}` : ''}`);
  assert.equal(statuses.length, JOBS, 'every acknowledged job is still there');
  assert.equal(counts.succeeded, JOBS, failures.join('\n'));
  // The same API, coordinator and agent processes carried on.
  assert.ok([api, ...agents].every((p) => isAlive(p.pid)));
  for (const id of AGENTS) assert.equal((await client.call('getAgent', 'GET', `/v1/agents/${id}`)).body.online, true);
});
