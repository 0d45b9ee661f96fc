import type { Redis } from 'ioredis';
import type { Keys } from './keys.js';
import type { EndReport, ReadyReply, Task } from '../domain/task.js';

/** Replies live long enough for a coordinator to read them, then expire. */
const REPLY_TTL_SECONDS = 3600;
/** A run that was canceled or failed stays marked this long, so a task still queued for it never starts. */
const ABANDONED_TTL_SECONDS = 3600;
/** How long one blocking read waits, so cancellation is noticed within a quarter second. */
const COLLECT_SLICE_SECONDS = 0.25;

/** What a coordinator hears from a run's ends while it waits. */
export interface RunSink {
  ready(reply: ReadyReply): void;
  report(report: EndReport): void;
}

/**
 * The run protocol between a coordinator and the agents of one run's ends, in Redis: each
 * receiver posts `ready` (its address and port) once it listens; each end posts one report
 * when it ends, a failure included; an end may keep its raw engine output; a run that ended
 * badly is marked abandoned so its queued tasks never start. Only this class touches those keys.
 */
export class RunChannel {
  constructor(private readonly redis: Redis, private readonly keys: Keys, readonly runId: string) {}

  async postReady(reply: ReadyReply): Promise<void> {
    const key = this.keys.runReady(this.runId);
    await this.redis.multi().rpush(key, JSON.stringify(reply)).expire(key, REPLY_TTL_SECONDS).exec();
  }

  async postReport(report: EndReport): Promise<void> {
    const key = this.keys.runResults(this.runId);
    await this.redis.multi().rpush(key, JSON.stringify(report)).expire(key, REPLY_TTL_SECONDS).exec();
  }

  /** Keeps one end's raw engine output (iperf3's JSON), read back by `readRaw`. */
  async saveRaw(leg: number, role: Task['role'], text: string): Promise<void> {
    await this.redis.hset(this.keys.runRaw(this.runId), `${leg}:${role}`, text);
  }

  readRaw(leg: number, role: Task['role']): Promise<string | null> {
    return this.redis.hget(this.keys.runRaw(this.runId), `${leg}:${role}`);
  }

  async abandon(): Promise<void> {
    await this.redis.set(this.keys.runAbandoned(this.runId), '1', 'EX', ABANDONED_TTL_SECONDS);
  }

  async isAbandoned(): Promise<boolean> {
    return (await this.redis.exists(this.keys.runAbandoned(this.runId))) === 1;
  }

  /** Hands over the reports already posted, without waiting for more. */
  async drainReports(sink: RunSink): Promise<void> {
    const key = this.keys.runResults(this.runId);
    for (let item = await this.redis.lpop(key); item !== null; item = await this.redis.lpop(key)) sink.report(JSON.parse(item) as EndReport);
  }

  /**
   * Hands replies to `sink` until `done()` says enough, the deadline passes or the signal
   * aborts. `connection` is one of the caller's own: it blocks. With `ready: false`, only reports.
   */
  async collect(connection: Redis, options: { ready: boolean }, deadline: number, signal: AbortSignal, sink: RunSink, done: () => boolean): Promise<void> {
    const readyKey = this.keys.runReady(this.runId);
    const lists = options.ready ? [readyKey, this.keys.runResults(this.runId)] : [this.keys.runResults(this.runId)];
    while (!done() && !signal.aborted) {
      const left = deadline - Date.now();
      if (left <= 0) return;
      const reply = await connection.blpop(...lists, Math.min(COLLECT_SLICE_SECONDS, left / 1000));
      if (!reply) continue;
      if (reply[0] === readyKey) sink.ready(JSON.parse(reply[1]) as ReadyReply);
      else sink.report(JSON.parse(reply[1]) as EndReport);
    }
  }
}
