/**
 * Live events of a job on a Redis channel of its own, for GET /v1/jobs/{id}/events: status
 * changes, progress, each run's summary as it ends and receivers' interval samples as they
 * are taken. Fire and forget: a listener that is not there misses them, the job is in Redis.
 */
import type { Redis } from 'ioredis';
import type { Job, Run } from '../domain/contract.js';
import type { components } from '../generated/openapi.js';
import type { Keys } from './keys.js';
import { summarizeRun } from './results.js';
import type { JobObserver } from './job-observer.js';

/** One event's data, as openapi.yaml's `JobEvent` states it (`JobStatusEvent`, `JobRunEvent`, ...). */
export type JobEvent = components['schemas']['JobEvent'];

/**
 * Subscribes `subscriber` (a connection of its own, which then only listens) to every job's
 * events and hands each on with its job's id.
 */
export async function subscribeJobEvents(subscriber: Redis, keys: Keys, onEvent: (jobId: string, event: JobEvent) => void): Promise<void> {
  subscriber.on('pmessage', (_pattern: string, channel: string, text: string) => {
    onEvent(channel.slice(channel.lastIndexOf(':') + 1), JSON.parse(text) as JobEvent);
  });
  await subscriber.psubscribe(keys.jobEventsPattern);
}

export async function publishJobEvent(redis: Redis, keys: Keys, jobId: string, event: JobEvent): Promise<void> {
  await redis.publish(keys.jobEvents(jobId), JSON.stringify(event));
}

/** Publishes every status change and finished run on the job's event channel (GET /v1/jobs/{id}/events). */
export class JobEventPublisher implements JobObserver {
  constructor(private readonly redis: Redis, private readonly keys: Keys) {}

  async jobMoved(job: Job): Promise<void> {
    await publishJobEvent(this.redis, this.keys, job.id, { type: 'status', status: job.status, progress: job.progress, error: job.error });
  }

  async runEnded(job: Job, run: Run): Promise<void> {
    await publishJobEvent(this.redis, this.keys, job.id, { type: 'run', run: summarizeRun(job, run) });
  }

  async progressed(jobId: string, runsDone: number, runsTotal: number): Promise<void> {
    await publishJobEvent(this.redis, this.keys, jobId, { type: 'progress', runsDone, runsTotal });
  }
}
