/**
 * The API under load: requests/s and latency of GET /v1/jobs/{id}, GET /v1/jobs and
 * POST /v1/jobs, driven by autocannon, with the API process pinned to one core (taskset) and
 * everything else (this process and its load generator, Redis, the agent) on the other. With a
 * policy file, so every request is authenticated as in a lab. Measured with 1,000 and then
 * 10,000 stored jobs, to see what the size of the store costs.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { newToken } from '@niclab/api/policy';
import { command } from '@niclab/shared/command';
import type { JobSpec } from '@niclab/shared/contract';
import { JobStore } from '@niclab/shared/job-store';
import { Keys } from '@niclab/shared/keys';
import { createRedis } from '@niclab/shared/redis';
import { spawnNiclab, waitFor } from '../test/helpers/processes.js';
import { freePort, startTestRedis, uniquePrefix } from '../test/helpers/redis.js';
import { round, writeResult } from './lib.js';

const CLI = fileURLToPath(new URL('../services/cli/dist/main.js', import.meta.url));
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
const CONNECTIONS = 10;
const SIZES = [1000, 10_000];

// This process (and so autocannon) on core 0; the API gets core 1 to itself.
await command('taskset', ['-p', '-c', '0', String(process.pid)]);
const redis = await startTestRedis();
const dir = mkdtempSync(join(tmpdir(), 'niclab-bench-api-'));
const token = newToken();
writeFileSync(join(dir, 'policy.yaml'), `tokens:\n  - { name: bench, sha256: "${token.sha256}", scopes: [run] }\n`);
const port = await freePort();
const prefix = uniquePrefix();
const env = { PATH: process.env.PATH ?? '', REDIS_URL: redis.url, NICLAB_PREFIX: prefix, NICLAB_PORT: String(port), NICLAB_LOG_LEVEL: 'warn', NICLAB_HEARTBEAT_SECONDS: '1' };
// No coordinator: submitted jobs stay queued, so the figures are the API's alone.
const api = spawn('taskset', ['-c', '1', process.execPath, CLI, 'api'], { env: { ...env, NICLAB_COORDINATOR: 'false', NICLAB_POLICY_FILE: join(dir, 'policy.yaml') }, stdio: 'inherit' });
const agent = spawnNiclab(['agent', '--id', 'bench'], env);
const base = `http://127.0.0.1:${port}`;
const headers = { authorization: `Bearer ${token.token}`, 'content-type': 'application/json' };
const spec: JobSpec = { engine: 'builtin', test: 'stream', protocol: 'tcp', duration: 1, bufferLength: 131072, streams: 1, noDelay: false, direction: 'forward', interval: 1, repeat: 1, retries: 0, flows: [{ from: { agent: 'bench', interface: 'lo' }, to: { agent: 'bench', interface: 'lo' } }] };

async function load(path: string, method: 'GET' | 'POST', body?: string) {
  const result = await autocannon({ url: `${base}${path}`, method, headers, body, connections: CONNECTIONS, duration: SECONDS });
  if (result.non2xx > 0 || result.errors > 0) throw new Error(`${method} ${path}: ${result.non2xx} non-2xx, ${result.errors} errors`);
  return { requestsPerSecond: round(result.requests.average, 0), p50Ms: result.latency.p50, p99Ms: result.latency.p99, requests: result.requests.total };
}

const figures: Record<string, unknown>[] = [];
try {
  await waitFor('the API', async () => (await fetch(`${base}/readyz`).catch(() => null))?.ok ?? false);
  await waitFor('the agent', async () => ((await (await fetch(`${base}/v1/agents/bench`, { headers })).json()) as { online?: boolean }).online === true);
  const store = new JobStore(createRedis(redis.url, { name: 'bench-fill' }), new Keys(prefix));
  let stored = 0;
  let someId = '';
  for (const size of SIZES) {
    // Fill the store up to `size` finished jobs, as history accumulates.
    for (; stored < size; stored++) {
      const id = randomUUID();
      await store.create(id, spec, 1, 'bench', new Date(Date.now() - (size - stored) * 1000));
      someId = id;
    }
    const getOne = await load(`/v1/jobs/${someId}`, 'GET');
    const list = await load('/v1/jobs', 'GET');
    const post = await load('/v1/jobs', 'POST', JSON.stringify(spec));
    stored += post.requests;
    figures.push({ storedJobs: size, getJob: getOne, listJobs: list, createJob: post });
    console.log(`${size} stored jobs: GET /v1/jobs/{id} ${getOne.requestsPerSecond}/s p99 ${getOne.p99Ms} ms; GET /v1/jobs ${list.requestsPerSecond}/s p99 ${list.p99Ms} ms; POST /v1/jobs ${post.requestsPerSecond}/s p99 ${post.p99Ms} ms`);
  }
} finally {
  api.kill('SIGTERM');
  await agent.stop();
  await redis.stop();
}
const [small, large] = figures as { getJob: { requestsPerSecond: number }; listJobs: { requestsPerSecond: number }; createJob: { requestsPerSecond: number } }[];
const growth = {
  getJobThroughputRatio: round(large!.getJob.requestsPerSecond / small!.getJob.requestsPerSecond),
  listJobsThroughputRatio: round(large!.listJobs.requestsPerSecond / small!.listJobs.requestsPerSecond),
  createJobThroughputRatio: round(large!.createJob.requestsPerSecond / small!.createJob.requestsPerSecond),
};
console.log(`growth 10x stored jobs: throughput GET one x${growth.getJobThroughputRatio}, list x${growth.listJobsThroughputRatio}, POST x${growth.createJobThroughputRatio}`);
console.log(`written ${await writeResult('api', { seconds: SECONDS, connections: CONNECTIONS, cores: { api: 1, loadGeneratorRedisAgent: 1 }, sizes: figures, growth })}`);
