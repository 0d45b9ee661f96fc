/**
 * Change points at scale (issue 29): one schedule's series fed 10,000 runs as the coordinator's
 * job store feeds it (ChangeStore.runEnded, on a real Redis), with a 10% step every 2,500 runs
 * and 2% noise. The detection cost per finished run (median and p99 of the last 1,000 runs, the
 * store's Redis reads and writes included) and the Redis bytes the series holds.
 */
import { randomUUID } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { FlowResult, Job, JobSpec, Run } from '@niclab/shared/domain/contract';
import { createRedis } from '@niclab/shared/runtime/redis';
import { ChangeStore } from '@niclab/shared/stores/changes';
import { Keys } from '@niclab/shared/stores/keys';
import { environment } from '../test/helpers/changes.js';
import { seededRandom } from '../test/helpers/random.js';
import { startTestRedis, uniquePrefix } from '../test/helpers/redis.js';
import { median, round, writeResult } from './lib.js';

const RUNS = 10_000;
const A = { agent: 'A', interface: 'eth1' };
const B = { agent: 'B', interface: 'eth1' };
const spec: JobSpec = {
  engine: 'builtin', test: 'stream', protocol: 'tcp', retries: 0, duration: 10, bufferLength: 131072, streams: 1, noDelay: false, direction: 'forward', interval: 1, repeat: 1,
  flows: [{ from: A, to: B }], labels: { schedule: 'nightly' },
};
const job: Job = { id: randomUUID(), owner: 'anonymous', status: 'running', createdAt: new Date().toISOString(), startedAt: null, finishedAt: null, progress: { runsDone: 0, runsTotal: 1 }, error: null, finding: null, waitingFor: null, spec };
const quantile = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.ceil(q * values.length) - 1)]!;

const redis = await startTestRedis();
const client = createRedis(redis.url);
try {
  const keys = new Keys(uniquePrefix());
  const store = new ChangeStore(client, keys);
  const r = seededRandom(1);
  const z = () => Math.sqrt(-2 * Math.log(1 - r())) * Math.cos(2 * Math.PI * r());
  const before = Number(/used_memory:(\d+)/.exec(await client.info('memory'))![1]);
  const times: number[] = [];
  const start = Date.parse('2026-01-01T00:00:00Z');
  for (let i = 0; i < RUNS; i++) {
    const level = 1e9 * 0.9 ** Math.floor(i / 2500);
    const rate = Math.round(level / 8);
    const end = (e: typeof A) => ({ ...e, address: '198.18.0.1', command: ['x'], environment: environment(rate) });
    const flow: FlowResult = {
      flowIndex: 0, direction: 'forward', from: A, to: B, sender: null, receiver: null, bitsPerSecond: level * (1 + 0.02 * z()), retransmits: null, udp: null, rr: null, intervals: [],
      nic: { from: null, to: null }, pathVerified: true, error: null, diagnostics: { sender: end(A), receiver: end(B) },
    };
    const run: Run = { id: randomUUID(), jobId: job.id, index: 0, point: {}, repetition: 1, status: 'succeeded', startedAt: null, finishedAt: new Date(start + i * 3_600_000).toISOString(), error: null, flows: [flow] };
    const t0 = performance.now();
    await store.runEnded(job, run);
    if (i >= RUNS - 1000) times.push(performance.now() - t0);
  }
  const after = Number(/used_memory:(\d+)/.exec(await client.info('memory'))![1]);
  const seriesKeys = await client.keys(`${keys.prefix}:changes:series:*`);
  const seriesBytes = Number(await client.call('MEMORY', 'USAGE', seriesKeys[0]!));
  const { items } = await store.query({ since: 0, limit: 1000 });
  const figures = {
    runs: RUNS,
    changePoints: items.map((c) => ({ afterRun: c.after.finishedAt, relative: c.relative === null ? null : round(c.relative, 4), changed: c.changed.map((x) => x.field) })),
    perRunMs: { median: round(median(times), 2), p99: round(quantile(times, 0.99), 2) },
    seriesListBytes: seriesBytes,
    redisBytesAll: after - before,
  };
  console.log(`${RUNS} runs: ${items.length} change points (${items.map((c) => `${((c.relative ?? 0) * 100).toFixed(1)}%`).join(', ')}); detection per finished run ${figures.perRunMs.median} ms median, ${figures.perRunMs.p99} ms p99 (last 1,000); the series' list ${seriesBytes} B (its last 200 points), all change-point keys ${figures.redisBytesAll} B`);
  console.log(`written ${await writeResult('changes', figures)}`);
} finally {
  client.disconnect();
  await redis.stop();
}
