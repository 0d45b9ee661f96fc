/**
 * The events an agent's task queue keeps (BullMQ's streams.events.maxLen, 10,000 by default):
 * an entry is 0.2-1 KB (a failure's carries its reason), so BullMQ's default let each queue
 * grow to ~9 MiB and a 1,000-agent fleet to ~9 GiB of Redis (bench/fleet.ts). Nothing of
 * niclab reads them beyond the latest task's (bench/dispatch.ts reads its own job's at once).
 */
export const AGENT_QUEUE_EVENTS = 100;

/** Every Redis key and queue name niclab uses, in one place. */
export class Keys {
  constructor(readonly prefix: string) {}

  /** BullMQ's own key prefix. */
  get bull(): string { return `${this.prefix}:bull`; }
  /** The queue the coordinators take jobs from. */
  readonly jobsQueue = 'jobs';
  /** BullMQ's lock on a job of the jobs queue: its value is the token of the worker that holds it. */
  jobLock(jobId: string): string { return `${this.bull}:${this.jobsQueue}:${jobId}:lock`; }
  agentQueue(agentId: string): string { return `agent.${agentId}`; }

  job(id: string): string { return `${this.prefix}:job:${id}`; }
  jobIndex(status?: string): string { return status ? `${this.prefix}:jobs:${status}` : `${this.prefix}:jobs`; }
  runs(jobId: string): string { return `${this.prefix}:runs:${jobId}`; }
  runReady(runId: string): string { return `${this.prefix}:run:${runId}:ready`; }
  runResults(runId: string): string { return `${this.prefix}:run:${runId}:results`; }
  /** Raw engine output (iperf3's JSON) of a run's ends, by `<leg>:<role>`. */
  runRaw(runId: string): string { return `${this.prefix}:run:${runId}:raw`; }
  /** Set when a run is canceled or failed, so a task still queued for it never starts. */
  runAbandoned(runId: string): string { return `${this.prefix}:run:${runId}:abandoned`; }

  /** The lease on one agent's interface; its value is the holding run's id. */
  lease(agentId: string, iface: string): string { return `${this.prefix}:lease:${agentId}:${iface}`; }
  /** The jobs waiting for one interface, first come first: a sorted set, score the time each began to wait (epoch ms). */
  leaseQueue(agentId: string, iface: string): string { return `${this.prefix}:leasequeue:${agentId}:${iface}`; }
  /** When each waiter of that queue is gone unless it asks again (a hash: job id -> epoch ms). */
  leaseQueueAlive(agentId: string, iface: string): string { return `${this.prefix}:leasequeue:${agentId}:${iface}:alive`; }

  /** Outcome counts of jobs and of runs, by status. */
  get statsJobs(): string { return `${this.prefix}:stats:jobs`; }
  get statsRuns(): string { return `${this.prefix}:stats:runs`; }
  /** Schedules' firings by outcome (job, skipped, refused), fleet-wide. */
  get statsFirings(): string { return `${this.prefix}:stats:firings`; }
  /** A histogram's cumulative bucket counts (by `le`), `sum` and `count`. */
  statsHistogram(name: string): string { return `${this.prefix}:stats:histogram:${name}`; }
  /** Run summaries by end time (score: epoch ms), as JSON members: the layout before history indexes, read once to move it. */
  get legacyResults(): string { return `${this.prefix}:results`; }
  /** Run ids by end time (score: epoch ms): the whole history. */
  get history(): string { return `${this.prefix}:history:runs`; }
  /** The coordinators' latest retention estimate (JSON, stores/retention-estimate.ts): what every API replica's /metrics shows. */
  get retentionEstimate(): string { return `${this.prefix}:retention:estimate`; }
  /** Run id -> its summary's JSON. */
  get historyData(): string { return `${this.prefix}:history:data`; }
  /** Run ids by end time for one agent (either end of any flow) or one schedule. */
  historyIndex(kind: 'agent' | 'schedule', value: string): string { return `${this.prefix}:history:${kind}:${value}`; }
  /** Change points: each series' last points (a list by series digest), the series by digest, */
  changesSeries(sid: string): string { return `${this.prefix}:changes:series:${sid}`; }
  get changesSeriesIds(): string { return `${this.prefix}:changes:series-ids`; }
  /** each distinct environment by digest, */
  get changesEnvironments(): string { return `${this.prefix}:changes:environments`; }
  /** a series' change points by their first run after the step, */
  changesKnown(sid: string): string { return `${this.prefix}:changes:known:${sid}`; }
  /** and the change points as JSON by id, indexed by when they were found (score: epoch ms). */
  get changesData(): string { return `${this.prefix}:changes:data`; }
  get changesIndex(): string { return `${this.prefix}:changes:index`; }
  /** The open ones (not acknowledged) by when found, and how many were ever found by [schedule, figure, verdict], for /metrics. */
  get changesOpen(): string { return `${this.prefix}:changes:open`; }
  get changesCounts(): string { return `${this.prefix}:changes:counts`; }
  /** The names of every history index, so retention can trim them all. */
  get historyIndexes(): string { return `${this.prefix}:history:indexes`; }
  /** The last result of every measured link, by its labels. */
  get links(): string { return `${this.prefix}:links`; }
  /** A rate search's last result per link and datagram size: labels JSON -> values JSON. */
  get searchLinks(): string { return `${this.prefix}:search-links`; }

  /** A schedule's definition and counts; the set of all schedule names. */
  schedule(name: string): string { return `${this.prefix}:schedule:${name}`; }
  get schedules(): string { return `${this.prefix}:schedules`; }

  agent(id: string): string { return `${this.prefix}:agent:${id}`; }
  get agents(): string { return `${this.prefix}:agents`; }
  /** A new random value whenever an agent's record is written with something new (a fleet's records are read again only then; a dropped one leaves the last-seen set). */
  get agentsRevision(): string { return `${this.prefix}:agents:revision`; }

  /** Pub/sub channel of one job's live events; `jobEventsPattern` matches them all. */
  jobEvents(jobId: string): string { return `${this.prefix}:events:${jobId}`; }
  get jobEventsPattern(): string { return `${this.prefix}:events:*`; }
  /** A Redis stream of one job's latest events, each by its id, for a client that reconnects (Last-Event-ID). */
  jobEventLog(jobId: string): string { return `${this.prefix}:eventlog:${jobId}`; }

  /** A counter the API bumps on its WAIT connection, so that WAIT has a write of its own to wait for (api/durability.ts). */
  get replicationMark(): string { return `${this.prefix}:replication-mark`; }

  /** Pub/sub channel announcing canceled jobs and abandoned runs to every agent. */
  get cancelChannel(): string { return `${this.prefix}:cancel`; }

  /** Requests of one caller (token name or address) in one minute window. */
  rateLimit(caller: string, window: number): string { return `${this.prefix}:ratelimit:${caller}:${window}`; }
  /** What an Idempotency-Key of a token answered: its body's hash and the job it created. */
  idempotency(owner: string, keyHash: string): string { return `${this.prefix}:idempotency:${owner}:${keyHash}`; }
  /** Jobs of a token that may still be queued or running (pruned as they are read). */
  ownerActive(owner: string): string { return `${this.prefix}:owner:${owner}:active`; }
}
