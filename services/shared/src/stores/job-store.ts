import type { Redis } from 'ioredis';
import { isFinished, TERMINAL_STATUSES, type ErrorInfo, type Job, type JobPage, type JobSpec, type JobStatus, type Run } from '../domain/contract.js';
import type { Keys } from './keys.js';
import { defineScript, type Script } from '../runtime/redis.js';
import type { JobObserver } from './job-observer.js';

/**
 * Moves a job between statuses atomically, keeping the per-status indexes in step.
 * Returns -1 when the job does not exist, 0 when its current status is not one of `from`.
 */
const TRANSITION = `
--[[
  KEYS[1]     the job's hash, keys.job(id)
  KEYS[2]     the job index, keys.jobIndex(); its per-status indexes are KEYS[2] .. ':' .. status
  ARGV[1]     the statuses it may move from, comma-separated
  ARGV[2]     the status it moves to
  ARGV[3..]   field, value pairs to set with it
]]
local cur = redis.call('HGET', KEYS[1], 'status')
if not cur then return -1 end
local allowed = false
for s in string.gmatch(ARGV[1], '[^,]+') do if s == cur then allowed = true end end
if not allowed then return 0 end
local member = redis.call('HGET', KEYS[1], 'member')
redis.call('HSET', KEYS[1], 'status', ARGV[2], unpack(ARGV, 3))
if cur ~= ARGV[2] then
  redis.call('ZREM', KEYS[2] .. ':' .. cur, member)
  redis.call('ZADD', KEYS[2] .. ':' .. ARGV[2], 0, member)
end
return 1
`;

/**
 * Creates a job (its hash, the indexes, its owner's active set) in one step. With a limit
 * (ARGV[3]), the owner's active set is pruned of jobs no longer queued or running (or gone)
 * and the job is created only while fewer than the limit remain; otherwise it returns that
 * count and writes nothing. Returns -1 when created.
 */
const CREATE = `
--[[
  KEYS[1]     the job's hash, keys.job(id)
  KEYS[2]     the job index, keys.jobIndex()
  KEYS[3]     the queued index, keys.jobIndex('queued')
  KEYS[4]     the owner's active set, keys.ownerActive(owner)
  ARGV[1]     the job's index member (created-at and id)
  ARGV[2]     the job hash key's prefix (a job's hash is ARGV[2] .. id)
  ARGV[3]     the owner's limit of active jobs, or '' for none
  ARGV[4]     the job id
  ARGV[5..]   the job hash's field, value pairs
]]
local limit = tonumber(ARGV[3])
if limit then
  local active = 0
  for _, id in ipairs(redis.call('SMEMBERS', KEYS[4])) do
    local status = redis.call('HGET', ARGV[2] .. id, 'status')
    if status == 'queued' or status == 'running' then active = active + 1 else redis.call('SREM', KEYS[4], id) end
  end
  if active >= limit then return active end
end
redis.call('HSET', KEYS[1], unpack(ARGV, 5))
redis.call('ZADD', KEYS[2], 0, ARGV[1])
redis.call('ZADD', KEYS[3], 0, ARGV[1])
redis.call('SADD', KEYS[4], ARGV[4])
return -1
`;

export interface JobPatch {
  startedAt?: string;
  finishedAt?: string;
  error?: ErrorInfo | null;
  runsTotal?: number;
  /** A group job's pairs, once it ended. */
  pairs?: NonNullable<Job['pairs']>;
  /** What the job found, once it ended. */
  finding?: Job['finding'];
}

/** Jobs and their runs in Redis: one hash per job, lexically sorted indexes for newest-first paging. */
export class JobStore {
  private readonly transitionScript: Script;
  private readonly createScript: Script;

  constructor(private readonly redis: Redis, private readonly keys: Keys, private readonly observers: readonly JobObserver[] = []) {
    this.transitionScript = defineScript(redis, 'niclabTransition', TRANSITION);
    this.createScript = defineScript(redis, 'niclabCreateJob', CREATE);
  }

  async create(id: string, spec: JobSpec, runsTotal: number, owner = 'anonymous', now = new Date()): Promise<Job> {
    const created = await this.createWithin(id, spec, { runsTotal, owner, now });
    return created as Job;
  }

  /**
   * Creates the job only while its owner has fewer than `maxActive` jobs queued or running,
   * checked and created in one step (racing submissions never both take the last place);
   * otherwise returns how many it has. Without `maxActive`, always creates.
   */
  async createWithin(id: string, spec: JobSpec, { runsTotal, owner, maxActive, now = new Date(), expansion }: { runsTotal: number; owner: string; maxActive?: number; now?: Date; expansion?: Job['expansion'] }): Promise<Job | { active: number }> {
    const createdAt = now.toISOString();
    const member = `${String(now.getTime()).padStart(15, '0')}:${id}`;
    const fields = {
      id, status: 'queued', spec: JSON.stringify(spec), owner, createdAt, startedAt: '', finishedAt: '',
      runsDone: 0, runsTotal, error: '', waitingFor: '', member, ...(expansion ? { expansion: JSON.stringify(expansion) } : {}),
    };
    const active = await this.createScript(
      [this.keys.job(id), this.keys.jobIndex(), this.keys.jobIndex('queued'), this.keys.ownerActive(owner)],
      member, this.keys.job(''), maxActive ?? '', id, ...Object.entries(fields).flat(),
    );
    if (active >= 0) return { active };
    return { id, status: 'queued', spec, ...(expansion ? { expansion } : {}), owner, createdAt, startedAt: null, finishedAt: null, progress: { runsDone: 0, runsTotal }, error: null, finding: null, waitingFor: null };
  }

  async status(id: string): Promise<JobStatus | null> {
    return (await this.redis.hget(this.keys.job(id), 'status')) as JobStatus | null;
  }

  async get(id: string): Promise<Job | null> {
    return toJob(await this.redis.hgetall(this.keys.job(id)));
  }

  /** How many jobs are in each of `statuses` now (read from the per-status indexes in one round trip). */
  async countByStatus<S extends JobStatus>(statuses: readonly S[]): Promise<Record<S, number>> {
    const pipeline = this.redis.pipeline();
    for (const status of statuses) pipeline.zcard(this.keys.jobIndex(status));
    const replies = (await pipeline.exec()) ?? [];
    return Object.fromEntries(statuses.map((status, i) => [status, Number(replies[i]?.[1] ?? 0)])) as Record<S, number>;
  }

  /** Newest first; the cursor is opaque to callers. Returns null for a cursor that is not one of ours. */
  async list(options: { status?: JobStatus; limit: number; cursor?: string }): Promise<JobPage | null> {
    let max = '+';
    if (options.cursor) {
      const member = Buffer.from(options.cursor, 'base64url').toString('utf8');
      if (!/^\d{15}:[0-9a-f-]{36}$/.test(member)) return null;
      max = `(${member}`;
    }
    const members = await this.redis.zrange(this.keys.jobIndex(options.status), max, '-', 'BYLEX', 'REV', 'LIMIT', 0, options.limit + 1);
    const page = members.slice(0, options.limit);
    const pipeline = this.redis.pipeline();
    for (const member of page) pipeline.hgetall(this.keys.job(member.slice(16)));
    const rows = (await pipeline.exec()) ?? [];
    const items = rows.map(([, row]) => toJob(row as Record<string, string>)).filter((job): job is Job => job !== null);
    const last = page.at(-1);
    return { items, nextCursor: members.length > options.limit && last ? Buffer.from(last).toString('base64url') : null };
  }

  /** Atomically moves `id` from one of `from` to `to`; false when it was not in one of `from`. */
  async transition(id: string, from: readonly JobStatus[], to: JobStatus, patch: JobPatch = {}): Promise<boolean> {
    const fields: string[] = [];
    for (const [key, value] of Object.entries(patch)) {
      if (value === undefined) continue;
      fields.push(key, typeof value === 'object' ? (value === null ? '' : JSON.stringify(value)) : String(value));
    }
    const moved = (await this.transitionScript([this.keys.job(id), this.keys.jobIndex()], from.join(','), to, ...fields)) === 1;
    if (moved) {
      const job = await this.get(id);
      if (job) {
        for (const observer of this.observers) await observer.jobMoved?.(job, to);
        if (TERMINAL_STATUSES.includes(to)) {
          let read: Promise<Run[]> | undefined;
          const runs = () => (read ??= this.listRuns(id));
          for (const observer of this.observers) await observer.jobEnded?.(job, runs);
        }
      }
    }
    return moved;
  }

  /** What the job waits for (interfaces others hold), or null when it waits for nothing. */
  async setWaiting(id: string, waitingFor: string[] | null): Promise<void> {
    await this.redis.hset(this.keys.job(id), 'waitingFor', waitingFor ? JSON.stringify(waitingFor) : '');
  }

  async setProgress(id: string, runsDone: number, runsTotal: number): Promise<void> {
    await this.redis.hset(this.keys.job(id), { runsDone, runsTotal });
    for (const observer of this.observers) await observer.progressed?.(id, runsDone, runsTotal);
  }

  async saveRun(run: Run): Promise<void> {
    await this.redis.hset(this.keys.runs(run.jobId), String(run.index).padStart(6, '0'), JSON.stringify(run));
    if (isFinished(run)) {
      const job = await this.get(run.jobId);
      if (job) for (const observer of this.observers) await observer.runEnded?.(job, run);
    }
  }

  /** Deletes a job with its runs and their raw output (retention); its run summaries stay. */
  async delete(id: string): Promise<void> {
    const [status, member] = await this.redis.hmget(this.keys.job(id), 'status', 'member');
    const runs = await this.listRuns(id);
    const multi = this.redis.multi().del(this.keys.job(id), this.keys.runs(id), this.keys.jobEventLog(id));
    for (const run of runs) multi.del(this.keys.runRaw(run.id));
    if (member) multi.zrem(this.keys.jobIndex(), member).zrem(this.keys.jobIndex(status ?? ''), member);
    await multi.exec();
  }

  /**
   * Finished jobs to delete: those that ended before `cutoff` (epoch ms), then the oldest
   * beyond `keep`. Reads at most `batch` candidates per call.
   */
  async expired(cutoff: number, keep: number, batch = 500): Promise<string[]> {
    const finished = TERMINAL_STATUSES.map((s) => this.keys.jobIndex(s));
    const total = (await Promise.all(finished.map((k) => this.redis.zcard(k)))).reduce((a, b) => a + b, 0);
    let excess = Math.max(0, total - keep);
    const expired: string[] = [];
    // The global index is ordered by creation time: walk it oldest first.
    for (let offset = 0; expired.length < batch; offset += batch) {
      const members = await this.redis.zrange(this.keys.jobIndex(), '-', '+', 'BYLEX', 'LIMIT', offset, batch);
      if (members.length === 0) break;
      const rows = await Promise.all(members.map((m) => this.redis.hmget(this.keys.job(m.slice(16)), 'status', 'finishedAt')));
      members.forEach((member, i) => {
        const [status, finishedAt] = rows[i]!;
        if (!status || !TERMINAL_STATUSES.includes(status as JobStatus) || expired.length >= batch) return;
        const old = finishedAt ? Date.parse(finishedAt) < cutoff : false;
        if (old || excess > 0) {
          expired.push(member.slice(16));
          if (!old) excess -= 1;
        }
      });
      if (Number(members[0]!.slice(0, 15)) >= cutoff && excess === 0) break;
    }
    return expired;
  }

  async getRun(jobId: string, index: number): Promise<Run | null> {
    const row = await this.redis.hget(this.keys.runs(jobId), String(index).padStart(6, '0'));
    return row ? (JSON.parse(row) as Run) : null;
  }

  async listRuns(jobId: string): Promise<Run[]> {
    const all = await this.redis.hgetall(this.keys.runs(jobId));
    return Object.keys(all).sort().map((field) => JSON.parse(all[field] as string) as Run);
  }
}

function toJob(row: Record<string, string> | null | undefined): Job | null {
  if (!row || !row.id) return null;
  return {
    id: row.id,
    status: row.status as JobStatus,
    spec: JSON.parse(row.spec ?? '{}') as JobSpec,
    ...(row.expansion ? { expansion: JSON.parse(row.expansion) as NonNullable<Job['expansion']> } : {}),
    ...(row.pairs ? { pairs: JSON.parse(row.pairs) as NonNullable<Job['pairs']> } : {}),
    owner: row.owner || 'anonymous',
    createdAt: row.createdAt ?? '',
    startedAt: row.startedAt || null,
    finishedAt: row.finishedAt || null,
    progress: { runsDone: Number(row.runsDone ?? 0), runsTotal: Number(row.runsTotal ?? 0) },
    error: row.error ? (JSON.parse(row.error) as ErrorInfo) : null,
    finding: row.finding ? (JSON.parse(row.finding) as NonNullable<Job['finding']>) : null,
    waitingFor: row.waitingFor ? (JSON.parse(row.waitingFor) as string[]) : null,
  };
}
