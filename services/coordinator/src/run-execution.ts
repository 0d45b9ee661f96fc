import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { AgentRegistry } from '@niclab/shared/stores/agent-registry';
import type { CancelBus } from '@niclab/shared/stores/cancel-bus';
import type { EngineName, ErrorInfo, Job, JobSpec, Run } from '@niclab/shared/domain/contract';
import type { JobStore } from '@niclab/shared/stores/job-store';
import type { Keys } from '@niclab/shared/stores/keys';
import type { Leases, LeaseTarget } from '@niclab/shared/stores/leases';
import type { Logger } from '@niclab/shared/runtime/logger';
import { legsOf, paramsAt, runSpec, type PlannedRun } from '@niclab/shared/domain/plan';
import { endTuningAt } from '@niclab/shared/domain/end-tuning';
import { flowSpec, runSeconds, startDelaySeconds } from '@niclab/shared/domain/flow-tests';
import { fileSeconds } from '@niclab/shared/domain/file-io/spec';
import { RunChannel, type RunSink } from '@niclab/shared/stores/run-channel';
import type { EndReport, ReadyReply, ReceiverTask, SenderTask, Task } from '@niclab/shared/domain/task';
import { flowResult } from './flow-result.js';
import { kindOf } from '@niclab/shared/domain/test-kinds/index';
import { LeaseKeeper } from './lease-keeper.js';
import { LivenessWatch, offlineAgents, type RedisGaps } from './liveness-watch.js';
import type { EarlierAttempt } from './retry-policy.js';
import { JOB_LOST, runOutcome } from './run-outcome.js';

/** The common start instant is this far after the last receiver is ready, so every sender is connected by then. */
const START_DELAY_MS = 300;
/** A sender that failed with one of these never sent: its run ends at once. */
const SENDER_NEVER_SENT = new Set(['path_mtu', 'file_refused']);
/** Reports of ends killed at the deadline need a moment to arrive. */
const REPORT_GRACE_MS = 2000;

/** What a run's execution works with: the coordinator's stores, connections and agents' queues. */
export interface RunDeps {
  redis: Redis;
  /** What `redis`'s own events say of its gaps, read by every run's liveness watch. */
  redisGaps: RedisGaps;
  keys: Keys;
  store: JobStore;
  registry: AgentRegistry;
  leases: Leases;
  cancels: CancelBus;
  /** The task queue of one agent. */
  queueFor(agentId: string): Queue;
  /** A connection of the run's own to block on while it collects replies, handed back when the run ends. */
  borrowBlocking(): Redis;
  returnBlocking(connection: Redis): void;
  setupSeconds: number;
}

/**
 * One run of a job, from its record to its result: receivers started first, senders at a
 * common start instant once every receiver listens, both ends' reports gathered into flows.
 * The caller holds the run's leases; this keeps them renewed and watches the run's agents.
 */
export class RunExecution {
  private readonly run: Run;
  private readonly channel: RunChannel;
  private readonly legs;
  /** What this run carries out: the job's spec, or a group's one pair. */
  private readonly spec: JobSpec;
  private readonly ready = new Map<number, ReadyReply>();
  private readonly senders = new Map<number, EndReport>();
  private readonly receivers = new Map<number, EndReport>();
  private readonly log: Logger;
  /** The group pair this run measures (its index in the job's flows), if the job is a group. */
  private readonly pair: number | undefined;
  private readonly sink: RunSink = {
    ready: (reply) => void this.ready.set(reply.leg, reply),
    report: (report) => {
      (report.role === 'sender' ? this.senders : this.receivers).set(report.leg, report);
      // A sender that found the path does not carry the run's MTU, or could not use its source
      // file, never sends: its receiver would wait out the run for nothing, so the run ends now
      // (the receiver reports canceled).
      if (report.role === 'sender' && SENDER_NEVER_SENT.has(report.error?.code ?? '') && !this.abandoned) {
        this.abandoned = true;
        void this.abandon().catch((error: Error) => this.log.warn({ err: error }, 'ending the run after its path MTU failed'));
      }
    },
  };
  private abandoned = false;

  private readonly targets: LeaseTarget[];
  /** Whether this coordinator still holds the job: a result is stored only while it does. */
  private readonly fence: () => Promise<boolean>;

  /** One attempt at `plan`'s run: its id, the leases it holds, and the attempts before it. */
  constructor(
    private readonly deps: RunDeps,
    private readonly job: Job,
    { plan, runId, targets, earlier, fence }: { plan: PlannedRun; runId: string; targets: LeaseTarget[]; earlier: EarlierAttempt[]; fence?: () => Promise<boolean> },
    jobLog: Logger,
  ) {
    this.fence = fence ?? (async () => true);
    this.targets = targets;
    this.run = {
      id: runId, jobId: job.id, index: plan.index, point: plan.point, repetition: plan.repetition, ...(plan.duration !== undefined ? { duration: plan.duration } : {}), ...(plan.latencyAt !== undefined ? { latencyAt: plan.latencyAt } : {}),
      status: 'running', startedAt: new Date().toISOString(), finishedAt: null, flows: [], error: null,
      ...(earlier.length > 0 ? { attempt: earlier.length + 1, earlierAttempts: [...earlier] } : {}),
    };
    this.channel = new RunChannel(deps.redis, deps.keys, runId);
    this.spec = runSpec(job.spec, plan);
    this.pair = plan.pair;
    this.legs = legsOf(this.spec, plan.point);
    this.log = jobLog.child({ runId, run: plan.index });
  }

  /** Runs it to its end and stores the result. `jobSignal` aborts on cancel or coordinator shutdown. */
  async execute(jobSignal: AbortSignal): Promise<Run> {
    const { run, spec } = this;
    const t0 = Date.parse(run.startedAt!);
    const involved = spec.flows.flatMap((f) => [f.from.agent, f.to.agent]);
    // The run's record and the check of its agents go to Redis together: one round trip before the receivers.
    const [, offline] = await Promise.all([this.deps.store.saveRun(run), offlineAgents(this.deps.registry, involved)]);
    const keeper = new LeaseKeeper(this.deps.leases, run.id, this.targets, this.log).start();
    const liveness = new LivenessWatch(this.deps.registry, involved, this.log, this.deps.redisGaps).start();
    const signal = AbortSignal.any([jobSignal, liveness.signal]);
    const blocking = this.deps.borrowBlocking();
    let failure: ErrorInfo | null = null;
    try {
      if (offline.length > 0) failure = { code: 'agent_offline', message: `agent ${offline.join(', ')} is offline` };
      else failure = await this.measure(blocking, signal, t0);
      if (liveness.signal.aborted) {
        // A stopping agent reports its ends (agent_shutdown) before it deregisters: read the
        // reports already there, so the run names that cause rather than agent_lost.
        await this.channel.drainReports(this.sink);
        const shutdown = [...this.senders.values(), ...this.receivers.values()].find((report) => report.error?.code === 'agent_shutdown')?.error;
        failure = shutdown ?? (liveness.signal.reason as ErrorInfo);
      }
    } finally {
      liveness.stop();
      keeper.stop();
      this.deps.returnBlocking(blocking);
    }
    // A group's run measures one pair: its flows carry that pair's index in the job's flows.
    run.flows = this.legs.map((leg, i) => ({
      ...flowResult(kindOf(flowSpec(spec, leg.flowIndex)), spec.flows[leg.flowIndex]!, leg, this.senders.get(i), this.receivers.get(i), this.wire(leg.flowIndex)),
      flowIndex: this.pair ?? leg.flowIndex,
    }));
    run.flows.forEach((flow, i) => {
      for (const [end, report] of [['sender', this.senders.get(i)], ['receiver', this.receivers.get(i)]] as const) {
        const diagnostics = flow.diagnostics[end];
        if (report?.rawKept && diagnostics) diagnostics.rawKept = true;
      }
    });
    run.finishedAt = new Date().toISOString();
    Object.assign(run, runOutcome(run.flows, jobSignal.aborted ? (jobSignal.reason as ErrorInfo) : null, failure, this.deps.redisGaps.since(t0)));
    if (run.status !== 'succeeded') await this.abandon();
    // A coordinator that lost the job (stalled past its lock) stores nothing: the one that has
    // it now makes this run again, and its record is the run's.
    if (!(await this.fence())) {
      this.log.warn({ outcome: run.status }, 'run not kept: another coordinator has the job');
      return { ...run, status: 'interrupted', error: JOB_LOST };
    }
    await this.deps.store.saveRun(run);
    this.log.info({ outcome: run.status, error: run.error?.code, bitsPerSecond: run.flows.map((f) => f.bitsPerSecond) }, 'run finished');
    return run;
  }

  /** Receivers, then senders; gathers every report. Returns what failed around the flows, if anything. */
  private async measure(blocking: Redis, signal: AbortSignal, t0: number): Promise<ErrorInfo | null> {
    const { job, run, legs, spec } = this;
    // A file point's ends measure their disks after the transfer: their time is the run's too.
    const deadline = t0 + (runSeconds(spec) + fileSeconds(spec, run.point) + this.deps.setupSeconds) * 1000;
    this.log.info({ flows: spec.flows.length, legs: legs.length, links: legs.map((l) => `${l.sender.agent}:${l.sender.interface}->${l.receiver.agent}:${l.receiver.interface}`), point: run.point, repetition: run.repetition }, 'run started');
    // Each flow runs its own test with its own engine (stream flows beside an rr flow, latency under load).
    const base = legs.map((leg) => ({ jobId: job.id, runId: run.id, engine: flowSpec(spec, leg.flowIndex).engine, params: paramsAt(spec, run.point, leg.flowIndex), deadline }));
    // Each end its own tuning: the shorthand merged with its role's block (a factorial's cell may leave a role out).
    const tuning = { sender: endTuningAt(spec, run.point, 'sender'), receiver: endTuningAt(spec, run.point, 'receiver') };
    // A sender proves the path when either end sets an MTU: a receiver's alone changes what the path carries too.
    const senderTuning = { ...(tuning.sender ? { tuning: tuning.sender } : {}), ...(tuning.receiver?.mtu !== undefined ? { peerMtu: tuning.receiver.mtu } : {}) };
    await Promise.all(legs.map((leg, i) => this.dispatch(leg.receiver.agent, { ...base[i]!, ...(tuning.receiver ? { tuning: tuning.receiver } : {}), role: 'receiver', leg: i, interface: leg.receiver.interface } satisfies ReceiverTask)));
    // Receivers get half the setup allowance to start; the other half is the senders' margin.
    const setupDeadline = t0 + this.deps.setupSeconds * 500;
    const started = (i: number) => this.ready.has(i) || this.receivers.has(i);
    await this.channel.collect(blocking, { ready: true }, setupDeadline, signal, this.sink, () => legs.every((_, i) => started(i)));
    if (signal.aborted) return null;
    const notReady = legs.filter((_, i) => !started(i));
    if (notReady.length > 0) {
      const message = notReady.map((leg) => `the receiver on agent ${leg.receiver.agent} (${leg.receiver.interface}) did not start within ${Math.round((setupDeadline - t0) / 1000)} s`).join('; ');
      return { code: 'peer_unavailable', message };
    }
    const startAt = Date.now() + START_DELAY_MS;
    await Promise.all(
      legs.map((leg, i) => {
        const peer = this.ready.get(i);
        if (!peer) return Promise.resolve(); // its receiver already failed and reported
        const legStart = startAt + startDelaySeconds(spec, leg.flowIndex) * 1000;
        return this.dispatch(leg.sender.agent, { ...base[i]!, ...senderTuning, role: 'sender', leg: i, interface: leg.sender.interface, peer: { address: peer.address, port: peer.port }, startAt: legStart } satisfies SenderTask);
      }),
    );
    const expected = legs.filter((_, i) => this.ready.has(i)).length;
    await this.channel.collect(blocking, { ready: false }, deadline + REPORT_GRACE_MS, signal, this.sink, () => this.senders.size >= expected && this.receivers.size >= legs.length);
    return null;
  }

  private async dispatch(agentId: string, task: Task): Promise<void> {
    await this.deps.queueFor(agentId).add(task.role, task, { removeOnComplete: true, removeOnFail: true, attempts: 1 });
  }

  /** A UDP leg's datagram payload and engine, for the network place in datagrams. */
  private wire(flowIndex: number): { packetSize: number; engine: EngineName } | undefined {
    const packetSize = paramsAt(this.spec, this.run.point, flowIndex).udp?.packetSize;
    return packetSize === undefined ? undefined : { packetSize, engine: flowSpec(this.spec, flowIndex).engine };
  }

  /** Tells every agent to end this run's engine processes, and keeps queued tasks of it from starting. */
  private async abandon(): Promise<void> {
    await this.channel.abandon();
    await this.deps.cancels.publish({ runId: this.run.id, code: this.run.error?.code ?? 'canceled', message: this.run.error?.message ?? 'The run was canceled.' });
  }
}
