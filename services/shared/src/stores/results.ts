/**
 * The history of run summaries: one compact JSON per finished run, indexed by end time, kept
 * longer than the runs themselves (no intervals, no diagnostics), for scripts and Grafana.
 */
import type { Redis } from 'ioredis';
import type { Job, Run } from '../domain/contract.js';
import { historyFigures } from '../domain/figures/columns.js';
import { pointLabel } from '../domain/plan.js';
import { csvCell } from '../domain/text-table.js';
import type { components } from '../generated/openapi.js';
import type { Keys } from './keys.js';
import type { JobObserver } from './job-observer.js';
import { defineScript, type Script } from '../runtime/redis.js';

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
        // The history's figures are the catalogue's columns (figures/columns.ts), read as a report leg reads them.
        ...historyFigures(f),
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
  /** The run id of the previous page's last summary (its `next`): this page starts after it. */
  after?: string;
}

/** Trims one index to the retention and forgets it once empty, in one step (an add between the two would otherwise be lost to retention). */
const TRIM_INDEX = `
--[[
  KEYS[1]     one history index, keys.history or keys.historyIndex(kind, value)
  KEYS[2]     the set of every index, keys.historyIndexes
  ARGV[1]     the oldest end time kept (epoch ms): older entries go
]]
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZCARD', KEYS[1]) == 0 then redis.call('SREM', KEYS[2], KEYS[1]) end
return 0
`;

/** Reads of a range go this many ids at a time, so no query loads a whole history at once. */
const PAGE = 1000;

/**
 * The history: each summary's JSON once (a hash by run id), and its run id in sorted sets by
 * end time: the whole history, one per agent and one per schedule, so a query for an agent
 * (or one of its interfaces) or a schedule reads only those runs, however long the history is.
 */
export class Results implements JobObserver {
  private readonly trimIndex: Script;

  constructor(private readonly redis: Redis, private readonly keys: Keys) {
    this.trimIndex = defineScript(redis, 'niclabTrimHistoryIndex', TRIM_INDEX);
  }

  async runEnded(job: Job, run: Run): Promise<void> {
    await this.addSummaries([summarizeRun(job, run)]);
  }

  /** Stores summaries with their indexes, each atomically. */
  async addSummaries(summaries: RunSummary[]): Promise<void> {
    const multi = this.redis.multi();
    for (const summary of summaries) {
      const at = Date.parse(summary.finishedAt);
      const indexes = this.indexesOf(summary);
      multi.hset(this.keys.historyData, summary.runId, JSON.stringify(summary)).zadd(this.keys.history, at, summary.runId);
      for (const key of indexes) multi.zadd(key, at, summary.runId);
      if (indexes.length > 0) multi.sadd(this.keys.historyIndexes, ...indexes);
    }
    await multi.exec();
  }

  private indexesOf(summary: RunSummary): string[] {
    const keys = new Set<string>();
    for (const flow of summary.flows) {
      for (const end of [flow.src, flow.dst]) {
        keys.add(this.keys.historyIndex('agent', end.agent));
      }
    }
    if (summary.labels.schedule) keys.add(this.keys.historyIndex('schedule', summary.labels.schedule));
    return [...keys];
  }

  /**
   * Oldest first within [from, to] (epoch ms), filtered; at most `limit`, whether more matched
   * and the cursor of the page after (the last summary's run id), or `null` when `after` is not
   * in the index read (expired, or no run of these filters). Summaries that ended in the same
   * millisecond are in run-id order, so a page ends and the next begins between two of them.
   */
  async query(q: ResultQuery): Promise<{ items: RunSummary[]; truncated: boolean; next: string | null } | null> {
    const items: RunSummary[] = [];
    const [labelKey, labelValue] = q.label ? [q.label.slice(0, q.label.indexOf('=')), q.label.slice(q.label.indexOf('=') + 1)] : [];
    const matches = (s: RunSummary) =>
      (!q.schedule || s.labels.schedule === q.schedule) &&
      (!labelKey || s.labels[labelKey] === labelValue) &&
      (!q.agent && !q.interface
        ? true
        : s.flows.some((f) => [f.src, f.dst].some((e) => (!q.agent || e.agent === q.agent) && (!q.interface || e.interface === q.interface))));
    // The narrowest index that holds every match; the filter then checks the rest (an agent's
    // interface is read from the agent's index: a host has few, and a third index per run
    // would cost more memory than the filter costs time).
    const source =
      q.agent ? this.keys.historyIndex('agent', q.agent)
      : q.schedule ? this.keys.historyIndex('schedule', q.schedule)
      : this.keys.history;
    let from: number | string = q.from;
    // Skipping the summaries of the cursor's millisecond up to the cursor itself.
    let skipThrough = q.after;
    if (q.after) {
      const score = await this.redis.zscore(source, q.after);
      if (score === null) return null;
      from = score;
    }
    for (let offset = 0; ; offset += PAGE) {
      let ids = await this.redis.zrangebyscore(source, from, q.to, 'LIMIT', offset, PAGE);
      const read = ids.length;
      if (skipThrough) {
        const at = ids.indexOf(skipThrough);
        ids = at >= 0 ? ids.slice(at + 1) : [];
        if (at >= 0) skipThrough = undefined;
      }
      const texts = ids.length > 0 ? await this.redis.hmget(this.keys.historyData, ...ids) : [];
      for (const text of texts) {
        if (!text) continue; // expired between the two reads
        const summary = JSON.parse(text) as RunSummary;
        if (!matches(summary)) continue;
        if (items.length === q.limit) return { items, truncated: true, next: items.at(-1)!.runId };
        items.push(summary);
      }
      if (read < PAGE) return { items, truncated: false, next: null };
    }
  }

  /** Drops summaries that ended before `cutoff` (epoch ms), and their index entries; returns how many. */
  async expire(cutoff: number): Promise<number> {
    let dropped = 0;
    for (;;) {
      const ids = await this.redis.zrangebyscore(this.keys.history, '-inf', `(${cutoff}`, 'LIMIT', 0, PAGE);
      if (ids.length === 0) break;
      await this.redis.multi().hdel(this.keys.historyData, ...ids).zrem(this.keys.history, ...ids).exec();
      dropped += ids.length;
    }
    for (const key of await this.redis.smembers(this.keys.historyIndexes)) await this.trimIndex([key, this.keys.historyIndexes], `(${cutoff}`);
    return dropped;
  }

  /**
   * Moves summaries stored in the layout before history indexes (JSON members of one sorted
   * set) into this one. Safe to run from several coordinators at once: adding twice is harmless.
   */
  async migrate(): Promise<number> {
    let moved = 0;
    for (;;) {
      const members = await this.redis.zrange(this.keys.legacyResults, 0, PAGE - 1);
      if (members.length === 0) return moved;
      await this.addSummaries(members.map((member) => JSON.parse(member) as RunSummary));
      await this.redis.zrem(this.keys.legacyResults, ...members);
      moved += members.length;
    }
  }
}

const FLOW_COLUMNS = ['bitsPerSecond', 'retransmits', 'udpLossRatio', 'jitterSeconds', 'transactionsPerSecond', 'rttP50Seconds', 'pathVerified'] as const;

/** The history as CSV: a header row, then one row per summary and flow (a summary without flows, one row). */
export function historyCsv(items: RunSummary[]): string {
  const header = ['finishedAt', 'jobId', 'runId', 'index', 'status', 'error', 'engine', 'protocol', 'test', 'point', 'labels', 'flowIndex', 'direction', 'from', 'to', ...FLOW_COLUMNS];
  const rows = items.flatMap((s) => {
    const run = [s.finishedAt, s.jobId, s.runId, s.index, s.status, s.error, s.engine, s.protocol, s.test, pointLabel(s.point), Object.entries(s.labels).sort().map(([k, v]) => `${k}=${v}`).join(';')];
    if (s.flows.length === 0) return [[...run, ...Array<null>(4 + FLOW_COLUMNS.length).fill(null)]];
    return s.flows.map((f) => [...run, f.flowIndex, f.direction, `${f.src.agent}:${f.src.interface}`, `${f.dst.agent}:${f.dst.interface}`, ...FLOW_COLUMNS.map((c) => f[c])]);
  });
  return [header, ...rows].map((r) => r.map(csvCell).join(',')).join('\n') + '\n';
}

/** The history's figures as OpenMetrics families, for `promtool tsdb create-blocks-from openmetrics`. */
const HISTORY_FAMILIES: { column: (typeof FLOW_COLUMNS)[number]; name: string; help: string }[] = [
  { column: 'bitsPerSecond', name: 'niclab_history_throughput_bits_per_second', help: "A run's throughput per flow (payload bits/s at the receiver)" },
  { column: 'retransmits', name: 'niclab_history_retransmits', help: "A run's TCP retransmits per flow" },
  { column: 'udpLossRatio', name: 'niclab_history_udp_loss_ratio', help: "A run's UDP loss ratio per flow" },
  { column: 'jitterSeconds', name: 'niclab_history_jitter_seconds', help: "A run's UDP jitter per flow" },
  { column: 'transactionsPerSecond', name: 'niclab_history_transactions_per_second', help: "A run's request/response transactions per second per flow" },
  { column: 'rttP50Seconds', name: 'niclab_history_rtt_p50_seconds', help: "A run's median round trip per flow" },
  { column: 'pathVerified', name: 'niclab_history_path_verified', help: "1 when a run's interface counters showed its bytes on the named interfaces, 0 when they did not" },
];

const omLabel = (value: string) => value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

/**
 * The history as OpenMetrics text: per figure a gauge family, a sample per flow of each run that
 * measured it, stamped with the run's end (seconds). Series: the flow's link and direction, the
 * engine, protocol and test, the sweep point, the schedule and the flow's index. A second
 * sample of a series in one millisecond is left out (a TSDB takes one per timestamp).
 */
export function historyOpenMetrics(items: RunSummary[]): string {
  const lines: string[] = [];
  for (const family of HISTORY_FAMILIES) {
    // Grouped by series (OpenMetrics keeps a series' samples together), each in time order.
    const samples = new Map<string, string[]>();
    const last = new Map<string, number>();
    for (const s of items) {
      const at = Date.parse(s.finishedAt);
      for (const f of s.flows) {
        const value = f[family.column];
        if (value === null || value === undefined) continue;
        const labels = {
          src_agent: f.src.agent, src_interface: f.src.interface, dst_agent: f.dst.agent, dst_interface: f.dst.interface, direction: f.direction,
          engine: s.engine, protocol: s.protocol, test: s.test, point: pointLabel(s.point), schedule: s.labels.schedule ?? '', flow: String(f.flowIndex),
        };
        const series = Object.entries(labels).map(([k, v]) => `${k}="${omLabel(v)}"`).join(',');
        if ((last.get(series) ?? -Infinity) >= at) continue;
        last.set(series, at);
        const line = `${family.name}{${series}} ${typeof value === 'boolean' ? Number(value) : value} ${(at / 1000).toFixed(3)}`;
        samples.set(series, [...(samples.get(series) ?? []), line]);
      }
    }
    if (samples.size === 0) continue;
    lines.push(`# HELP ${family.name} ${family.help}.`, `# TYPE ${family.name} gauge`, ...[...samples.values()].flat());
  }
  return `${[...lines, '# EOF'].join('\n')}\n`;
}
