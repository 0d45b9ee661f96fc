import { hostname, release } from 'node:os';
import { Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { AgentRegistry, type AgentRecord } from '@niclab/shared/stores/agent-registry';
import { CancelBus, type CancelMessage } from '@niclab/shared/stores/cancel-bus';
import type { Config } from '@niclab/shared/runtime/config';
import { Keys } from '@niclab/shared/stores/keys';
import { Leases } from '@niclab/shared/stores/leases';
import type { Logger } from '@niclab/shared/runtime/logger';
import { createRedis } from '@niclab/shared/runtime/redis';
import type { Task } from '@niclab/shared/domain/task';
import { taskProblems } from '@niclab/shared/runtime/task-check';
import { VERSION } from '@niclab/shared/runtime/version';
import { probeEngines } from './engines/registry.js';
import { primeDriverInfo, readInterfaces } from './interfaces.js';
import { processTask } from './processor.js';
import { Tuner } from './tuning.js';
import { FileArea } from './files/file-area.js';
import { keepsInterface } from '@niclab/shared/domain/interface-filter';
import type { AgentInterface } from '@niclab/shared/domain/contract';

/**
 * What an agent reads of its host for its heartbeat. The host's own by default; the fleet
 * benchmark (bench/fleet.ts) gives each of its many agents in one process a host of its own.
 */
export interface AgentHost {
  hostname(): string;
  readInterfaces(): Promise<AgentInterface[]>;
}

const THIS_HOST: AgentHost = { hostname, readInterfaces };

/** How often a running end checks that its run still holds the lease on its interface. */
const LEASE_CHECK_MS = 1000;

interface Running {
  task: Task;
  controller: AbortController;
}

/** One per lab host: registers itself and its interfaces, takes tasks from its own queue, runs engines. */
export class AgentService {
  private readonly keys: Keys;
  private readonly redis: Redis;
  private readonly subscriber: Redis;
  private readonly registry: AgentRegistry;
  private readonly leases: Leases;
  private worker: Worker | undefined;
  private workerConnection: Redis | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private stopping = false;
  private record: AgentRecord | undefined;
  private readonly running = new Map<string, Running>();
  private readonly startedAt = new Date().toISOString();
  private readonly tuner: Tuner;
  /** The file directory (NICLAB_FILE_DIR), once checked at start; absent without one. */
  private files: FileArea | undefined;

  constructor(private readonly config: Config & { redisUrl: string }, private readonly log: Logger, private readonly host: AgentHost = THIS_HOST) {
    this.keys = new Keys(config.prefix);
    this.redis = createRedis(config.redisUrl, { patient: true, name: `niclab-agent-${config.agentId}` });
    this.subscriber = createRedis(config.redisUrl, { blocking: true, name: `niclab-agent-${config.agentId}-sub` });
    this.registry = new AgentRegistry(this.redis, this.keys);
    this.leases = new Leases(this.redis, this.keys);
    this.tuner = new Tuner(config.dataDir, config.agentId, log);
  }

  get id(): string {
    return this.config.agentId;
  }

  async start(): Promise<void> {
    // The task check compiles its schema on first use, about 1 s (more on a loaded host): done
    // now, not inside the first task's setup allowance, where it made the first run late.
    taskProblems({});
    // Settings a previous life of this agent left applied (it died mid-run) go back first, and
    // the temporary files it left in its file directory go.
    await this.tuner.recover();
    if (this.config.fileDir) {
      this.files = await FileArea.open(this.config.fileDir, this.id, this.log);
      await this.files.recover();
    }
    await this.heartbeat();
    // ethtool's answers for the environment of every end: asked now (not awaited: the agent is
    // online meanwhile), not in the first task's setup.
    void primeDriverInfo(this.record?.interfaces.map((i) => i.name) ?? []);
    await new CancelBus(this.redis, this.keys).listen(this.subscriber, (message) => this.onCancel(message));
    // BullMQ never closes a connection it is given; stop() does.
    this.workerConnection = createRedis(this.config.redisUrl, { blocking: true, name: `niclab-agent-${this.id}-worker` });
    this.worker = new Worker(this.keys.agentQueue(this.id), (job: Job<Task>) => this.handle(job.data), {
      connection: this.workerConnection,
      prefix: this.keys.bull,
      concurrency: 256, // a receiver serves many senders: every flow end is a task of its own
      // BullMQ's default is 30 s; the lock is renewed every half of it while the task runs.
      lockDuration: this.config.taskLockSeconds * 1000,
      // A task whose lock lapsed (the agent was cut off from Redis) is noticed within 5 s, not 30.
      stalledInterval: Math.min(5000, this.config.taskLockSeconds * 1000),
      autorun: true,
    });
    this.worker.on('error', (error) => this.log.error({ err: error }, 'task queue error'));
    // A stop right after start must not close connections under a worker still connecting.
    await this.worker.waitUntilReady();
    this.heartbeatTimer = setInterval(() => {
      this.heartbeat().catch((error: unknown) => this.log.warn({ err: error }, 'heartbeat failed'));
    }, this.config.heartbeatSeconds * 1000);
    this.log.info({ agent: this.id, interfaces: this.record?.interfaces.map((i) => i.name) }, 'agent started');
  }

  /** Ends running tasks (their engine processes are killed), stops taking work and deregisters. */
  async stop(): Promise<void> {
    this.stopping = true;
    clearInterval(this.heartbeatTimer);
    for (const { controller } of this.running.values()) {
      controller.abort({ code: 'agent_shutdown', message: `agent ${this.id} is shutting down` });
    }
    await this.worker?.close();
    this.workerConnection?.disconnect();
    if (this.record) await this.registry.deregister(this.record).catch(() => undefined);
    this.subscriber.disconnect();
    await this.redis.quit().catch(() => undefined);
    this.log.info({ agent: this.id }, 'agent stopped');
  }

  private async heartbeat(): Promise<void> {
    const [found, engines] = await Promise.all([this.host.readInterfaces(), probeEngines()]);
    // NICLAB_AGENT_INTERFACES: a host's other interfaces (a node's pod veths) are not reported.
    const interfaces = found.filter((iface) => keepsInterface(this.config.agentInterfaces, iface.name));
    this.record = {
      id: this.id,
      hostname: this.host.hostname(),
      labels: { ...this.config.agentLabels },
      startedAt: this.startedAt,
      version: VERSION,
      kernel: release(),
      heartbeatSeconds: this.config.heartbeatSeconds,
      engines,
      fileDirectory: this.files !== undefined,
      interfaces,
    };
    // A heartbeat still reading interfaces when stop() deregistered must not register again.
    if (!this.stopping) await this.registry.heartbeat(this.record);
  }

  private async handle(task: Task): Promise<void> {
    const key = `${task.runId}/${task.leg}/${task.role}`;
    const controller = new AbortController();
    const deadline = setTimeout(
      () => controller.abort({ code: 'deadline_exceeded', message: `the run passed its deadline on agent ${this.id}` }),
      Math.max(0, task.deadline - Date.now()),
    );
    const watch = this.watchLease(task, controller);
    this.running.set(key, { task, controller });
    try {
      await processTask(task, controller.signal, { agentId: this.id, redis: this.redis, keys: this.keys, log: this.log, tuner: this.tuner, ...(this.files ? { files: this.files } : {}) });
    } finally {
      clearTimeout(deadline);
      clearInterval(watch);
      this.running.delete(key);
    }
  }

  /**
   * Ends the task when its run no longer holds its interface: the coordinator renews the lease
   * while the run lasts, so a lease that lapsed, or that another run now holds, means the
   * coordinator died (SIGKILL) and the job will be resumed elsewhere. Without this the dead
   * run's traffic would go on, up to its deadline, beside the run that replaces it.
   */
  private watchLease(task: Task, controller: AbortController): NodeJS.Timeout {
    const target = { agent: this.id, interface: task.interface };
    // How long a lease may be missing before the end gives its run up: two of the
    // coordinator's renewals, so a lease Redis lost in a restart (the coordinator takes it
    // back at its next renewal) is not mistaken for a dead coordinator.
    const absentLimitMs = 2 * this.leases.renewEveryMs;
    let absentSince: number | null = null;
    let checking = false;
    return setInterval(() => {
      if (checking || controller.signal.aborted) return;
      checking = true;
      this.leases
        .holderOf(target)
        .then((holder) => {
          if (holder === task.runId) {
            absentSince = null;
            return;
          }
          if (holder === null) {
            absentSince ??= Date.now();
            if (Date.now() - absentSince < absentLimitMs) return;
          }
          const why = holder ? `run ${holder} now holds ${task.interface}` : `nobody renewed the lease on ${task.interface} for ${absentLimitMs / 1000} s`;
          this.log.warn({ runId: task.runId, role: task.role, holder }, 'the run lost its interface lease: its coordinator is gone');
          controller.abort({ code: 'coordinator_lost', message: `the run's coordinator stopped renewing its lease (${why})` });
        }, () => undefined) // Redis unreachable: the deadline still bounds the task
        .finally(() => {
          checking = false;
        });
    }, LEASE_CHECK_MS);
  }

  private onCancel(message: CancelMessage): void {
    for (const { task, controller } of this.running.values()) {
      if (('jobId' in message && task.jobId === message.jobId) || ('runId' in message && task.runId === message.runId)) {
        controller.abort({ code: message.code, message: message.message });
      }
    }
  }
}
