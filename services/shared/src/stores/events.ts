/**
 * Live events of a job on a Redis channel of its own, for GET /v1/jobs/{id}/events: status
 * changes, progress, each run's summary as it ends and receivers' interval samples as they
 * are taken. Each is also appended to a stream of the job's latest `EVENT_BACKLOG` events, in
 * one script with its publication so that both agree on its id and order: a client that
 * reconnects with `Last-Event-ID` is sent what it missed from there. The job itself is in Redis.
 */
import type { Redis } from 'ioredis';
import type { Job, Run } from '../domain/contract.js';
import type { components } from '../generated/openapi.js';
import type { Keys } from './keys.js';
import { summarizeRun } from './results.js';
import type { JobObserver } from './job-observer.js';

/** One event's data, as openapi.yaml's `JobEvent` states it (`JobStatusEvent`, `JobRunEvent`, ...). */
export type JobEvent = components['schemas']['JobEvent'];
/** An event with its id in the job's stream (`<ms>-<seq>`, increasing). */
export interface LoggedEvent { id: string; event: JobEvent }

/** Events kept per job for a reconnect (at least: Redis trims the stream in whole nodes). */
export const EVENT_BACKLOG = 10_000;
/** How long a job's backlog is kept after its last event: for a reconnect, not as history (the job holds that). */
export const EVENT_BACKLOG_SECONDS = 3600;

const PUBLISH = `local id = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[2], '*', 'e', ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[3])
redis.call('PUBLISH', KEYS[2], id .. ' ' .. ARGV[1])
return id`;

/**
 * Subscribes `subscriber` (a connection of its own, which then only listens) to every job's
 * events and hands each on with its job's id and its own.
 */
export async function subscribeJobEvents(subscriber: Redis, keys: Keys, onEvent: (jobId: string, event: LoggedEvent) => void): Promise<void> {
  subscriber.on('pmessage', (_pattern: string, channel: string, text: string) => {
    const space = text.indexOf(' ');
    onEvent(channel.slice(channel.lastIndexOf(':') + 1), { id: text.slice(0, space), event: JSON.parse(text.slice(space + 1)) as JobEvent });
  });
  await subscriber.psubscribe(keys.jobEventsPattern);
}

/** Appends the event to the job's backlog and publishes it; returns its id. */
export async function publishJobEvent(redis: Redis, keys: Keys, jobId: string, event: JobEvent): Promise<string> {
  return (await redis.eval(PUBLISH, 2, keys.jobEventLog(jobId), keys.jobEvents(jobId), JSON.stringify(event), EVENT_BACKLOG, EVENT_BACKLOG_SECONDS)) as string;
}

/**
 * The job's events after `afterId`, oldest first, or `null` when the backlog no longer holds
 * `afterId` itself (trimmed, expired, or never an id of this job): what followed it may be lost.
 */
export async function jobEventsAfter(redis: Redis, keys: Keys, jobId: string, afterId: string): Promise<LoggedEvent[] | null> {
  const key = keys.jobEventLog(jobId);
  const [held] = await redis.xrange(key, afterId, afterId, 'COUNT', 1);
  if (!held) return null;
  return (await redis.xrange(key, `(${afterId}`, '+')).map(([id, fields]) => ({ id, event: JSON.parse(fields[1]!) as JobEvent }));
}

/** The id of the job's latest event, `null` before its first. */
export async function latestJobEventId(redis: Redis, keys: Keys, jobId: string): Promise<string | null> {
  const [latest] = await redis.xrevrange(keys.jobEventLog(jobId), '+', '-', 'COUNT', 1);
  return latest?.[0] ?? null;
}

/** Whether stream id `a` comes after `b`. */
export function eventIdAfter(a: string, b: string): boolean {
  const [am, as] = a.split('-').map(BigInt) as [bigint, bigint];
  const [bm, bs] = b.split('-').map(BigInt) as [bigint, bigint];
  return am > bm || (am === bm && as > bs);
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
