/**
 * Dispatch latency and the gap between runs, on loopback with separate API and agent
 * processes on a private Redis.
 * - dispatch: POST /v1/jobs until the agent starts the receiving engine (the agent's own
 *   timestamp, same host clock), p50/p99 over JOBS short jobs, beside a bare BullMQ
 *   add -> process on the same Redis in the same run as the floor. Where the time goes:
 *   each stage between the timestamps the job records and BullMQ's event streams (Redis's
 *   clock, the same host's) hold: the API's add, the coordinator's pick-up, its lease and
 *   record work, the agent task's add and pick-up, the agent's own work before the engine.
 * - gap: in a RUNS-run sweep of 1 s runs, the idle time between one run's last engine end and
 *   the next run's first engine start.
 */
import { performance } from 'node:perf_hooks';
import { Queue, Worker } from 'bullmq';
import { createRedis } from '@niclab/shared/runtime/redis';
import { Keys } from '@niclab/shared/stores/keys';
import { startNiclab } from '../test/helpers/niclab.js';
import { median, round, writeResult } from './lib.js';

const JOBS = Number(process.env.BENCH_JOBS ?? 200);
const RUNS = Number(process.env.BENCH_RUNS ?? 50);
const lo = { agent: 'bench', interface: 'lo' };
const WARM_UP = 10;
/** The stages of a dispatch, between consecutive timestamps (ms resolution: the records' and Redis stream ids'). */
const STAGES = [
  ['api', 'POST -> job added to the coordinators\' queue (API: admit, validate, store, add)'],
  ['hop1', 'added -> a coordinator picks it up (queue hop 1)'],
  ['coordinator', 'picked up -> job running (coordinator: read the job and its runs, leases, transition)'],
  ['run', 'running -> receiver task added to the agent\'s queue (run record, offline check)'],
  ['hop2', 'task added -> the agent picks it up (queue hop 2)'],
  ['agent', 'picked up -> engine starts (agent: task check, interface, environment, counters)'],
] as const;
type Stage = (typeof STAGES)[number][0];

/** BullMQ's event streams of the coordinators' queue and the agent's, read forward job by job. */
class QueueEventLog {
  private readonly redis;
  private readonly streams: { jobs: string; agent: string };
  private readonly last = { jobs: '0', agent: '0' };

  constructor(url: string, keys: Keys) {
    this.redis = createRedis(url, { name: 'bench-events' });
    this.streams = { jobs: `${keys.bull}:${keys.jobsQueue}:events`, agent: `${keys.bull}:${keys.agentQueue(lo.agent)}:events` };
  }

  async skipPast(): Promise<void> {
    for (const which of ['jobs', 'agent'] as const) await this.read(which);
  }

  /** Entries after the last read: [ms of the stream id, fields]. */
  private async read(which: 'jobs' | 'agent'): Promise<{ at: number; fields: Record<string, string> }[]> {
    const entries = await this.redis.xrange(this.streams[which], `(${this.last[which]}`, '+');
    if (entries.length > 0) this.last[which] = entries.at(-1)![0];
    return entries.map(([id, flat]) => ({ at: Number(id.split('-')[0]), fields: Object.fromEntries(flat.flatMap((v, i) => (i % 2 ? [] : [[v, flat[i + 1]!]]))) }));
  }

  async next(jobId: string): Promise<{ jobAdded: number; jobActive: number; taskAdded: number; taskActive: number }> {
    const jobs = (await this.read('jobs')).filter((e) => e.fields.jobId === jobId);
    const tasks = await this.read('agent');
    const first = (list: typeof jobs, event: string) => list.find((e) => e.fields.event === event)?.at ?? NaN;
    const receiver = tasks.find((e) => e.fields.event === 'added')?.fields.jobId;
    const ofReceiver = tasks.filter((e) => e.fields.jobId === receiver);
    return { jobAdded: first(jobs, 'added'), jobActive: first(jobs, 'active'), taskAdded: first(ofReceiver, 'added'), taskActive: first(ofReceiver, 'active') };
  }

  close(): void {
    this.redis.disconnect();
  }
}

const quantile = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.ceil(q * values.length) - 1)]!;

// A generous setup allowance: on a loaded machine an engine's start may take seconds, which would
// fail the job (and the benchmark) without changing what is measured.
const niclab = await startNiclab(['bench'], { NICLAB_LOG_LEVEL: 'warn', NICLAB_SETUP_SECONDS: '20' });
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
  const stages: Record<Stage, number[]> = Object.fromEntries(STAGES.map(([name]) => [name, []])) as unknown as Record<Stage, number[]>;
  const events = new QueueEventLog(niclab.redis.url, new Keys(niclab.env.NICLAB_PREFIX!));
  await events.skipPast();
  let failedJobs = 0;
  for (let i = 0; i < JOBS; i++) {
    const postedAt = Date.now();
    // A job that fails (an engine that could not start in time on a loaded machine) is counted
    // and left out, as the events it left are.
    const job = await niclab.client.succeed({ duration: 0.5, interval: 0.5, flows: [{ from: lo, to: lo }] }, 60_000).catch(() => null);
    if (!job) {
      failedJobs++;
      await events.skipPast();
      continue;
    }
    const engineStartedAt = Date.parse(job.runs[0].flows[0].diagnostics.receiver.engineStartedAt);
    dispatch.push(engineStartedAt - postedAt);
    // The job's events: its add to the coordinators' queue and pick-up, then its agent's first
    // task (the receiver: senders are added only once it is ready), added and picked up.
    const { jobAdded, jobActive, taskAdded, taskActive } = await events.next(job.id);
    const at = [postedAt, jobAdded, jobActive, Date.parse(job.startedAt), taskAdded, taskActive, engineStartedAt];
    STAGES.forEach(([name], s) => stages[name].push(at[s + 1]! - at[s]!));
  }
  events.close();
  const d = {
    p50Ms: round(median(dispatch), 1), p99Ms: round(quantile(dispatch, 0.99), 1), floorP50Ms: round(median(floor), 2), floorP99Ms: round(quantile(floor, 0.99), 2),
    // The first jobs pay for the JIT of every process on the path; p99 without them shows what that costs.
    p99AfterWarmUpMs: round(quantile(dispatch.slice(WARM_UP), 0.99), 1),
  };
  if (failedJobs > 0) console.log(`${failedJobs} of ${JOBS} jobs failed and are left out`);
  console.log(`dispatch over ${JOBS - failedJobs} jobs: p50 ${d.p50Ms} ms, p99 ${d.p99Ms} ms (without the first ${WARM_UP}: ${d.p99AfterWarmUpMs} ms); bare BullMQ add->process p50 ${d.floorP50Ms} ms, p99 ${d.floorP99Ms} ms; p99 ratio ${round(d.p99Ms / d.floorP99Ms, 1)}x`);
  const breakdown = Object.fromEntries(STAGES.map(([name]) => [name, { p50Ms: round(median(stages[name]), 1), p99Ms: round(quantile(stages[name], 0.99), 1), maxMs: Math.max(...stages[name]) }]));
  for (const [name, what] of STAGES) console.log(`  ${what}: p50 ${breakdown[name]!.p50Ms} ms, p99 ${breakdown[name]!.p99Ms} ms, max ${breakdown[name]!.maxMs} ms`);

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
  console.log(`written ${await writeResult('dispatch', { jobs: JOBS, failedJobs, dispatch: d, breakdown, gap: g, growth })}`);
} finally {
  await niclab.stop();
}
