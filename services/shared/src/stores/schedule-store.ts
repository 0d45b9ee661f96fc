import type { Redis } from 'ioredis';
import type { components } from '../generated/openapi.js';
import type { Keys } from './keys.js';

export type ScheduleInput = components['schemas']['ScheduleInput'];

/** A schedule as stored: its definition and its counts (BullMQ's job scheduler fires it). */
export interface ScheduleRow {
  definition: ScheduleInput;
  owner: string;
  paused: boolean;
  createdAt: string;
  firings: number;
  skipped: number;
  /** Firings the owner's policy limits refused (each left a failed job). */
  refused: number;
  lastJobId: string | null;
  lastFiredAt: string | null;
}

/** Schedules in Redis: one hash each, and the set of their names. */
export class ScheduleStore {
  constructor(private readonly redis: Redis, private readonly keys: Keys) {}

  /** Stores a new schedule; false when one of that name exists. */
  async create(definition: ScheduleInput, owner: string): Promise<boolean> {
    const key = this.keys.schedule(definition.name);
    if (!(await this.redis.hsetnx(key, 'definition', JSON.stringify(definition)))) return false;
    await this.redis.multi().hset(key, { owner, createdAt: new Date().toISOString(), paused: '0', firings: 0, skipped: 0 }).sadd(this.keys.schedules, definition.name).exec();
    return true;
  }

  async get(name: string): Promise<ScheduleRow | null> {
    const row = await this.redis.hgetall(this.keys.schedule(name));
    if (!row.definition) return null;
    return {
      definition: JSON.parse(row.definition) as ScheduleInput,
      owner: row.owner || 'anonymous',
      paused: row.paused === '1',
      createdAt: row.createdAt ?? '',
      firings: Number(row.firings ?? 0),
      skipped: Number(row.skipped ?? 0),
      refused: Number(row.refused ?? 0),
      lastJobId: row.lastJobId || null,
      lastFiredAt: row.lastFiredAt || null,
    };
  }

  async names(): Promise<string[]> {
    return (await this.redis.smembers(this.keys.schedules)).sort();
  }

  /** Forgets a schedule; false when there was none. */
  async remove(name: string): Promise<boolean> {
    const [[, removed]] = (await this.redis.multi().del(this.keys.schedule(name)).srem(this.keys.schedules, name).exec()) as [[unknown, number], unknown];
    return removed === 1;
  }

  async setPaused(name: string, paused: boolean): Promise<void> {
    await this.redis.hset(this.keys.schedule(name), 'paused', paused ? '1' : '0');
  }

  /** A firing that made a job. */
  /**
   * A firing that left a job: one that runs (`job`), or the failed job of a firing the owner's
   * policy refused (`refused`, counted as that and not as a job).
   */
  async fired(name: string, jobId: string, outcome: 'job' | 'refused' = 'job'): Promise<void> {
    const key = this.keys.schedule(name);
    const tx = this.redis.multi().hincrby(key, 'firings', 1).hset(key, { lastJobId: jobId, lastFiredAt: new Date().toISOString() }).hincrby(this.keys.statsFirings, outcome, 1);
    if (outcome === 'refused') tx.hincrby(key, 'refused', 1);
    await tx.exec();
  }

  /** A firing skipped because the previous job was still at work. */
  async skipped(name: string): Promise<void> {
    await this.redis.multi().hincrby(this.keys.schedule(name), 'skipped', 1).hincrby(this.keys.statsFirings, 'skipped', 1).exec();
  }
}
