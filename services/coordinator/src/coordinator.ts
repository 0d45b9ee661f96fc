import { randomUUID } from 'node:crypto';
import { DelayedError, Queue, Worker, type Job as BullJob } from 'bullmq';
import type { Redis } from 'ioredis';
import { AgentRegistry, MISSED_HEARTBEATS } from '@niclab/shared/agent-registry';
import type { Config } from '@niclab/shared/config';
import { TERMINAL_STATUSES, type ErrorInfo, type Job, type JobSpec, type Run } from '@niclab/shared/contract';
import { JobStore } from '@niclab/shared/job-store';
import { Keys } from '@niclab/shared/keys';
import { Leases, type LeaseTarget } from '@niclab/shared/leases';
import type { Logger } from '@niclab/shared/logger';
import { expectedRuns, pointStates } from '@niclab/shared/campaign';
import { legsOf, paramsAt, planRuns, pointKey, type PlannedRun } from '@niclab/shared/plan';
import { createRedis } from '@niclab/shared/redis';
import type { EndReport, ReadyReply, ReceiverTask, SenderTask, Task } from '@niclab/shared/task';
import { collect } from './collect.js';
import { flowResult, pickError } from './flow-result.js';

/** The common start instant is this far after the last receiver is ready, so every sender is connected by then. */
const START_DELAY_MS = 300;
/** Reports of ends killed at the deadline need a moment to arrive. */
const REPORT_GRACE_MS = 2000;
const ABANDONED_TTL_SECONDS = 3600;
/** How often a job waiting for interface leases tries again. */
const LEASE_RETRY_MS = 200;
/** The abort reason of a coordinator that is stopping: its job is interrupted, not ended. */
const SHUTDOWN = 'coordinator_shutdown';
/** How often a coordinator deletes what retention no longer keeps. */
const RETENTION_SWEEP_MS = 10 * 60 * 1000;
const DAY_MS = 24 * 3600 * 1000;
/** Failures outside the measurement, which a job's `retries` makes again. */
const RETRYABLE = new Set(['agent_lost', 'agent_offline', 'peer_unavailable']);
type EarlierAttempt = NonNullable<Run['earlierAttempts']>[number];
/** How often a running run checks that its agents are still alive. */
const LIVENESS_CHECK_MS = 1000;
/**
 * A coordinator killed outright (SIGKILL) stops renewing its hold on the job: the hold lapses
 * after JOB_LOCK_MS, and any coordinator's stalled check (every JOB_STALLED_CHECK_MS) then
 * hands the job to the next. Resuming is harmless (finished runs are kept), so a job may stall
 * any number of times without being failed.
 */
const JOB_LOCK_MS = 15_000;
const JOB_STALLED_CHECK_MS = 5000;
const JOB_MAX_STALLS = 1000;

/** Waits `ms`, or less when `signal` aborts first. */
function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

export interface JobMessage {
  jobId: string;
}

/**
 * Turns jobs into runs and runs into agent tasks: receivers first, then senders at a common
 * start instant, then both ends' reports gathered into the run. A BullMQ worker; any number
 * of coordinators can share the queue.
 */
export class Coordinator {
  private readonly keys: Keys;
  private readonly redis: Redis;
  private readonly subscriber: Redis;
  private readonly store: JobStore;
  private readonly registry: AgentRegistry;
  private readonly leases: Leases;
  private readonly agentQueues = new Map<string, Queue>();
  private readonly active = new Map<string, AbortController>();
  private worker: Worker | undefined;
  private workerConnection: Redis | undefined;
  private retentionTimer: NodeJS.Timeout | undefined;

  constructor(private readonly config: Config & { redisUrl: string }, private readonly log: Logger, private readonly concurrency = 8) {
    this.keys = new Keys(config.prefix);
    this.redis = createRedis(config.redisUrl, { patient: true, name: 'niclab-coordinator' });
    this.subscriber = createRedis(config.redisUrl, { blocking: true, name: 'niclab-coordinator-sub' });
    this.store = new JobStore(this.redis, this.keys);
    this.registry = new AgentRegistry(this.redis, this.keys);
    this.leases = new Leases(this.redis, this.keys);
  }

  async start(): Promise<void> {
    const moved = await this.store.results.migrate();
    if (moved > 0) this.log.info({ summaries: moved }, 'history moved to the indexed layout');
    await this.subscriber.subscribe(this.keys.cancelChannel);
    this.subscriber.on('message', (_channel: string, text: string) => {
      try {
        const { jobId } = JSON.parse(text) as { jobId?: string };
        if (jobId) this.active.get(jobId)?.abort({ code: 'canceled', message: 'The job was canceled.' });
      } catch {
        // not ours to read
      }
    });
    // BullMQ never closes a connection it is given; stop() does.
    this.workerConnection = createRedis(this.config.redisUrl, { blocking: true, name: 'niclab-coordinator-worker' });
    this.worker = new Worker(this.keys.jobsQueue, (job: BullJob<JobMessage>, token?: string) => this.processJob(job.data.jobId, job, token), {
      connection: this.workerConnection,
      prefix: this.keys.bull,
      concurrency: this.concurrency,
      lockDuration: JOB_LOCK_MS,
      stalledInterval: JOB_STALLED_CHECK_MS,
      maxStalledCount: JOB_MAX_STALLS,
    });
    this.worker.on('error', (error) => this.log.error({ err: error }, 'job queue error'));
    const sweep = () => void this.sweepRetention().catch((error: Error) => this.log.warn({ err: error }, 'retention sweep failed'));
    sweep();
    this.retentionTimer = setInterval(sweep, RETENTION_SWEEP_MS).unref();
  }

  /**
   * Deletes finished jobs past NICLAB_RETENTION_DAYS or beyond NICLAB_RETENTION_JOBS (runs and
   * raw output with them) and run summaries past NICLAB_RESULTS_RETENTION_DAYS. Any number of
   * coordinators may sweep at once: deleting twice is harmless.
   */
  async sweepRetention(now = Date.now()): Promise<{ jobs: number; summaries: number }> {
    let jobs = 0;
    for (;;) {
      const ids = await this.store.expired(now - this.config.retentionDays * DAY_MS, this.config.retentionJobs);
      for (const id of ids) await this.store.delete(id);
      jobs += ids.length;
      if (ids.length < 500) break;
    }
    const summaries = await this.store.results.expire(now - this.config.resultsRetentionDays * DAY_MS);
    if (jobs || summaries) this.log.info({ jobs, summaries }, 'retention: deleted');
    return { jobs, summaries };
  }

  async stop(): Promise<void> {
    clearInterval(this.retentionTimer);
    for (const controller of this.active.values()) controller.abort({ code: SHUTDOWN, message: 'the coordinator is shutting down' });
    await this.worker?.close();
    this.workerConnection?.disconnect();
    await Promise.all([...this.agentQueues.values()].map((queue) => queue.close()));
    this.subscriber.disconnect();
    await this.redis.quit().catch(() => undefined);
  }

  /**
   * Runs a job to its end. Safe to call again for a job whose coordinator died: finished runs
   * are kept. A coordinator that stops mid-job puts the job back in the queue for another.
   */
  async processJob(jobId: string, bullJob?: BullJob<JobMessage>, token?: string): Promise<void> {
    const job = await this.store.get(jobId);
    if (!job || TERMINAL_STATUSES.includes(job.status)) return;
    const log = this.log.child({ jobId });
    const controller = new AbortController();
    this.active.set(jobId, controller);
    try {
      const planned = planRuns(job.spec);
      const stored = await this.store.listRuns(jobId);
      const done = new Map(stored.filter((r) => TERMINAL_STATUSES.includes(r.status)).map((r) => [r.index, r]));
      // A run still `running` was under a coordinator that died without stopping: it is made
      // again, and the lost attempt is kept in the new one's record.
      const interrupted = new Map(stored.filter((r) => r.status === 'running').map((r) => [r.index, r]));
      let failed = [...done.values()].filter((r) => r.status === 'failed');
      log.info({ runs: planned.length, resumedAt: done.size, ...(interrupted.size > 0 ? { interruptedRuns: [...interrupted.keys()] } : {}) }, 'job started');
      // Where each point stands (adaptive repetition), recomputed only when a run has ended.
      const standing = () => pointStates(job.spec, [...done.values()].filter((r) => r.status !== 'canceled'));
      let states = standing();
      for (const plan of planned) {
        if (done.has(plan.index)) continue;
        // Adaptive repetition: a point whose interval is tight enough needs no more runs.
        if (states.get(pointKey(plan.point))?.settled) continue;
        // The job's retry policy: a run that failed for a reason outside the measurement is
        // made again (a new run id, the same index), at most `retries` times.
        const lostRun = interrupted.get(plan.index);
        const earlier: EarlierAttempt[] = lostRun
          ? [...(lostRun.earlierAttempts ?? []), { id: lostRun.id, startedAt: lostRun.startedAt, finishedAt: null, error: { code: 'coordinator_lost', message: 'the coordinator running this attempt died (its hold on the job lapsed); the job was resumed by another' } }]
          : [];
        const retried = () => earlier.filter((e) => RETRYABLE.has(e.error.code)).length;
        let run: Run | null = null;
        for (;;) {
          const runId = randomUUID();
          const targets = await this.leaseTargets(job.spec);
          // Jobs that share interfaces take turns run by run: after a run, a job lets one that
          // waits for the same interfaces go first, so two campaigns submitted together
          // alternate (A B A B) and a drift of the machine falls on both alike.
          if (run || done.size > 0) await this.yieldToWaiters(jobId, targets, controller.signal);
          if (!(await this.waitForLeases(jobId, runId, targets, controller.signal))) break;
          try {
            // A job waiting for its first run's leases is still queued; it runs once it holds them.
            if (job.status === 'queued') {
              if (!(await this.store.transition(jobId, ['queued'], 'running', { startedAt: new Date().toISOString() }))) return;
              job.status = 'running';
            }
            run = await this.executeRun(job, plan, runId, targets, controller.signal, log, earlier);
          } finally {
            await this.leases.release(runId, targets);
          }
          if (run.status !== 'failed' || !RETRYABLE.has(run.error?.code ?? '') || retried() >= (job.spec.retries ?? 0)) break;
          earlier.push({ id: run.id, startedAt: run.startedAt, finishedAt: run.finishedAt, error: run.error! });
          log.info({ run: plan.index, attempt: earlier.length + 1, after: run.error?.code }, 'run made again (retries)');
        }
        if (!run || run.status === 'queued') break; // canceled, or interrupted by shutdown: it runs again on resume
        done.set(plan.index, run);
        if (run.status === 'failed') failed = [...failed, run];
        states = standing();
        await this.store.setProgress(jobId, done.size, expectedRuns(job.spec, states));
      }
      if ((controller.signal.reason as ErrorInfo | undefined)?.code === SHUTDOWN && bullJob && token) {
        log.info({ runsDone: done.size }, 'job interrupted by shutdown; back in the queue');
        await bullJob.moveToDelayed(Date.now(), token);
        throw new DelayedError();
      }
      if (controller.signal.aborted) return; // the API already moved the job to canceled
      const finishedAt = new Date().toISOString();
      if (failed.length === 0) {
        await this.store.transition(jobId, ['running'], 'succeeded', { finishedAt, error: null });
      } else {
        const first = failed[0]?.error;
        const error: ErrorInfo = {
          code: failed.length === done.size && first ? first.code : 'runs_failed',
          message: `${failed.length} of ${done.size} runs failed${first ? `; first: ${first.message}` : ''}`,
        };
        await this.store.transition(jobId, ['running'], 'failed', { finishedAt, error });
      }
      log.info({ outcome: failed.length === 0 ? 'succeeded' : 'failed', failedRuns: failed.length }, 'job finished');
    } finally {
      this.active.delete(jobId);
    }
  }

  /**
   * The interfaces a run leases: both ends of every flow. Tuned sysctls change a whole host
   * (its network namespace), so a run with them also leases every interface of each agent it
   * involves: no other run on those hosts overlaps it, before or after.
   */
  private async leaseTargets(spec: JobSpec): Promise<LeaseTarget[]> {
    const ends: LeaseTarget[] = spec.flows.flatMap((f) => [f.from, f.to]);
    if (Object.keys(spec.tuning?.sysctl ?? {}).length === 0) return ends;
    const agents = [...new Set(ends.map((end) => end.agent))];
    const records = await Promise.all(agents.map((id) => this.registry.get(id)));
    return [...ends, ...records.flatMap((agent, i) => (agent?.interfaces ?? []).map((iface) => ({ agent: agents[i]!, interface: iface.name })))];
  }

  /** Gives a job waiting for any of these interfaces the time to take them (its next retry). */
  private async yieldToWaiters(jobId: string, targets: LeaseTarget[], signal: AbortSignal): Promise<void> {
    if (signal.aborted || !(await this.leases.othersWaiting(jobId, targets))) return;
    await sleep(LEASE_RETRY_MS * 2, signal);
  }

  /** Waits until the run holds a lease on every interface it touches; false when the job was canceled first. */
  private async waitForLeases(jobId: string, runId: string, targets: LeaseTarget[], signal: AbortSignal): Promise<boolean> {
    let waitingFor: string | null = null;
    while (!signal.aborted) {
      const blocked = await this.leases.acquire(runId, targets);
      if (!blocked) {
        if (waitingFor) await this.store.setWaiting(jobId, null);
        return true;
      }
      await this.leases.markWaiting(jobId, blocked.target, LEASE_RETRY_MS * 5);
      const label = `${blocked.target.agent}:${blocked.target.interface}`;
      if (label !== waitingFor) {
        waitingFor = label;
        await this.store.setWaiting(jobId, [label]);
      }
      await sleep(LEASE_RETRY_MS, signal);
    }
    if (waitingFor) await this.store.setWaiting(jobId, null);
    return false;
  }

  private queueFor(agentId: string): Queue {
    let queue = this.agentQueues.get(agentId);
    if (!queue) {
      queue = new Queue(this.keys.agentQueue(agentId), { connection: this.redis, prefix: this.keys.bull });
      this.agentQueues.set(agentId, queue);
    }
    return queue;
  }

  private async dispatch(agentId: string, task: Task): Promise<void> {
    await this.queueFor(agentId).add(task.role, task, { removeOnComplete: true, removeOnFail: true, attempts: 1 });
  }

  private async executeRun(job: Job, plan: PlannedRun, runId: string, targets: LeaseTarget[], signal: AbortSignal, jobLog: Logger, earlier: EarlierAttempt[]): Promise<Run> {
    const spec = job.spec;
    const t0 = Date.now();
    const run: Run = {
      id: runId, jobId: job.id, index: plan.index, point: plan.point, repetition: plan.repetition,
      status: 'running', startedAt: new Date(t0).toISOString(), finishedAt: null, flows: [], error: null,
      ...(earlier.length > 0 ? { attempt: earlier.length + 1, earlierAttempts: [...earlier] } : {}),
    };
    const log = jobLog.child({ runId: run.id, run: plan.index });
    await this.store.saveRun(run);
    const params = paramsAt(spec, plan.point);
    const deadline = t0 + (params.duration + this.config.setupSeconds) * 1000;
    const legs = legsOf(spec);
    const n = legs.length;
    const ready = new Map<number, ReadyReply>();
    const senders = new Map<number, EndReport>();
    const receivers = new Map<number, EndReport>();
    const onItem = (key: string, value: string) => {
      if (key === this.keys.runReady(run.id)) {
        const reply = JSON.parse(value) as ReadyReply;
        ready.set(reply.leg, reply);
      } else {
        const report = JSON.parse(value) as EndReport;
        (report.role === 'sender' ? senders : receivers).set(report.leg, report);
      }
    };
    const blocking = this.redis.duplicate();
    let failure: ErrorInfo | null = null;
    const leaseCount = this.leases.distinct(targets).length;
    const renew = setInterval(() => {
      this.leases.renew(run.id, targets).then(
        (held) => held < leaseCount && log.warn({ held, of: leaseCount }, 'lost an interface lease'),
        (error: unknown) => log.warn({ err: error }, 'lease renewal failed'),
      );
    }, this.leases.renewEveryMs);
    const involved = spec.flows.flatMap((f) => [f.from.agent, f.to.agent]);
    // An agent that dies mid-run (missed heartbeats, or stopped) ends the run at once as
    // agent_lost, rather than at its deadline; its peers' engines are then told to stop.
    let lost: string[] = [];
    const liveness = setInterval(() => {
      this.offlineAgents(involved).then(
        (offline) => {
          if (offline.length > 0 && lost.length === 0) {
            lost = offline;
            log.warn({ agents: offline }, 'agent lost mid-run');
          }
        },
        () => undefined, // Redis unreachable: the deadline still bounds the run
      );
    }, LIVENESS_CHECK_MS);
    try {
      const offline = await this.offlineAgents(involved);
      if (offline.length > 0) {
        failure = { code: 'agent_offline', message: `agent ${offline.join(', ')} is offline` };
      } else {
        log.info({ flows: spec.flows.length, legs: n, links: legs.map((l) => `${l.sender.agent}:${l.sender.interface}->${l.receiver.agent}:${l.receiver.interface}`), point: plan.point, repetition: plan.repetition }, 'run started');
        const base = { jobId: job.id, runId: run.id, engine: spec.engine, params, deadline, ...(spec.tuning ? { tuning: spec.tuning } : {}) };
        await Promise.all(legs.map((leg, i) => this.dispatch(leg.receiver.agent, { ...base, role: 'receiver', leg: i, interface: leg.receiver.interface } satisfies ReceiverTask)));
        // Receivers get half the setup allowance to start; the other half is the senders' margin.
        const setupDeadline = t0 + this.config.setupSeconds * 500;
        await collect(blocking, [this.keys.runReady(run.id), this.keys.runResults(run.id)], setupDeadline, signal, onItem, () => lost.length > 0 || legs.every((_, i) => ready.has(i) || receivers.has(i)));
        const notReady = legs.filter((_, i) => !ready.has(i) && !receivers.has(i));
        if (lost.length > 0) {
          // reported below
        } else if (!signal.aborted && notReady.length > 0) {
          failure = {
            code: 'peer_unavailable',
            message: notReady.map((leg) => `the receiver on agent ${leg.receiver.agent} (${leg.receiver.interface}) did not start within ${Math.round((setupDeadline - t0) / 1000)} s`).join('; '),
          };
        } else if (!signal.aborted) {
          const startAt = Date.now() + START_DELAY_MS;
          await Promise.all(
            legs.map((leg, i) => {
              const peer = ready.get(i);
              if (!peer) return Promise.resolve(); // its receiver already failed and reported
              return this.dispatch(leg.sender.agent, { ...base, role: 'sender', leg: i, interface: leg.sender.interface, peer: { address: peer.address, port: peer.port }, startAt } satisfies SenderTask);
            }),
          );
          const expected = legs.filter((_, i) => ready.has(i)).length;
          await collect(blocking, [this.keys.runResults(run.id)], deadline + REPORT_GRACE_MS, signal, onItem, () => lost.length > 0 || (senders.size >= expected && receivers.size >= n));
        }
        if (lost.length > 0) {
          // A stopping agent reports its ends (agent_shutdown) before it deregisters: read the
          // reports already there, so the run names that cause rather than agent_lost.
          const results = this.keys.runResults(run.id);
          let item: string | null;
          while ((item = await this.redis.lpop(results))) onItem(results, item);
          const shutdown = [...senders.values(), ...receivers.values()].find((report) => report.error?.code === 'agent_shutdown')?.error;
          failure = shutdown ?? { code: 'agent_lost', message: `agent ${lost.join(', ')} stopped answering during the run (no heartbeat for ${MISSED_HEARTBEATS} intervals, or it shut down)` };
        }
      }
    } finally {
      clearInterval(liveness);
      clearInterval(renew);
      blocking.disconnect();
    }
    run.flows = legs.map((leg, i) => flowResult(spec.flows[leg.flowIndex]!, leg, senders.get(i), receivers.get(i)));
    run.flows.forEach((flow, i) => {
      for (const [end, report] of [['sender', senders.get(i)], ['receiver', receivers.get(i)]] as const) {
        const diagnostics = flow.diagnostics[end];
        if (report?.rawKept && diagnostics) diagnostics.rawOutput = `/v1/jobs/${run.jobId}/runs/${run.index}/flows/${i}/${end}/raw`;
      }
    });
    run.finishedAt = new Date().toISOString();
    const reason = signal.reason as ErrorInfo | undefined;
    if (reason?.code === SHUTDOWN) {
      run.status = 'queued';
      run.error = { code: SHUTDOWN, message: 'interrupted by a coordinator shutdown; it runs again when the job resumes' };
    } else if (signal.aborted) {
      run.status = 'canceled';
      run.error = { code: reason?.code ?? 'canceled', message: reason?.message ?? 'The job was canceled.' };
    } else {
      run.error = failure ?? pickError(run.flows.map((f) => f.error));
      run.status = run.error ? 'failed' : 'succeeded';
    }
    if (run.status !== 'succeeded') await this.abandon(run);
    await this.store.saveRun(run);
    log.info({ outcome: run.status, error: run.error?.code, bitsPerSecond: run.flows.map((f) => f.bitsPerSecond) }, 'run finished');
    return run;
  }

  private async offlineAgents(ids: string[]): Promise<string[]> {
    const unique = [...new Set(ids)];
    const agents = await Promise.all(unique.map((id) => this.registry.get(id)));
    return unique.filter((_, i) => !agents[i]?.online);
  }

  /** Tells every agent to end this run's engine processes, and keeps queued tasks of it from starting. */
  private async abandon(run: Run): Promise<void> {
    await this.redis.set(this.keys.runAbandoned(run.id), '1', 'EX', ABANDONED_TTL_SECONDS);
    await this.redis.publish(this.keys.cancelChannel, JSON.stringify({ runId: run.id, code: run.error?.code ?? 'canceled', message: run.error?.message }));
  }
}
