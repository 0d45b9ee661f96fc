import { randomUUID } from 'node:crypto';
import { DelayedError, Queue, Worker, type Job as BullJob } from 'bullmq';
import type { Redis } from 'ioredis';
import { AgentRegistry } from '@niclab/shared/stores/agent-registry';
import { MetricStore } from '@niclab/shared/stores/metric-store';
import { AGENT_QUEUE_EVENTS } from '@niclab/shared/stores/keys';
import { estimateRetention, storeRetention, type RetentionEstimate } from '@niclab/shared/stores/retention-estimate';
import { campaignOf, strategyFor } from '@niclab/shared/domain/campaigns/index';
import { CancelBus } from '@niclab/shared/stores/cancel-bus';
import type { Config } from '@niclab/shared/runtime/config';
import { isFinished, TERMINAL_STATUSES, type ErrorInfo, type Job, type JobSpec, type Run, type SweepPoint } from '@niclab/shared/domain/contract';
import { sysctlHosts } from '@niclab/shared/domain/end-tuning';
import type { JobStore } from '@niclab/shared/stores/job-store';
import { holdsJobLock, jobStore, type JobMessage } from '@niclab/shared/stores/job-queue';
import type { ChangeStore } from '@niclab/shared/stores/changes';
import type { Results } from '@niclab/shared/stores/results';
import { Keys } from '@niclab/shared/stores/keys';
import { Leases, type LeaseTarget } from '@niclab/shared/stores/leases';
import { waitForReplicas } from '@niclab/shared/stores/replication';
import type { Logger } from '@niclab/shared/runtime/logger';
import { runSpec, type PlannedRun } from '@niclab/shared/domain/plan';
import { jobFinding } from '@niclab/shared/domain/finding';
import { createRedis } from '@niclab/shared/runtime/redis';
import { RetryPolicy } from './retry-policy.js';
import { RedisGaps } from './liveness-watch.js';
import { RunExecution, type RunDeps } from './run-execution.js';
import { JOB_LOST, SHUTDOWN } from './run-outcome.js';

/** How often a job waiting for interface leases tries again. */
const LEASE_RETRY_MS = 200;
/** What a job waits for while its lease grants reach too few Redis replicas (`waitingFor`). */
const REPLICAS_LABEL = 'Redis replicas (the lease grant is not on enough of them yet)';
/** How often a coordinator deletes what retention no longer keeps. */
const RETENTION_SWEEP_MS = 10 * 60 * 1000;
const DAY_MS = 24 * 3600 * 1000;
/** How often a coordinator estimates the Redis memory retention implies, for /metrics (stores/retention-estimate.ts). */
const RETENTION_ESTIMATE_MS = 60_000;
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

/** How long stop() lets a worker still connecting finish before closing it. */
const WORKER_READY_ON_STOP_MS = 3000;

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
  private readonly results: Results;
  private readonly changes: ChangeStore;
  private readonly registry: AgentRegistry;
  private readonly leases: Leases;
  private readonly cancels: CancelBus;
  private readonly runDeps: RunDeps;
  private readonly agentQueues = new Map<string, Queue>();
  private readonly active = new Map<string, AbortController>();
  private readonly idleBlocking: Redis[] = [];
  private stopped = false;
  private worker: Worker | undefined;
  private workerConnection: Redis | undefined;
  private retentionTimer: NodeJS.Timeout | undefined;
  private pruneTimer: NodeJS.Timeout | undefined;
  private estimateTimer: NodeJS.Timeout | undefined;
  private readonly metricStore: MetricStore;
  /** WAIT blocks its connection: the lease grants' own, when grants must reach replicas (NICLAB_REDIS_WAIT_REPLICAS). */
  private readonly replicaWaiter: Redis | null;

  constructor(private readonly config: Config & { redisUrl: string }, private readonly log: Logger, private readonly concurrency = 8) {
    this.keys = new Keys(config.prefix);
    this.redis = createRedis(config.redisUrl, { patient: true, name: 'niclab-coordinator' });
    this.subscriber = createRedis(config.redisUrl, { blocking: true, name: 'niclab-coordinator-sub' });
    ({ store: this.store, results: this.results, changes: this.changes } = jobStore(this.redis, this.keys, config.changes));
    this.registry = new AgentRegistry(this.redis, this.keys);
    this.metricStore = new MetricStore(this.redis, this.keys);
    this.leases = new Leases(this.redis, this.keys);
    this.replicaWaiter = config.redisWaitReplicas > 0 ? createRedis(config.redisUrl, { patient: true, name: 'niclab-coordinator-wait' }) : null;
    this.cancels = new CancelBus(this.redis, this.keys);
    this.runDeps = {
      redis: this.redis, redisGaps: new RedisGaps(this.redis), keys: this.keys, store: this.store, registry: this.registry, leases: this.leases, cancels: this.cancels,
      queueFor: (agentId) => this.queueFor(agentId), setupSeconds: config.setupSeconds,
      // Runs block on connections of their own; kept between runs, so a run does not wait for a new one to connect.
      borrowBlocking: () => this.idleBlocking.pop() ?? this.redis.duplicate(),
      returnBlocking: (connection) => void (this.stopped ? connection.disconnect() : this.idleBlocking.push(connection)),
    };
  }

  async start(): Promise<void> {
    const moved = await this.results.migrate();
    if (moved > 0) this.log.info({ summaries: moved }, 'history moved to the indexed layout');
    await this.cancels.listen(this.subscriber, (message) => {
      if ('jobId' in message) this.active.get(message.jobId)?.abort({ code: 'canceled', message: 'The job was canceled.' });
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
    await this.warnRetention();
    this.retentionTimer = setInterval(sweep, RETENTION_SWEEP_MS).unref();
    this.estimateTimer = setInterval(() => void this.estimateRetention().catch((error: Error) => this.log.warn({ err: error }, 'retention estimate failed')), RETENTION_ESTIMATE_MS).unref();
    if (this.config.agentPruneSeconds > 0) {
      // Often enough that an agent goes within a sixth of the prune time of its due (at most a minute late).
      const every = Math.min(60_000, Math.max(1000, (this.config.agentPruneSeconds * 1000) / 6));
      this.pruneTimer = setInterval(() => void this.pruneAgents().catch((error: Error) => this.log.warn({ err: error }, 'agent prune failed')), every).unref();
    }
  }

  /**
   * Warns, at start, when what the retention settings imply at the measured run rate
   * (stores/retention-estimate.ts, also /metrics's niclab_redis_retention_implied_bytes) is more
   * than Redis's maxmemory: Redis would refuse writes (noeviction) or evict queue keys before
   * retention deletes anything.
   */
  async warnRetention(): Promise<RetentionEstimate | null> {
    const estimate = await this.estimateRetention().catch(() => null);
    if (estimate && estimate.maxmemory > 0 && estimate.bytes > estimate.maxmemory) {
      const mib = (bytes: number) => Math.round(bytes / 2 ** 20);
      this.log.warn(
        { impliedBytes: estimate.bytes, parts: estimate.parts, runsPerDay: Math.round(estimate.runsPerDay), maxmemory: estimate.maxmemory },
        `the retention settings imply ${mib(estimate.bytes)} MiB of Redis at ${Math.round(estimate.runsPerDay)} runs a day, more than its maxmemory of ${mib(estimate.maxmemory)} MiB: lower NICLAB_RETENTION_DAYS, NICLAB_RETENTION_JOBS or NICLAB_RESULTS_RETENTION_DAYS, or raise maxmemory`,
      );
    }
    return estimate;
  }

  /**
   * Estimates what the retention settings imply and stores it for /metrics: one key every API
   * replica reads, so their scrapes agree (each replica estimating at its own time did not),
   * and no scrape waits for the few dozen MEMORY USAGE reads. Any coordinator may store it.
   */
  async estimateRetention(now = Date.now()): Promise<RetentionEstimate> {
    const estimate = await estimateRetention(this.redis, this.keys, this.config, AGENT_QUEUE_EVENTS, now);
    await storeRetention(this.redis, this.keys, estimate);
    return estimate;
  }

  /**
   * Drops the agents offline for NICLAB_AGENT_PRUNE_HOURS (an agent stopped, or a host gone):
   * their records and interfaces, the links measured to or from them, and their task queues'
   * keys. Without it every agent that ever ran stayed in the inventory, each interface a series
   * in every scrape and every submission's read. Any number of coordinators may prune at once.
   */
  async pruneAgents(now = Date.now()): Promise<string[]> {
    const gone = await this.registry.prune(now - this.config.agentPruneSeconds * 1000);
    if (gone.length === 0) return gone;
    const links = await this.metricStore.dropAgents(gone);
    for (const id of gone) {
      // Every key of its task queue, its tasks' own included (no task lives on a gone agent's queue).
      const queue = this.queueFor(id);
      await queue.obliterate({ force: true });
      await queue.close();
      this.agentQueues.delete(id);
    }
    this.log.info({ agents: gone, links }, 'agents gone past NICLAB_AGENT_PRUNE_HOURS pruned');
    return gone;
  }

  /**
   * Deletes finished jobs past NICLAB_RETENTION_DAYS or beyond NICLAB_RETENTION_JOBS (runs and
   * raw output with them), and run summaries and change points past
   * NICLAB_RESULTS_RETENTION_DAYS (a change point by when it was found). Any number of
   * coordinators may sweep at once: deleting twice is harmless.
   */
  async sweepRetention(now = Date.now()): Promise<{ jobs: number; summaries: number; changes: number }> {
    let jobs = 0;
    for (;;) {
      const ids = await this.store.expired(now - this.config.retentionDays * DAY_MS, this.config.retentionJobs);
      for (const id of ids) await this.store.delete(id);
      jobs += ids.length;
      if (ids.length < 500) break;
    }
    const summaries = await this.results.expire(now - this.config.resultsRetentionDays * DAY_MS);
    const changes = await this.changes.expire(now - this.config.resultsRetentionDays * DAY_MS);
    if (jobs || summaries || changes) this.log.info({ jobs, summaries, changes }, 'retention: deleted');
    return { jobs, summaries, changes };
  }

  async stop(): Promise<void> {
    clearInterval(this.retentionTimer);
    clearInterval(this.estimateTimer);
    clearInterval(this.pruneTimer);
    for (const controller of this.active.values()) controller.abort(SHUTDOWN);
    // A worker closed while its connections still initialise (a Ctrl-C during start-up) crashes
    // the process: BullMQ drops its listeners, then the init our disconnect cuts short emits an
    // 'error' no one hears (an unhandled rejection; CI at 04e5a29). Let it finish first, bounded.
    if (this.worker) await Promise.race([this.worker.waitUntilReady().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, WORKER_READY_ON_STOP_MS).unref())]);
    await this.worker?.close();
    this.workerConnection?.disconnect();
    await Promise.all([...this.agentQueues.values()].map((queue) => queue.close()));
    this.stopped = true;
    for (const connection of this.idleBlocking.splice(0)) connection.disconnect();
    this.subscriber.disconnect();
    this.replicaWaiter?.disconnect();
    await this.redis.quit().catch(() => undefined);
  }

  /**
   * Runs a job to its end: asks its campaign strategy for the next run until there is none.
   * Safe to call again for a job whose coordinator died: finished runs are kept. A coordinator
   * that stops mid-job puts the job back in the queue for another.
   */
  async processJob(jobId: string, bullJob?: BullJob<JobMessage>, token?: string): Promise<void> {
    // Its runs are read with it (one round trip), though a job already ended needs none of them.
    const [job, stored] = await Promise.all([this.store.get(jobId), this.store.listRuns(jobId)]);
    if (!job || TERMINAL_STATUSES.includes(job.status)) return;
    const log = this.log.child({ jobId });
    const controller = new AbortController();
    this.active.set(jobId, controller);
    const fence = this.holdOn(jobId, token, controller);
    try {
      const strategy = strategyFor(job.spec);
      const finished = new Map(stored.filter(isFinished).map((r) => [r.index, r]));
      // A run still `running` was under a coordinator that died without stopping: it is made
      // again, and the lost attempt is kept in the new one's record.
      const lostWithCoordinator = new Map(stored.filter((r) => r.status === 'running').map((r) => [r.index, r]));
      log.info({ runs: strategy.expectedRuns(finished), resumedAt: finished.size, ...(lostWithCoordinator.size > 0 ? { interruptedRuns: [...lostWithCoordinator.keys()] } : {}) }, 'job started');
      // The job moves to running once, when its first run holds its leases (a round's runs race
      // for it). Found running already, it goes on: a failover can hand BullMQ's job to this
      // coordinator again while its earlier take (which the fence stops) moved it.
      let started: Promise<boolean> | undefined;
      let startedAt: string | undefined;
      const moveToRunning = async () => (await this.store.transition(jobId, ['queued'], 'running', { startedAt: (startedAt = new Date().toISOString()) })) || (await this.store.status(jobId)) === 'running';
      const start = () => (started ??= moveToRunning());
      const nextRound = () => strategy.nextRound?.(finished) ?? [strategy.next(finished)].filter((plan): plan is PlannedRun => plan !== null);
      for (let round = nextRound(); round.length > 0; round = nextRound()) {
        const ranBefore = finished.size > 0;
        const runs = await Promise.all(round.map((plan) => this.attempts(job, plan, { retry: new RetryPolicy(job.spec.retries ?? 0, lostWithCoordinator.get(plan.index)), ranBefore, start, fence, signal: controller.signal, log })));
        // A run stopped before it started, or by a shutdown, is made again on resume.
        const kept = runs.filter((run): run is Run => run !== null && run.status !== 'interrupted');
        for (const run of kept) finished.set(run.index, run);
        if (kept.length > 0) await this.store.setProgress(jobId, finished.size, strategy.expectedRuns(finished));
        if (kept.length < runs.length) break;
      }
      if ((controller.signal.reason as ErrorInfo | undefined)?.code === SHUTDOWN.code && bullJob && token) {
        log.info({ runsDone: finished.size }, 'job interrupted by shutdown; back in the queue');
        await bullJob.moveToDelayed(Date.now(), token);
        throw new DelayedError();
      }
      if (controller.signal.aborted || !(await fence())) return; // canceled by the API, or another coordinator has it
      // Runs still to make (one could not start): the job is not ended on the runs it has; BullMQ takes it again.
      if (nextRound().length > 0) throw new Error(`job ${jobId} stopped with runs still to make; it is taken again`);
      await this.finish(job, finished, strategy.outcome(finished), log, startedAt);
    } finally {
      this.active.delete(jobId);
    }
  }

  /**
   * One planned run, made again while the retry policy says so. Each attempt waits for its
   * interface leases in turn (first come first served) and releases them.
   * Null when the job was canceled or stopped before an attempt could start.
   */
  private async attempts(job: Job, plan: PlannedRun, { retry, ranBefore, start, fence, signal, log }: { retry: RetryPolicy; ranBefore: boolean; start: () => Promise<boolean>; fence: () => Promise<boolean>; signal: AbortSignal; log: Logger }): Promise<Run | null> {
    let run: Run | null = null;
    for (;;) {
      const runId = randomUUID();
      const targets = await this.leaseTargets(runSpec(job.spec, plan), plan.point);
      // First come first served: a job's first run waits from its submission, a later run (or
      // attempt) from now, behind the jobs already waiting. So jobs that share interfaces take
      // turns run by run: two campaigns submitted together alternate (A B A B), and a drift of
      // the machine falls on both alike.
      const submitted = Date.parse(job.createdAt);
      const since = run || ranBefore || !Number.isFinite(submitted) ? Date.now() : submitted;
      if (!(await this.waitForLeases(job.id, runId, targets, since, signal))) return run;
      try {
        // A job waiting for its first run's leases is still queued; it runs once it holds them.
        if (job.status === 'queued') {
          if (!(await start())) return null;
          job.status = 'running';
        }
        // Nothing starts for a job this coordinator no longer holds (it stalled past its lock).
        if (!(await fence())) return run;
        run = await new RunExecution(this.runDeps, job, { plan, runId, targets, earlier: retry.earlier, fence }, log).execute(signal);
      } finally {
        await this.leases.release(runId, targets);
      }
      if (!retry.again(run)) return run;
      log.info({ run: plan.index, attempt: retry.earlier.length + 1, after: run.error?.code }, 'run made again');
    }
  }

  /** The job ends as its campaign judges its runs (every run must succeed, a search must conclude, a group must measure a pair). */
  private async finish(job: Job, finished: ReadonlyMap<number, Run>, error: ErrorInfo | null, log: Logger, startedAt?: string): Promise<void> {
    // A Redis failover loses what the old master had acknowledged but not yet passed to its
    // replica: a run's record among them, which would leave a job ended on the new master
    // without it (the failover test saw a job succeed with no run). What this coordinator
    // holds is stored again before the job ends; a lost record takes with it everything written
    // after it on the same connection (its history, its counts), so nothing is counted twice.
    const stored = new Set((await this.store.listRuns(job.id)).map((run) => run.index));
    const lost = [...finished.values()].filter((run) => !stored.has(run.index));
    for (const run of lost) await this.store.saveRun(run);
    if (lost.length > 0) log.warn({ runs: lost.map((run) => run.index) }, 'runs whose record Redis lost (a failover) stored again');
    const finishedAt = new Date().toISOString();
    const { pairs } = campaignOf(job.spec).jobEnd(job.spec, finished.values());
    const status = error ? 'failed' : 'succeeded';
    let finding: Job['finding'] = null;
    try {
      finding = jobFinding({ ...job, status, ...(pairs ? { pairs } : {}) }, [...finished.values()]);
    } catch (error) {
      // The job's end is not held up by its one-line summary: the report has the figures.
      log.error({ err: error }, 'what the job found could not be worked out');
    }
    const end = { finishedAt, error, pairs, finding };
    let ended = await this.store.transition(job.id, ['running'], status, end);
    if (!ended && (await this.store.status(job.id)) === 'queued') {
      // The job's move to running is not waited for (no WAIT): a failover can lose it while
      // keeping BullMQ's take and the lease grant (waited for just before it), so the job is
      // queued on the new master though this coordinator, which still holds it (the fence before
      // this), made every run. Ended only from running, it stayed queued for good: BullMQ
      // completed its entry, and nothing takes a queued job without one (the failover test at
      // NICLAB_FAILOVER_LAG_MS=400: 4 jobs in 5 runs, each run started under 350 ms before the
      // kill). Nothing moves a job back to queued, so here that is the lost move; a cancel
      // meanwhile (queued to canceled) still wins. The writes just before the move went with it
      // (the lease wait's end among them), and its start is this take's, or its first run's.
      const firstRun = [...finished.values()].map((run) => run.earlierAttempts?.[0]?.startedAt ?? run.startedAt).filter((at): at is string => !!at).sort()[0];
      const at = startedAt ?? firstRun ?? finishedAt;
      await this.store.setWaiting(job.id, null);
      ended = await this.store.transition(job.id, ['queued'], status, { ...end, startedAt: at });
      if (ended) log.warn({ startedAt: at }, "the job's move to running was lost with Redis's old master: ended from queued");
    }
    if (!ended) {
      log.warn({ status: await this.store.status(job.id), outcome: status }, 'job not ended by its runs: its status had moved on (a cancel)');
      return;
    }
    const failedRuns = [...finished.values()].filter((r) => r.status === 'failed').length;
    log.info({ outcome: error ? 'failed' : 'succeeded', failedRuns, ...(pairs ? { pairsMeasured: pairs.measured, pairsFailed: pairs.failed } : {}) }, 'job finished');
  }

  /**
   * Whether this worker still holds the job's BullMQ lock (its token is the lock's value). A
   * coordinator whose event loop stalled past the lock (15 s) may find another has taken the
   * job meanwhile: it then aborts the job with JOB_LOST and stores nothing more, no run, no
   * end, so the job is run and recorded once, by the one that holds it. Without a token (a
   * direct call) it always holds it.
   */
  private holdOn(jobId: string, token: string | undefined, controller: AbortController): () => Promise<boolean> {
    if (!token) return async () => true;
    return async () => {
      if (controller.signal.reason === JOB_LOST) return false;
      if (await holdsJobLock(this.redis, this.keys, jobId, token)) return true;
      this.log.warn({ jobId }, 'this coordinator lost its hold on the job: another has it');
      controller.abort(JOB_LOST);
      return false;
    };
  }

  /**
   * The interfaces a run leases: both ends of every flow. Tuned sysctls change a whole host
   * (its network namespace), so a run also leases every interface of each agent whose end sets
   * sysctls in it (a factorial's cell may set them at one end only): no other run on those hosts
   * overlaps it, before or after.
   */
  private async leaseTargets(spec: JobSpec, point: SweepPoint): Promise<LeaseTarget[]> {
    const ends: LeaseTarget[] = spec.flows.flatMap((f) => [f.from, f.to]);
    const agents = sysctlHosts(spec, point);
    if (agents.length === 0) return ends;
    const records = await Promise.all(agents.map((id) => this.registry.get(id)));
    return [...ends, ...records.flatMap((agent, i) => (agent?.interfaces ?? []).map((iface) => ({ agent: agents[i]!, interface: iface.name })))];
  }

  /** Waits until the run holds a lease on every interface it touches; false when the job was canceled first. */
  private async waitForLeases(jobId: string, runId: string, targets: LeaseTarget[], since: number, signal: AbortSignal): Promise<boolean> {
    let waitingFor: string | null = null;
    // Its places are kept 3 s without its asking again (every 200 ms): a stalled event loop or
    // a Redis reconnect of a second does not lose them; a coordinator gone for good does.
    const waiter = { job: jobId, since, stayMs: LEASE_RETRY_MS * 15 };
    let held = false;
    try {
      while (!signal.aborted) {
        const blocked = await this.leases.acquire(runId, targets, waiter);
        if (!blocked && (await this.grantReplicated(targets[0]!))) return (held = true);
        // A grant no replica confirmed is let go: after a failover the new master would not
        // know it, and another coordinator could grant the same interface to a second run.
        if (!blocked) await this.leases.release(runId, targets);
        const label = blocked ? `${blocked.target.agent}:${blocked.target.interface}` : REPLICAS_LABEL;
        if (label !== waitingFor) {
          waitingFor = label;
          await this.store.setWaiting(jobId, [label]);
        }
        await sleep(LEASE_RETRY_MS, signal);
      }
      return false;
    } finally {
      if (!held) await this.leases.leave(jobId, targets).catch(() => undefined);
      if (waitingFor) await this.store.setWaiting(jobId, null);
    }
  }

  /** Whether the lease grant just made (on `target` among others) reached the replicas it must be on (always, without WAIT). */
  private async grantReplicated(target: LeaseTarget): Promise<boolean> {
    if (!this.replicaWaiter) return true;
    const { redisWaitReplicas: replicas, redisWaitMs: timeoutMs } = this.config;
    const confirmed = await waitForReplicas(this.replicaWaiter, this.keys, replicas, timeoutMs, ['lease', target.agent, target.interface]).catch(() => 0);
    if (confirmed < replicas) this.log.warn({ confirmed, replicas, timeoutMs }, 'a lease grant reached too few Redis replicas: let go, asked again');
    return confirmed >= replicas;
  }

  private queueFor(agentId: string): Queue {
    let queue = this.agentQueues.get(agentId);
    if (!queue) {
      queue = new Queue(this.keys.agentQueue(agentId), { connection: this.redis, prefix: this.keys.bull, streams: { events: { maxLen: AGENT_QUEUE_EVENTS } } });
      this.agentQueues.set(agentId, queue);
    }
    return queue;
  }
}
