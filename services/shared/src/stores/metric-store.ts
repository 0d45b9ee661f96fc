/**
 * What /metrics shows, kept in Redis as it happens: outcome counters, histogram buckets and
 * the last result of every measured link. Any API replica computes the same metrics from it
 * at scrape time.
 */
import type { Redis } from 'ioredis';
import { TERMINAL_STATUSES, type FlowResult, type Job, type JobStatus, type ProbePhase, type Run, type Verdict } from '../domain/contract.js';
import { roundTrips } from '../domain/figure-directions.js';
import { PLACES, type Place } from '../domain/attribution.js';
import type { Keys } from './keys.js';
import type { JobObserver } from './job-observer.js';
import { flowSpec } from '../domain/flow-tests.js';
import { campaignOf } from '../domain/campaigns/index.js';
import type { SearchLabels, SearchValues } from '../domain/campaigns/campaign.js';

export type { SearchLabels, SearchValues } from '../domain/campaigns/campaign.js';

/** Upper bounds (seconds) of the job histograms' buckets. */
export const HISTOGRAMS = {
  job_duration_seconds: [1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400],
  job_queue_wait_seconds: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600],
} as const;
export type HistogramName = keyof typeof HISTOGRAMS;

/** The labels of a link's last result: a small fixed set, never a job or run id. */
export interface LinkLabels {
  src_agent: string;
  src_interface: string;
  dst_agent: string;
  dst_interface: string;
  engine: string;
  protocol: string;
  test: string;
  direction: string;
  schedule: string;
}


type Quantiles = { p50: number; p90: number; p99: number };
const quantiles = (s: Quantiles): Quantiles => ({ p50: s.p50, p90: s.p90, p99: s.p99 });

/** One link's last result, in base units. */
export interface LinkValues {
  bitsPerSecond: number;
  endedAt: number;
  pathVerified: number | null;
  retransmits: number | null;
  udpLossRatio: number | null;
  jitterSeconds: number | null;
  senderCpuSecondsPerBit: number | null;
  receiverCpuSecondsPerBit: number | null;
  rttSeconds: { p50: number; p90: number; p99: number } | null;
  /** A probe run's one-way delays (both ends on one clock) and loss, each way (absent before the probe). */
  probe?: { forwardDelay: Quantiles | null; returnDelay: Quantiles | null; loss: { forward: number | null; return: number | null }; ipdv: Quantiles } | null;
  /** A UDP run's lost datagrams by place (absent in results stored before there was one). */
  udpLost?: Record<Place, number> | null;
  bottleneck?: Verdict | null;
}

const seconds = (from: string | null, to: string | null) => (from && to ? Math.max(0, (Date.parse(to) - Date.parse(from)) / 1000) : null);

/** /metrics' counts, histograms and last link results in Redis: a JobStore observer. */
export class MetricStore implements JobObserver {
  constructor(private readonly redis: Redis, private readonly keys: Keys) {}

  private observe(multi: ReturnType<Redis['multi']>, name: HistogramName, value: number): void {
    const key = this.keys.statsHistogram(name);
    for (const le of HISTOGRAMS[name]) if (value <= le) multi.hincrby(key, String(le), 1);
    multi.hincrby(key, '+Inf', 1).hincrby(key, 'count', 1).hincrbyfloat(key, 'sum', value);
  }

  /** A job moved to `status`: queue wait when it started, outcome and duration when it ended. */
  async jobMoved(job: Job, status: JobStatus): Promise<void> {
    const multi = this.redis.multi();
    if (status === 'running') {
      const wait = seconds(job.createdAt, job.startedAt);
      if (wait !== null) this.observe(multi, 'job_queue_wait_seconds', wait);
    } else if (TERMINAL_STATUSES.includes(status)) {
      multi.hincrby(this.keys.statsJobs, status, 1);
      const duration = seconds(job.startedAt, job.finishedAt);
      if (duration !== null) this.observe(multi, 'job_duration_seconds', duration);
    } else {
      return;
    }
    await multi.exec();
  }

  /** A run ended: its outcome, and each measured leg as its link's last result. */
  async runEnded(job: Job, run: Run): Promise<void> {
    const multi = this.redis.multi().hincrby(this.keys.statsRuns, run.status, 1);
    const endedAt = Date.parse(run.finishedAt ?? new Date().toISOString()) / 1000;
    for (const flow of run.flows) {
      if (flow.error || flow.bitsPerSecond === null) continue;
      multi.hset(this.keys.links, JSON.stringify(linkLabels(job, flow)), JSON.stringify(linkValues(flow, endedAt)));
    }
    await multi.exec();
  }

  async counts(which: 'jobs' | 'runs' | 'firings'): Promise<Record<string, number>> {
    const raw = await this.redis.hgetall({ jobs: this.keys.statsJobs, runs: this.keys.statsRuns, firings: this.keys.statsFirings }[which]);
    return Object.fromEntries(Object.entries(raw).map(([k, v]) => [k, Number(v)]));
  }

  async histogram(name: HistogramName): Promise<{ buckets: [string, number][]; sum: number; count: number }> {
    const raw = await this.redis.hgetall(this.keys.statsHistogram(name));
    const buckets = [...HISTOGRAMS[name].map(String), '+Inf'].map((le) => [le, Number(raw[le] ?? 0)] as [string, number]);
    return { buckets, sum: Number(raw.sum ?? 0), count: Number(raw.count ?? 0) };
  }

  /**
   * A search job that succeeded: what it found at each point, per direction of each pair, as
   * that link's latest search result at that size and loss goal (its campaign says which).
   */
  async jobEnded(job: Job, runs: () => Promise<Run[]>): Promise<void> {
    const campaign = campaignOf(job.spec);
    if (!campaign.searchLinks || job.status !== 'succeeded') return;
    const links = campaign.searchLinks(job, await runs());
    if (links.length === 0) return;
    const multi = this.redis.multi();
    for (const { labels, values } of links) multi.hset(this.keys.searchLinks, JSON.stringify(labels), JSON.stringify(values));
    await multi.exec();
  }

  /** Every link's latest search results, parsed (a few per link: one per size and target). */
  async searchLinks(): Promise<{ labels: SearchLabels; values: SearchValues }[]> {
    const raw = await this.redis.hgetall(this.keys.searchLinks);
    // Entries written before the series had `algorithm` or `exceed_ratio` are never overwritten by a later search: left out, not shown beside it.
    return Object.entries(raw)
      .map(([labels, values]) => ({ labels: JSON.parse(labels) as SearchLabels, values: JSON.parse(values) as SearchValues }))
      .filter(({ labels }) => labels.algorithm !== undefined && labels.exceed_ratio !== undefined);
  }

  /** The links as stored: JSON of the labels → JSON of the values (/metrics parses only what changed). */
  rawLinks(): Promise<Record<string, string>> {
    return this.redis.hgetall(this.keys.links);
  }

  /** Drops every link (and search link) with one of `agents` at either end: their series go. Returns how many. */
  async dropAgents(agents: string[]): Promise<number> {
    if (agents.length === 0) return 0;
    const gone = new Set(agents);
    let dropped = 0;
    for (const key of [this.keys.links, this.keys.searchLinks]) {
      const fields = (await this.redis.hkeys(key)).filter((labels) => {
        const { src_agent: src, dst_agent: dst } = JSON.parse(labels) as { src_agent?: string; dst_agent?: string };
        return gone.has(src ?? '') || gone.has(dst ?? '');
      });
      if (fields.length > 0) dropped += await this.redis.hdel(key, ...fields);
    }
    return dropped;
  }
}

/** The data direction's ends: `src` sends, `dst` receives (a reverse leg sends from the flow's `to`). */
export function linkLabels(job: Job, flow: FlowResult): LinkLabels {
  const [src, dst] = flow.direction === 'forward' ? [flow.from, flow.to] : [flow.to, flow.from];
  const own = flowSpec(job.spec, flow.flowIndex);
  return {
    src_agent: src.agent,
    src_interface: src.interface,
    dst_agent: dst.agent,
    dst_interface: dst.interface,
    // The flow's own test (an rr flow beside streams on the same path): its figures never land on the streams' series.
    engine: own.engine,
    protocol: job.spec.protocol,
    test: own.test,
    direction: flow.direction,
    schedule: job.spec.labels?.schedule ?? '',
  };
}

function probeValues(phase: ProbePhase): NonNullable<LinkValues['probe']> {
  const owd = phase.oneWayDelaySeconds;
  return {
    forwardDelay: owd ? quantiles(owd.forward) : null,
    returnDelay: owd ? quantiles(owd.return) : null,
    loss: { forward: phase.lossRatio.forward, return: phase.lossRatio.return },
    ipdv: quantiles(phase.ipdvSeconds.roundTrip),
  };
}

function linkValues(flow: FlowResult, endedAt: number): LinkValues {
  const perBit = (end: FlowResult['sender']) => (end && end.bytes > 0 ? end.cpuSeconds / (end.bytes * 8) : null);
  return {
    bitsPerSecond: flow.bitsPerSecond ?? 0,
    endedAt,
    pathVerified: flow.pathVerified === null ? null : flow.pathVerified ? 1 : 0,
    retransmits: flow.retransmits,
    udpLossRatio: flow.udp?.lossRatio ?? null,
    jitterSeconds: flow.udp?.jitterSeconds ?? null,
    senderCpuSecondsPerBit: perBit(flow.sender),
    receiverCpuSecondsPerBit: perBit(flow.receiver),
    rttSeconds: roundTrips(flow) ? quantiles(roundTrips(flow)!) : null,
    probe: flow.probe ? probeValues(flow.probe.loaded) : null,
    udpLost: flow.lossAttribution ? Object.fromEntries(PLACES.map((p) => [p, flow.lossAttribution![p]])) as Record<Place, number> : null,
    bottleneck: flow.bottleneck?.verdict ?? null,
  };
}
