import type { Redis } from 'ioredis';
import type { Keys } from './keys.js';

/** Requests per caller per clock minute, counted in Redis so every API replica shares the count. */
export class RequestCounts {
  constructor(private readonly redis: Redis, private readonly keys: Keys) {}

  /** Counts one request of `caller` in `window` (a minute number); the count so far, this one included. */
  async count(caller: string, window: number, windowMs: number): Promise<number> {
    const key = this.keys.rateLimit(caller, window);
    const [[, count]] = (await this.redis.multi().incr(key).pexpire(key, windowMs * 2).exec()) as [[unknown, number]];
    return count;
  }
}

/**
 * What an Idempotency-Key remembers: the hash of the body it came with and the job it makes,
 * and, until the request that took it has answered, when it was taken (`pending`).
 */
export interface Remembered {
  body: string;
  jobId?: string;
  pending?: number;
}

/** Idempotency-Keys of each owner, by the key's hash, for a while. */
export class IdempotencyKeys {
  constructor(private readonly redis: Redis, private readonly keys: Keys, private readonly ttlSeconds: number) {}

  /** Takes the key for a new request that will make job `jobId`; false when it is taken already. */
  async claim(owner: string, keyHash: string, body: string, jobId: string, now = Date.now()): Promise<boolean> {
    return (await this.redis.set(this.keys.idempotency(owner, keyHash), JSON.stringify({ body, jobId, pending: now } satisfies Remembered), 'EX', this.ttlSeconds, 'NX')) !== null;
  }

  async remember(owner: string, keyHash: string, value: Remembered): Promise<void> {
    await this.redis.set(this.keys.idempotency(owner, keyHash), JSON.stringify(value), 'EX', this.ttlSeconds);
  }

  async recall(owner: string, keyHash: string): Promise<Remembered | null> {
    const text = await this.redis.get(this.keys.idempotency(owner, keyHash));
    return text === null ? null : (JSON.parse(text) as Remembered);
  }

  async forget(owner: string, keyHash: string): Promise<void> {
    await this.redis.del(this.keys.idempotency(owner, keyHash));
  }
}
