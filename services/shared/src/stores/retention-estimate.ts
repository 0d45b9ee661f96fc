import type { Redis } from 'ioredis';
import type { Config } from '../runtime/config.js';
import type { Keys } from './keys.js';

const DAY_MS = 24 * 3600 * 1000;
/** A history younger than this is not yet a rate: its runs are counted over this much at least. */
const MIN_SPAN_MS = 3600 * 1000;
/** Finished jobs and agents sampled for their size. */
const SAMPLE = 20;

/** What the retention settings imply Redis will hold, at the run rate measured in this Redis. */
export interface RetentionEstimate {
  /** The bytes implied in all: the sum of `parts`. */
  bytes: number;
  parts: { jobs: number; history: number; agents: number };
  /** Runs ended per day: the history's last day (or its span, when younger, at least an hour). */
  runsPerDay: number;
  /** Redis's maxmemory (0: none set). */
  maxmemory: number;
}

/**
 * How long a stored estimate is shown: five of the coordinators' one-minute estimates. With no
 * coordinator left to renew it, /metrics drops the figures rather than show a stale one.
 */
export const RETENTION_ESTIMATE_TTL_SECONDS = 300;

/** Stores an estimate for every API replica's /metrics: one key, so the replicas agree. */
export async function storeRetention(redis: Redis, keys: Keys, estimate: RetentionEstimate): Promise<void> {
  await redis.set(keys.retentionEstimate, JSON.stringify(estimate), 'EX', RETENTION_ESTIMATE_TTL_SECONDS);
}

/** The stored estimate, or null when no coordinator made one in the last five minutes. */
export async function storedRetention(redis: Redis, keys: Keys): Promise<RetentionEstimate | null> {
  const json = await redis.get(keys.retentionEstimate);
  return json ? (JSON.parse(json) as RetentionEstimate) : null;
}

type RetentionSettings = Pick<Config, 'retentionDays' | 'retentionJobs' | 'resultsRetentionDays'>;

const usage = async (redis: Redis, key: string) => Number((await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) ?? 0);

/**
 * The Redis memory the retention settings (NICLAB_RETENTION_DAYS and _JOBS for finished jobs,
 * NICLAB_RESULTS_RETENTION_DAYS for the history) imply at the measured run rate, with the
 * fleet as it is, in bytes as Redis counts them (MEMORY USAGE):
 * - jobs: runs kept (runs a day × the days kept, at most NICLAB_RETENTION_JOBS jobs' worth) ×
 *   the bytes a run costs in the newest finished jobs (record, runs, raw output);
 * - history: runs a day × NICLAB_RESULTS_RETENTION_DAYS × a summary's bytes (data and index);
 * - agents: each registered agent's record, and its task queue's event stream at its maxLen
 *   (`agentQueueEvents` entries of the size its stream's entries have now).
 * What it leaves out (schedules, change points, the per-agent history indexes, Redis's own
 * overhead and fragmentation) is why maxmemory wants headroom beyond it.
 */
export async function estimateRetention(redis: Redis, keys: Keys, settings: RetentionSettings, agentQueueEvents: number, now = Date.now()): Promise<RetentionEstimate> {
  const [ended, oldest, historyRuns, historyBytes, dataBytes, maxmemoryReply] = await Promise.all([
    redis.zcount(keys.history, now - DAY_MS, now),
    redis.zrange(keys.history, 0, 0, 'WITHSCORES'),
    redis.zcard(keys.history),
    usage(redis, keys.history),
    usage(redis, keys.historyData),
    redis.info('memory'), // not CONFIG GET, which managed Redis services often refuse
  ]);
  const span = oldest.length === 2 ? Math.min(DAY_MS, Math.max(MIN_SPAN_MS, now - Number(oldest[1]))) : DAY_MS;
  const runsPerDay = (ended * DAY_MS) / span;

  // A run's bytes in the job store: the newest finished jobs' records, run lists and raw output.
  const finished = (await Promise.all(['succeeded', 'failed', 'canceled'].map((status) => redis.zrange(keys.jobIndex(status), '+', '-', 'BYLEX', 'REV', 'LIMIT', 0, SAMPLE))))
    .flat().sort().reverse().slice(0, SAMPLE); // members begin with their creation time
  let jobBytes = 0;
  let jobRuns = 0;
  let jobs = 0;
  for (const member of finished) {
    const id = member.slice(16);
    const runIds = (await redis.hvals(keys.runs(id))).map((json) => (JSON.parse(json) as { id?: string }).id).filter((run): run is string => !!run);
    const sizes = await Promise.all([usage(redis, keys.job(id)), usage(redis, keys.runs(id)), ...runIds.map((run) => usage(redis, keys.runRaw(run)))]);
    jobBytes += sizes.reduce((a, b) => a + b, 0);
    jobRuns += Math.max(1, runIds.length);
    jobs++;
  }
  const bytesPerJobRun = jobRuns > 0 ? jobBytes / jobRuns : 0;
  const runsPerJob = jobs > 0 ? jobRuns / jobs : 1;
  const keptJobRuns = Math.min(runsPerDay * settings.retentionDays, settings.retentionJobs * runsPerJob);
  const bytesPerSummary = historyRuns > 0 ? (historyBytes + dataBytes) / historyRuns : 0;

  // The fleet: agents' records, and their task queues' event streams at their maxLen.
  const agentIds = await redis.zrange(keys.agents, 0, -1);
  let recordBytes = 0;
  let entryBytes = 0;
  let entries = 0;
  for (const id of agentIds.slice(0, SAMPLE)) {
    const events = `${keys.bull}:${keys.agentQueue(id)}:events`;
    const [record, stream, length] = await Promise.all([usage(redis, keys.agent(id)), usage(redis, events), redis.xlen(events)]);
    recordBytes += record;
    if (length > 0) {
      entryBytes += stream;
      entries += length;
    }
  }
  const sampled = Math.min(agentIds.length, SAMPLE);
  const perAgent = sampled > 0 ? recordBytes / sampled + (entries > 0 ? (entryBytes / entries) * agentQueueEvents : 0) : 0;

  const parts = {
    jobs: Math.round(keptJobRuns * bytesPerJobRun),
    history: Math.round(runsPerDay * settings.resultsRetentionDays * bytesPerSummary),
    agents: Math.round(agentIds.length * perAgent),
  };
  return { bytes: parts.jobs + parts.history + parts.agents, parts, runsPerDay, maxmemory: Number(/^maxmemory:(\d+)/m.exec(maxmemoryReply)?.[1] ?? 0) };
}
