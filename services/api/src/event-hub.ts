/**
 * One Redis subscription per API process for every job's events, fanned out to the
 * server-sent-event streams that follow those jobs.
 */
import type { Redis } from 'ioredis';
import { TERMINAL_STATUSES } from '@niclab/shared/domain/contract';
import { eventIdAfter, jobEventsAfter, latestJobEventId, subscribeJobEvents, type JobEvent, type LoggedEvent } from '@niclab/shared/stores/events';
import type { Keys } from '@niclab/shared/stores/keys';

type Listener = (event: LoggedEvent) => void;

/**
 * Server-sent events: sends events (each with its id, if it has one) until the promise
 * resolves (then the response ends) or `closed` aborts (the client went away).
 */
export type EventStream = (send: (event: string, data: unknown, id?: string) => void, closed: AbortSignal) => Promise<void>;

export class EventHub {
  private readonly listeners = new Map<string, Set<Listener>>();
  private subscriber: Redis | undefined;
  private subscribed: Promise<unknown> | undefined;
  /** Each open stream's end: called when the subscription was lost (its client resumes by Last-Event-ID). */
  private readonly streams = new Set<() => void>();

  constructor(private readonly redis: Redis, private readonly keys: Keys) {}

  /** Calls `listener` with each event of the job until the returned function is called. */
  async follow(jobId: string, listener: Listener): Promise<() => void> {
    if (!this.subscriber) {
      this.subscriber = this.redis.duplicate();
      // Events published while the subscriber was reconnecting never reach it: every open
      // stream ends, and its client reconnects with Last-Event-ID and reads them from the backlog.
      let connected = false;
      this.subscriber.on('ready', () => {
        if (connected) for (const end of [...this.streams]) end();
        connected = true;
      });
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

  /**
   * A job's event stream: from `lastEventId` on if the backlog still holds it (a client that
   * reconnects), else the job's status now (`current`), and then each event as it comes, every
   * one with its id, none twice, until the job's final status (or until Redis fails under it:
   * then it ends, and the client resumes from its last id).
   */
  stream(jobId: string, lastEventId: string | undefined, current: () => Promise<JobEvent | null>): EventStream {
    return (send, closed) =>
      new Promise<void>((resolve) => {
        let stop: () => void = () => {};
        let ended = false;
        let last: string | null = null;
        // Live events wait here until what came before them (the backlog, or the status now) is sent.
        let held: LoggedEvent[] | null = [];
        const end = () => {
          if (ended) return;
          ended = true;
          this.streams.delete(end);
          stop();
          resolve();
        };
        this.streams.add(end);
        const deliver = ({ id, event }: LoggedEvent) => {
          if (ended || (last !== null && !eventIdAfter(id, last))) return;
          last = id;
          send(event.type, event, id);
          if (event.type === 'status' && TERMINAL_STATUSES.includes(event.status)) end();
        };
        /** The job's status as it is now, under the latest id: where a fresh stream starts. */
        const snapshot = async () => {
          // The id before the job: an event between the two reads is then sent (again), never skipped.
          const latest = await latestJobEventId(this.redis, this.keys, jobId);
          const event = await current();
          if (ended) return;
          if (!event) return end();
          if (latest !== null) last = latest;
          send(event.type, event, latest ?? undefined);
          if (event.type === 'status' && TERMINAL_STATUSES.includes(event.status)) end();
        };
        closed.addEventListener('abort', end, { once: true });
        // Subscribed before anything is read, so nothing falls between the two.
        void this.follow(jobId, (event) => (held ? held.push(event) : deliver(event))).then(async (unfollow) => {
          stop = unfollow;
          if (ended) return unfollow();
          const missed = lastEventId ? await jobEventsAfter(this.redis, this.keys, jobId, lastEventId) : null;
          if (missed) {
            last = lastEventId!;
            missed.forEach(deliver);
            // A job that ended with its final status already sent: the stream ends with it again.
            if (!ended && (await current().then((e) => e?.type === 'status' && TERMINAL_STATUSES.includes(e.status)))) await snapshot();
          } else await snapshot();
          const waiting = held ?? [];
          held = null;
          waiting.forEach(deliver);
        }).catch(() => end()); // Redis failed while the stream was being set up: it ends, and the client resumes.
      });
  }

  close(): void {
    this.subscriber?.disconnect();
  }
}
