import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { CHANGE_DEFAULTS, type ChangeOptions } from '../domain/changes/detect.js';
import { ChangeStore } from './changes.js';
import { JobEventPublisher } from './events.js';
import { JobStore } from './job-store.js';
import type { Keys } from './keys.js';
import { MetricStore } from './metric-store.js';
import { Results } from './results.js';

/**
 * The contract between the API and the coordinators: what a job's queue entry carries, how it
 * is queued, and the job store with every observer it must have. Both sides take them from here,
 * so an observer added is added for both, and the message has one type.
 */

/** A job's entry in the jobs queue: the job itself is in the store. */
export interface JobMessage {
  jobId: string;
}

/** How a job is queued: by its id (a second add of the same job is no second entry), kept a while once done, retried with backoff when a coordinator fails it. */
export const JOB_QUEUE_OPTIONS = { removeOnComplete: 1000, removeOnFail: 1000, attempts: 5, backoff: { type: 'exponential', delay: 1000 } } as const;

/** The jobs queue on `redis`. */
export function createJobsQueue(redis: Redis, keys: Keys): Queue<JobMessage> {
  return new Queue<JobMessage>(keys.jobsQueue, { connection: redis, prefix: keys.bull });
}

/** Queues the stored job `jobId` for a coordinator. */
export async function enqueueJob(queue: Queue<JobMessage>, jobId: string): Promise<void> {
  await queue.add('job', { jobId }, { jobId, ...JOB_QUEUE_OPTIONS });
}

/** Whether the worker whose lock token is `token` still holds BullMQ's lock on the job (the lock's value is the token). */
export async function holdsJobLock(redis: Redis, keys: Keys, jobId: string, token: string): Promise<boolean> {
  return (await redis.get(keys.jobLock(jobId))) === token;
}

/** The job store with its observers (the metrics, the history, the event stream), as every process that writes jobs needs it. */
export function jobStore(redis: Redis, keys: Keys, changeOptions: ChangeOptions = CHANGE_DEFAULTS): { store: JobStore; metricStore: MetricStore; results: Results; changes: ChangeStore } {
  const metricStore = new MetricStore(redis, keys);
  const results = new Results(redis, keys);
  const changes = new ChangeStore(redis, keys, changeOptions);
  return { store: new JobStore(redis, keys, [metricStore, results, changes, new JobEventPublisher(redis, keys)]), metricStore, results, changes };
}
