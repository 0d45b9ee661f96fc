/**
 * One Redis subscription per API process for every job's events, fanned out to the
 * server-sent-event streams that follow those jobs.
 */
import type { Redis } from 'ioredis';
import { subscribeJobEvents, type JobEvent } from '@niclab/shared/stores/events';
import type { Keys } from '@niclab/shared/stores/keys';

type Listener = (event: JobEvent) => void;

export class EventHub {
  private readonly listeners = new Map<string, Set<Listener>>();
  private subscriber: Redis | undefined;
  private subscribed: Promise<unknown> | undefined;

  constructor(private readonly redis: Redis, private readonly keys: Keys) {}

  /** Calls `listener` with each event of the job until the returned function is called. */
  async follow(jobId: string, listener: Listener): Promise<() => void> {
    if (!this.subscriber) {
      this.subscriber = this.redis.duplicate();
      this.subscribed = subscribeJobEvents(this.subscriber, this.keys, (jobId, event) => {
        for (const l of this.listeners.get(jobId) ?? []) l(event);
      });
    }
    await this.subscribed;
    const set = this.listeners.get(jobId) ?? new Set<Listener>();
    set.add(listener);
    this.listeners.set(jobId, set);
    return () => {
      set.delete(listener);
      if (set.size === 0) this.listeners.delete(jobId);
    };
  }

  close(): void {
    this.subscriber?.disconnect();
  }
}
