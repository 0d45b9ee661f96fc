/**
 * The API under load: requests/s and latency of GET /v1/jobs/{id}, GET /v1/jobs and
 * POST /v1/jobs, driven by autocannon, with the API process pinned to one core (taskset) and
 * everything else (this process and its load generator, Redis, the agent) on the other. With a
 * policy file, so every request is authenticated as in a lab. Two APIs, one over 1,000 stored
 * jobs and one over 10,000, take turns (3 rounds of 5 s each, medians), so what the size of the
 * store costs is measured side by side.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import autocannon from 'autocannon';
import { newToken } from '@niclab/api/policy';
import type { JobSpec } from '@niclab/shared/domain/contract';
import { JobStore } from '@niclab/shared/stores/job-store';
import { Keys } from '@niclab/shared/stores/keys';
import { createRedis } from '@niclab/shared/runtime/redis';
import { spawnNiclab, waitFor } from '../test/helpers/processes.js';
import { startTestRedis, uniquePrefix } from '../test/helpers/redis.js';
import { median, round, startPinnedApi, writeResult } from './lib.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const ROUNDS = 3;
const CONNECTIONS = 10;
const SIZES = [1000, 10_000];

const redis = await startTestRedis();
const dir = mkdtempSync(join(tmpdir(), 'niclab-bench-api-'));
const token = newToken();
writeFileSync(join(dir, 'policy.yaml'), `tokens:\n  - { name: bench, sha256: "${token.sha256}", scopes: [run] }\n`);
const headers = { authorization: `Bearer ${token.token}`, 'content-type': 'application/json' };
const spec: JobSpec = { engine: 'builtin', test: 'stream', protocol: 'tcp', duration: 1, bufferLength: 131072, streams: 1, noDelay: false, direction: 'forward', interval: 1, repeat: 1, retries: 0, flows: [{ from: { agent: 'bench', interface: 'lo' }, to: { agent: 'bench', interface: 'lo' } }] };

async function load(base: string, path: string, method: 'GET' | 'POST', body?: string) {
  const result = await autocannon({ url: `${base}${path}`, method, headers, body, connections: CONNECTIONS, duration: SECONDS });
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${method} ${path}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return { requestsPerSecond: round(result.requests.average, 0), p50Ms: result.latency.p50, p99Ms: result.latency.p99, requests: result.requests.total };
}

/** A fresh API (pinned to core 1) and agent on their own key prefix, with `size` jobs stored. */
async function startApi(size: number) {
  const prefix = uniquePrefix();
  const env = { REDIS_URL: redis.url, NICLAB_PREFIX: prefix, NICLAB_LOG_LEVEL: 'warn', NICLAB_HEARTBEAT_SECONDS: '1' };
  // No coordinator: submitted jobs stay queued, so the figures are the API's alone.
  const api = await startPinnedApi({ ...env, NICLAB_POLICY_FILE: join(dir, 'policy.yaml') });
  const agent = spawnNiclab(['agent', '--id', 'bench'], env);
  const { base } = api;
  const connection = createRedis(redis.url, { name: 'bench-fill' });
  await waitFor('the agent', async () => ((await (await fetch(`${base}/v1/agents/bench`, { headers })).json()) as { online?: boolean }).online === true);
  const store = new JobStore(connection, new Keys(prefix));
  let someId = '';
  for (let i = 0; i < size; i++) {
    someId = randomUUID();
    await store.create(someId, spec, 1, 'bench', new Date(Date.now() - (size - i) * 1000));
  }
  return {
    size, base, someId,
    async stop() {
      connection.disconnect();
      await api.stop();
      await agent.stop();
    },
  };
}

type Figures = Awaited<ReturnType<typeof load>>;
const medianOf = (runs: Figures[]): Figures => {
  const pick = (key: keyof Figures) => median(runs.map((r) => r[key]));
  return { requestsPerSecond: pick('requestsPerSecond'), p50Ms: pick('p50Ms'), p99Ms: pick('p99Ms'), requests: pick('requests') };
};

// Both stores side by side: the APIs take turns (A B A B A B) so the machine's noise falls on both.
const apis = await Promise.all(SIZES.map((size) => startApi(size)));
const runs = new Map<number, { getJob: Figures[]; listJobs: Figures[]; createJob: Figures[] }>(SIZES.map((size) => [size, { getJob: [], listJobs: [], createJob: [] }]));
try {
  for (const api of apis) {
    await load(api.base, `/v1/jobs/${api.someId}`, 'GET'); // warm-up (the JIT), not counted
    await load(api.base, '/v1/jobs', 'GET');
  }
  for (let round = 0; round < ROUNDS; round++) {
    for (const api of apis) {
      runs.get(api.size)!.getJob.push(await load(api.base, `/v1/jobs/${api.someId}`, 'GET'));
      runs.get(api.size)!.listJobs.push(await load(api.base, '/v1/jobs', 'GET'));
    }
  }
  // Last: POST adds its own jobs to each store.
  for (let round = 0; round < ROUNDS; round++) {
    for (const api of apis) runs.get(api.size)!.createJob.push(await load(api.base, '/v1/jobs', 'POST', JSON.stringify(spec)));
  }
} finally {
  for (const api of apis) await api.stop();
  await redis.stop();
}
const figures = SIZES.map((size) => {
  const r = runs.get(size)!;
  const f = { storedJobs: size, getJob: medianOf(r.getJob), listJobs: medianOf(r.listJobs), createJob: medianOf(r.createJob) };
  console.log(`${size} stored jobs (median of ${ROUNDS}): GET /v1/jobs/{id} ${f.getJob.requestsPerSecond}/s p99 ${f.getJob.p99Ms} ms; GET /v1/jobs ${f.listJobs.requestsPerSecond}/s p99 ${f.listJobs.p99Ms} ms; POST /v1/jobs ${f.createJob.requestsPerSecond}/s p99 ${f.createJob.p99Ms} ms`);
  return f;
});
const [small, large] = figures as [(typeof figures)[0], (typeof figures)[0]];
const growth = {
  getJobThroughputRatio: round(large!.getJob.requestsPerSecond / small!.getJob.requestsPerSecond),
  listJobsThroughputRatio: round(large!.listJobs.requestsPerSecond / small!.listJobs.requestsPerSecond),
  createJobThroughputRatio: round(large!.createJob.requestsPerSecond / small!.createJob.requestsPerSecond),
};
console.log(`growth 10x stored jobs: throughput GET one x${growth.getJobThroughputRatio}, list x${growth.listJobsThroughputRatio}, POST x${growth.createJobThroughputRatio}`);
console.log(`written ${await writeResult('api', { seconds: SECONDS, rounds: ROUNDS, connections: CONNECTIONS, cores: { api: 1, loadGeneratorRedisAgent: 1 }, sizes: figures, growth })}`);
