/**
 * The families /metrics shows beyond this replica's own process metrics: each one's name,
 * help, type and labels, and how its samples are computed from one snapshot of the stores.
 * Adding a family is a line here; how it is written out is exposition.ts's business.
 */
import type { Agent } from '@niclab/shared/domain/contract';
import { PLACES, VERDICTS } from '@niclab/shared/domain/attribution';
import type { ChangePoint, ChangeStore } from '@niclab/shared/stores/changes';
import { HISTOGRAMS, type HistogramName, type LinkLabels, type LinkValues, type SearchLabels, type SearchValues } from '@niclab/shared/stores/metric-store';
import type { RetentionEstimate } from '@niclab/shared/stores/retention-estimate';

/** A gauge's p50/p90/p99 as quantile-labelled samples (none when absent). */
function quantileSamples(q: { p50: number; p90: number; p99: number } | null | undefined, labels: Record<string, string> = {}) {
  return q ? ([['0.5', q.p50], ['0.9', q.p90], ['0.99', q.p99]] as const).map(([quantile, value]) => ({ labels: { ...labels, quantile }, value })) : [];
}

export const JOB_STATUSES = ['queued', 'running', 'succeeded', 'failed', 'canceled'] as const;
export const QUEUE_STATES = ['waiting', 'active', 'delayed', 'prioritized', 'waiting-children', 'completed', 'failed'] as const;

/** A measured link's last result, as the metric store keeps it. */
export interface Link {
  labels: LinkLabels;
  values: LinkValues;
}

/** What one scrape reads from the stores, shared by every family it renders. */
export interface Snapshot {
  links: Link[];
  /** Each link's latest rate-search result per datagram size and target. */
  searches: { labels: SearchLabels; values: SearchValues }[];
  agents: Agent[];
  jobs: Record<string, number>;
  runs: Record<string, number>;
  firings: Record<string, number>;
  jobsByStatus: Record<string, number>;
  queue: Record<string, number>;
  leasesHeld: number;
  histograms: Record<HistogramName, { buckets: [string, number][]; sum: number; count: number }>;
  /** Every stored change point. */
  changes: Awaited<ReturnType<ChangeStore['forMetrics']>>;
  /** What the retention settings imply Redis holds (stores/retention-estimate.ts); null until first estimated. */
  retention: RetentionEstimate | null;
}

export type FamilyType = 'gauge' | 'counter' | 'histogram';

/** One series of a family; `suffix` names a histogram's `_bucket`, `_sum` and `_count`. */
export interface Sample {
  labels: Record<string, string>;
  value: number;
  suffix?: string;
}

/** A family computed from the whole snapshot. */
export interface Family {
  name: string;
  help: string;
  type: FamilyType;
  samples(snapshot: Snapshot): Sample[];
  /**
   * A family whose series are each agent's, from its interfaces alone: its samples per agent.
   * The exposition renders an agent's lines once per interfaces array (an agent's is the same
   * array while its record is, stores/agent-registry.ts), not every scrape: 8,000 interface
   * series of 1,000 agents were most of what a scrape rendered.
   */
  perAgent?(agent: Agent): Sample[];
}

/**
 * A family with a group of series per measured link: each carries the link's labels
 * (LINK_LABELS, in that order), then its own `labels` if any. A link without the figure has none.
 */
export interface LinkFamily {
  name: string;
  help: string;
  type: 'gauge';
  samples(values: LinkValues): { labels?: Record<string, string>; value: number }[];
}

export const LINK_LABELS: (keyof LinkLabels)[] = ['src_agent', 'src_interface', 'dst_agent', 'dst_interface', 'engine', 'protocol', 'test', 'direction', 'schedule'];

const outcomes = (counts: Record<string, number>): Sample[] => ['succeeded', 'failed', 'canceled'].map((outcome) => ({ labels: { outcome }, value: counts[outcome] ?? 0 }));

const histogram = (name: HistogramName, help: string): Family => ({
  name: `niclab_${name}`, help, type: 'histogram',
  samples: (s) => {
    const { buckets, sum, count } = s.histograms[name];
    return [...buckets.map(([le, value]) => ({ suffix: '_bucket', labels: { le }, value })), { suffix: '_sum', labels: {}, value: sum }, { suffix: '_count', labels: {}, value: count }];
  },
});

const interfaceGauge = (name: string, help: string, pick: (i: Agent['interfaces'][number]) => number | null): Family => {
  const perAgent = (agent: Agent): Sample[] =>
    agent.interfaces.flatMap((iface) => {
      const value = pick(iface);
      return value === null ? [] : [{ labels: { agent: agent.id, interface: iface.name }, value }];
    });
  return { name, help, type: 'gauge', perAgent, samples: (s) => s.agents.flatMap(perAgent) };
};

const HISTOGRAM_HELP: Record<HistogramName, string> = {
  job_duration_seconds: 'Jobs from start to end (seconds).',
  job_queue_wait_seconds: 'Jobs from submission to start (seconds).',
};

/** The open change points by schedule, figure and verdict (bounded: schedules × 5 figures × 2); `value` of each group. */
function openChangeSamples(s: Snapshot, value: (group: ChangePoint[]) => number): Sample[] {
  const groups = new Map<string, ChangePoint[]>();
  for (const c of s.changes.open) {
    const key = JSON.stringify([c.series.schedule, c.series.figure, c.verdict]);
    groups.set(key, [...(groups.get(key) ?? []), c]);
  }
  return [...groups].map(([key, group]) => {
    const [schedule, figure, verdict] = JSON.parse(key) as string[];
    return { labels: { schedule: schedule!, figure: figure!, verdict: verdict! }, value: value(group) };
  });
}

/** The fleet's families, in the order they are written. */
/** A sample per link's latest search that has the value (an MLRsearch's conditional throughput; a binary search has none). */
const searchSamples = (s: Snapshot, value: (v: SearchValues) => number | undefined): Sample[] =>
  s.searches.flatMap(({ labels, values }) => { const v = value(values); return v === undefined ? [] : [{ labels: { ...labels }, value: v }]; });

export const FLEET_FAMILIES: Family[] = [
  // Rate searches (RFC 2544): the latest result per link, datagram size and target.
  { name: 'niclab_search_rate_packets_per_second', help: 'Highest rate the last search on the link passed (per flow: a binary search\'s rate found, an MLRsearch goal\'s relevant lower bound), by algorithm, target (NDR or PDR), loss ratio and datagram size.', type: 'gauge', samples: (s) => searchSamples(s, (v) => v.packetsPerSecond) },
  { name: 'niclab_search_rate_wire_bits_per_second', help: 'The same rate on an IPv4 Ethernet wire (payload + 66 bytes a datagram).', type: 'gauge', samples: (s) => searchSamples(s, (v) => v.wireBitsPerSecond) },
  {
    name: 'niclab_search_conditional_throughput_packets_per_second', help: "An MLRsearch goal's Conditional Throughput on the link (per flow: its relevant lower bound × (1 − the goal's exceed-ratio quantile of the trial loss ratios there)), by the same labels; a binary search has none.", type: 'gauge',
    samples: (s) => searchSamples(s, (v) => v.conditionalPacketsPerSecond),
  },
  { name: 'niclab_search_timestamp_seconds', help: 'When the search behind the rate ended (Unix time).', type: 'gauge', samples: (s) => searchSamples(s, (v) => v.endedAt) },
  // Outcomes and the queue.
  { name: 'niclab_runs_total', help: 'Runs ended, by outcome.', type: 'counter', samples: (s) => outcomes(s.runs) },
  { name: 'niclab_jobs_total', help: 'Jobs ended, by outcome.', type: 'counter', samples: (s) => outcomes(s.jobs) },
  {
    name: 'niclab_schedule_firings_total', help: "Schedules' firings: job (a job was made), skipped (the previous one still at work), refused (the owner's policy limits refused the firing's expansion; its failed job says why).", type: 'counter',
    samples: (s) => ['job', 'skipped', 'refused'].map((outcome) => ({ labels: { outcome }, value: s.firings[outcome] ?? 0 })),
  },
  { name: 'niclab_jobs', help: 'Jobs by status now.', type: 'gauge', samples: (s) => Object.entries(s.jobsByStatus).map(([status, value]) => ({ labels: { status }, value })) },
  { name: 'niclab_queue_jobs', help: 'BullMQ jobs in the coordinators\' queue, by state.', type: 'gauge', samples: (s) => Object.entries(s.queue).map(([state, value]) => ({ labels: { state }, value })) },
  ...(Object.keys(HISTOGRAMS) as HistogramName[]).map((name) => histogram(name, HISTOGRAM_HELP[name])),
  // What the retention settings imply Redis will hold, beside the limit it has.
  {
    name: 'niclab_redis_retention_implied_bytes', help: "Redis memory the retention settings imply at the measured run rate (runs a day × days kept × a run's bytes; the fleet's agents with their task queues' event streams at their maxLen), by part: jobs, history, agents. Estimated by the coordinators once a minute and stored in Redis, so every API replica shows the same; absent when none did in five minutes.", type: 'gauge',
    samples: (s) => (s.retention ? Object.entries(s.retention.parts).map(([part, value]) => ({ labels: { part }, value })) : []),
  },
  { name: 'niclab_redis_retention_runs_per_day', help: 'The run rate that estimate is for: runs ended in the history\'s last day (or its span, when younger).', type: 'gauge', samples: (s) => (s.retention ? [{ labels: {}, value: s.retention.runsPerDay }] : []) },
  { name: 'niclab_redis_maxmemory_bytes', help: "Redis's maxmemory (0: no limit).", type: 'gauge', samples: (s) => (s.retention ? [{ labels: {}, value: s.retention.maxmemory }] : []) },
  // Agents and their interfaces.
  {
    name: 'niclab_agents', help: 'Registered agents, online or not.', type: 'gauge',
    samples: (s) => [
      { labels: { state: 'online' }, value: s.agents.filter((a) => a.online).length },
      { labels: { state: 'offline' }, value: s.agents.filter((a) => !a.online).length },
    ],
  },
  { name: 'niclab_agent_up', help: '1 while the agent heartbeats, 0 once it missed three heartbeats or stopped.', type: 'gauge', samples: (s) => s.agents.map((a) => ({ labels: { agent: a.id }, value: a.online ? 1 : 0 })) },
  interfaceGauge('niclab_interface_speed_bits_per_second', 'Link speed the driver reports (absent where it reports none, e.g. lo).', (i) => i.speedBitsPerSecond),
  interfaceGauge('niclab_interface_mtu_bytes', 'Interface MTU.', (i) => i.mtu),
  // Change points in the schedules' series (GET /v1/changes).
  { name: 'niclab_change_points_total', help: "Change points found in the schedules' series, acknowledged or not, by schedule, figure and verdict (better or worse).", type: 'counter', samples: (s) => s.changes.found.map(({ labels, count }) => ({ labels: { ...labels }, value: count })) },
  { name: 'niclab_change_points_open', help: 'Change points not acknowledged, by schedule, figure and verdict: the alert NiclabRegression fires on verdict="worse".', type: 'gauge', samples: (s) => openChangeSamples(s, (g) => g.length) },
  { name: 'niclab_change_point_last_timestamp_seconds', help: 'When the newest open change point was found (Unix time), by the same labels: a Grafana annotation query.', type: 'gauge', samples: (s) => openChangeSamples(s, (g) => Math.max(...g.map((c) => Date.parse(c.detectedAt) / 1000))) },
  { name: 'niclab_leases_held', help: 'Interfaces a run holds a lease on now.', type: 'gauge', samples: (s) => [{ labels: {}, value: s.leasesHeld }] },
];

const single = (value: number | null | undefined) => (value === null || value === undefined ? [] : [{ value }]);
const linkGauge = (name: string, help: string, pick: (v: LinkValues) => number | null | undefined): LinkFamily => ({ name, help, type: 'gauge', samples: (v) => single(pick(v)) });

/** The last result of every link, in the order they are written (after the fleet's). */
export const LINK_FAMILIES: LinkFamily[] = [
  linkGauge('niclab_link_throughput_bits_per_second', "Goodput of the link's last run, as received (bits/s).", (v) => v.bitsPerSecond),
  linkGauge('niclab_link_last_run_timestamp_seconds', "When the link's last run ended (Unix seconds). Prometheus samples at scrape time: this is the measurement's own time.", (v) => v.endedAt),
  linkGauge('niclab_link_path_verified', "1 when the named interfaces' counters carried the last run's bytes, 0 when they did not.", (v) => v.pathVerified),
  linkGauge('niclab_link_retransmits', "TCP retransmits of the link's last run (sender side).", (v) => v.retransmits),
  linkGauge('niclab_link_udp_loss_ratio', "UDP datagrams lost / sent in the link's last run.", (v) => v.udpLossRatio),
  linkGauge('niclab_link_jitter_seconds', "RFC 3550 interarrival jitter of the link's last UDP run.", (v) => v.jitterSeconds),
  linkGauge('niclab_link_sender_cpu_seconds_per_bit', "Sender CPU seconds per bit sent in the link's last run.", (v) => v.senderCpuSecondsPerBit),
  linkGauge('niclab_link_receiver_cpu_seconds_per_bit', "Receiver CPU seconds per bit received in the link's last run.", (v) => v.receiverCpuSecondsPerBit),
  {
    name: 'niclab_link_udp_lost_datagrams', help: "Datagrams the link's last UDP run lost, by where they were lost (unexplained: lost minus the places; negative when the counters saw more).", type: 'gauge',
    samples: (v) => (v.udpLost ? PLACES.map((place) => ({ labels: { place }, value: v.udpLost![place] })) : []),
  },
  {
    name: 'niclab_link_bottleneck', help: "1 for the verdict on what limited the link's last run, 0 for the others.", type: 'gauge',
    samples: (v) => (v.bottleneck ? VERDICTS.map((verdict) => ({ labels: { verdict }, value: verdict === v.bottleneck ? 1 : 0 })) : []),
  },
  {
    name: 'niclab_link_rtt_seconds', help: "Round-trip time percentiles of the link's last request/response (rr) or probe run (under load).", type: 'gauge',
    samples: (v) => quantileSamples(v.rttSeconds),
  },
  {
    name: 'niclab_link_probe_delay_seconds', help: "One-way delay percentiles of the link's last probe run, each way (only when both ends share a clock).", type: 'gauge',
    samples: (v) => (v.probe ? [...quantileSamples(v.probe.forwardDelay, { way: 'forward' }), ...quantileSamples(v.probe.returnDelay, { way: 'return' })] : []),
  },
  {
    name: 'niclab_link_probe_ipdv_seconds', help: "Round-trip IPDV (jitter, as irtt) percentiles of the link's last probe run.", type: 'gauge',
    samples: (v) => quantileSamples(v.probe?.ipdv ?? null),
  },
  {
    name: 'niclab_link_probe_loss_ratio', help: "Probe datagrams lost each way in the link's last probe run, over those sent that way.", type: 'gauge',
    samples: (v) => (['forward', 'return'] as const).flatMap((way) => (typeof v.probe?.loss[way] === 'number' ? [{ labels: { way }, value: v.probe.loss[way] }] : [])),
  },
];
