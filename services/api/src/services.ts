import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { AgentRegistry } from '@niclab/shared/stores/agent-registry';
import { CancelBus } from '@niclab/shared/stores/cancel-bus';
import type { Config } from '@niclab/shared/runtime/config';
import type { JobStore } from '@niclab/shared/stores/job-store';
import { createJobsQueue, jobStore, type JobMessage } from '@niclab/shared/stores/job-queue';
import type { MetricStore } from '@niclab/shared/stores/metric-store';
import type { Results } from '@niclab/shared/stores/results';
import type { ChangeStore } from '@niclab/shared/stores/changes';
import { Keys } from '@niclab/shared/stores/keys';
import { Leases } from '@niclab/shared/stores/leases';
import type { Logger } from '@niclab/shared/runtime/logger';
import { createRedis } from '@niclab/shared/runtime/redis';
import { IdempotencyKeys, RequestCounts } from '@niclab/shared/stores/request-stores';
import { createMetrics, type Metrics } from './metrics.js';
import { EventHub } from './event-hub.js';
import { Schedules } from './schedules.js';
import { apiPolicy, type Policy } from './policy.js';

/** What the handlers work with; built once per API process. */
export interface ApiServices {
  config: Config;
  policy: Policy;
  log: Logger;
  keys: Keys;
  redis: Redis;
  store: JobStore;
  /** The history of run summaries (/v1/results). */
  results: Results;
  /** Change points in the schedules' series (/v1/changes). */
  changes: ChangeStore;
  /** /metrics' counts in Redis, kept by the store's observers. */
  metricStore: MetricStore;
  agents: AgentRegistry;
  /** Interface leases, read to say which interfaces runs hold now. */
  leases: Leases;
  jobsQueue: Queue<JobMessage>;
  metrics: Metrics;
  schedules: Schedules;
  events: EventHub;
  /** The connection Redis WAIT runs on (api/durability.ts), when acknowledged writes wait for replicas. */
  waiter: Redis | null;
  cancels: CancelBus;
  requestCounts: RequestCounts;
  idempotencyKeys: IdempotencyKeys;
  close(): Promise<void>;
}

/** Without `policy`, reads it from the config: a ConfigError when it is missing where required or invalid. */
export function createApiServices(config: Config & { redisUrl: string }, log: Logger, policy: Policy = apiPolicy(config)): ApiServices {
  const keys = new Keys(config.prefix);
  const redis = createRedis(config.redisUrl, { name: 'niclab-api' });
  const jobsQueue = createJobsQueue(redis, keys);
  // Redis WAIT blocks the connection it runs on: one of its own, when acknowledged writes wait for replicas.
  const waiter = config.redisWaitReplicas > 0 ? createRedis(config.redisUrl, { name: 'niclab-api-wait' }) : null;
  const { store, metricStore, results, changes } = jobStore(redis, keys, config.changes);
  const agents = new AgentRegistry(redis, keys);
  const schedules = new Schedules(redis, keys, { store, agents, jobsQueue, log }, policy);
  const events = new EventHub(redis, keys);
  const leases = new Leases(redis, keys);
  return {
    config, policy, log, keys, redis, waiter, jobsQueue, store, results, changes, metricStore, agents, leases, schedules, events,
    cancels: new CancelBus(redis, keys),
    requestCounts: new RequestCounts(redis, keys),
    // An Idempotency-Key remembers the job it created for a day.
    idempotencyKeys: new IdempotencyKeys(redis, keys, 24 * 3600),
    metrics: createMetrics({ store, metricStore, agents, jobsQueue, leases, changes, retention: { redis, keys } }),
    async close() {
      events.close();
      await schedules.close();
      await jobsQueue.close();
      await waiter?.quit().catch(() => undefined);
      await redis.quit().catch(() => undefined);
    },
  };
}
