/**
 * Dispatch latency and the gap between runs, on loopback with separate API and agent
 * processes on a private Redis.
 * - dispatch: POST /v1/jobs until the agent starts the receiving engine (the agent's own
 *   timestamp, same host clock), p50/p99 over JOBS short jobs, beside a bare BullMQ
 *   add -> process on the same Redis in the same run as the floor.
 * - gap: in a RUNS-run sweep of 1 s runs, the idle time between one run's last engine end and
 *   the next run's first engine start.
 */
import { performance } from 'node:perf_hooks';
import { Queue, Worker } from 'bullmq';
import { createRedis } from '@niclab/shared/runtime/redis';
import { startNiclab } from '../test/helpers/niclab.js';
import { median, round, writeResult } from './lib.js';

const JOBS = Number(process.env.BENCH_JOBS ?? 200);
const RUNS = Number(process.env.BENCH_RUNS ?? 50);
const lo = { agent: 'bench', interface: 'lo' };
const quantile = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.ceil(q * values.length) - 1)]!;

const niclab = await startNiclab(['bench'], { NICLAB_LOG_LEVEL: 'warn' });
try {
  // The floor: a BullMQ job added and picked up by a worker, on the same Redis.
  const connection = createRedis(niclab.redis.url, { blocking: true, name: 'bench-floor' });
  const queue = new Queue('floor', { connection, prefix: 'benchfloor' });
  const sent = new Map<string, number>();
  const floor: number[] = [];
  const workerConnection = connection.duplicate({ maxRetriesPerRequest: null });
  const worker = new Worker('floor', async (job) => void floor.push(performance.now() - sent.get(job.id!)!), { connection: workerConnection, prefix: 'benchfloor' });
  await worker.waitUntilReady();
  for (let i = 0; i < JOBS; i++) {
    const id = `j${i}`;
    sent.set(id, performance.now());
    await queue.add('x', {}, { jobId: id, removeOnComplete: true });
    while (floor.length <= i) await new Promise((r) => setTimeout(r, 1));
  }
  await worker.close();
  await queue.close();
  workerConnection.disconnect();
  connection.disconnect();

  // niclab: POST -> the agent starts the receiver's engine.
  const dispatch: number[] = [];
  for (let i = 0; i < JOBS; i++) {
    const postedAt = Date.now();
    const job = await niclab.client.succeed({ duration: 0.5, interval: 0.5, flows: [{ from: lo, to: lo }] }, 60_000);
    dispatch.push(Date.parse(job.runs[0].flows[0].diagnostics.receiver.engineStartedAt) - postedAt);
  }
  const d = { p50Ms: round(median(dispatch), 1), p99Ms: round(quantile(dispatch, 0.99), 1), floorP50Ms: round(median(floor), 2), floorP99Ms: round(quantile(floor, 0.99), 2) };
  console.log(`dispatch over ${JOBS} jobs: p50 ${d.p50Ms} ms, p99 ${d.p99Ms} ms; bare BullMQ add->process p50 ${d.floorP50Ms} ms, p99 ${d.floorP99Ms} ms; p99 ratio ${round(d.p99Ms / d.floorP99Ms, 1)}x`);

  // The gap between consecutive runs of one sweep.
  const sweep = await niclab.client.succeed({ duration: 1, interval: 1, sweep: { bufferLength: Array.from({ length: RUNS }, (_, i) => 65536 + i) }, flows: [{ from: lo, to: lo }] }, 600_000);
  const spans = sweep.runs.map((r: { flows: { diagnostics: Record<'sender' | 'receiver', { engineStartedAt: string; engineEndedAt: string }> }[] }) => {
    const ends = r.flows.flatMap((f) => [f.diagnostics.sender, f.diagnostics.receiver]);
    return { start: Math.min(...ends.map((e) => Date.parse(e.engineStartedAt))), end: Math.max(...ends.map((e) => Date.parse(e.engineEndedAt))) };
  });
  const gaps = spans.slice(1).map((s: { start: number }, i: number) => s.start - spans[i]!.end);
  const g = { medianMs: round(median(gaps), 1), maxMs: Math.max(...gaps), runs: RUNS };
  console.log(`gap between runs over a ${RUNS}-run sweep of 1 s runs: median ${g.medianMs} ms, max ${g.maxMs} ms`);
  // Growth: the first tenth of the jobs met a store 10x smaller than the last tenth did.
  const tenth = Math.max(1, Math.floor(JOBS / 10));
  const growth = { firstTenthP50Ms: round(median(dispatch.slice(0, tenth)), 1), lastTenthP50Ms: round(median(dispatch.slice(-tenth)), 1), ratio: round(median(dispatch.slice(-tenth)) / median(dispatch.slice(0, tenth)), 2) };
  console.log(`growth: dispatch p50 of the first ${tenth} jobs ${growth.firstTenthP50Ms} ms, of the last ${tenth} ${growth.lastTenthP50Ms} ms (x${growth.ratio})`);
  console.log(`written ${await writeResult('dispatch', { jobs: JOBS, dispatch: d, gap: g, growth })}`);
} finally {
  await niclab.stop();
}
