/**
 * The history of run summaries: one compact JSON per finished run in a sorted set by end
 * time, kept longer than the runs themselves (no intervals, no diagnostics), for scripts and
 * Grafana.
 */
import type { Redis } from 'ioredis';
import type { Job, Run } from './contract.js';
import type { components } from './generated/openapi.js';
import type { Keys } from './keys.js';

export type RunSummary = components['schemas']['RunSummary'];

export function summarizeRun(job: Job, run: Run): RunSummary {
  return {
    runId: run.id,
    jobId: job.id,
    index: run.index,
    finishedAt: run.finishedAt ?? new Date().toISOString(),
    status: run.status,
    engine: job.spec.engine,
    protocol: job.spec.protocol,
    test: job.spec.test,
    labels: job.spec.labels ?? {},
    point: run.point,
    error: run.error?.code ?? null,
    flows: run.flows.map((f) => {
      const [src, dst] = f.direction === 'forward' ? [f.from, f.to] : [f.to, f.from];
      return {
        flowIndex: f.flowIndex,
        direction: f.direction,
        src,
        dst,
        bitsPerSecond: f.bitsPerSecond,
        retransmits: f.retransmits,
        udpLossRatio: f.udp?.lossRatio ?? null,
        jitterSeconds: f.udp?.jitterSeconds ?? null,
        transactionsPerSecond: f.rr?.transactionsPerSecond ?? null,
        rttP50Seconds: f.rr?.rttSeconds.p50 ?? null,
        pathVerified: f.pathVerified,
      };
    }),
  };
}

export interface ResultQuery {
  from: number;
  to: number;
  agent?: string;
  interface?: string;
  schedule?: string;
  /** `key=value` of the job's labels. */
  label?: string;
  limit: number;
}

export class Results {
  constructor(private readonly redis: Redis, private readonly keys: Keys) {}

  async add(job: Job, run: Run): Promise<void> {
    const summary = summarizeRun(job, run);
    await this.redis.zadd(this.keys.results, Date.parse(summary.finishedAt), JSON.stringify(summary));
  }

  /** Oldest first within [from, to] (epoch ms), filtered; at most `limit`, and whether more matched. */
  async query(q: ResultQuery): Promise<{ items: RunSummary[]; truncated: boolean }> {
    const items: RunSummary[] = [];
    const [labelKey, labelValue] = q.label ? [q.label.slice(0, q.label.indexOf('=')), q.label.slice(q.label.indexOf('=') + 1)] : [];
    const matches = (s: RunSummary) =>
      (!q.schedule || s.labels.schedule === q.schedule) &&
      (!labelKey || s.labels[labelKey] === labelValue) &&
      (!q.agent && !q.interface
        ? true
        : s.flows.some((f) => [f.src, f.dst].some((e) => (!q.agent || e.agent === q.agent) && (!q.interface || e.interface === q.interface))));
    // Pages through the time range so that filters never load it all at once.
    const page = 1000;
    for (let offset = 0; ; offset += page) {
      const members = await this.redis.zrangebyscore(this.keys.results, q.from, q.to, 'LIMIT', offset, page);
      for (const member of members) {
        const summary = JSON.parse(member) as RunSummary;
        if (!matches(summary)) continue;
        if (items.length === q.limit) return { items, truncated: true };
        items.push(summary);
      }
      if (members.length < page) return { items, truncated: false };
    }
  }

  /** Drops summaries that ended before `cutoff` (epoch ms); returns how many. */
  async expire(cutoff: number): Promise<number> {
    return this.redis.zremrangebyscore(this.keys.results, '-inf', `(${cutoff}`);
  }
}
