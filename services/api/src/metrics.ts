/**
 * /metrics: every niclab figure computed from Redis at scrape time (one read per scrape), so
 * any API replica answers the same. Only the HTTP request histogram and the process metrics
 * are this replica's own; they alone go through prom-client.
 */
import type { Queue } from 'bullmq';
import { Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { AgentRegistry } from '@niclab/shared/stores/agent-registry';
import type { Agent } from '@niclab/shared/domain/contract';
import type { JobStore } from '@niclab/shared/stores/job-store';
import type { Leases } from '@niclab/shared/stores/leases';
import { HISTOGRAMS, type HistogramName, type LinkLabels, type LinkValues, type MetricStore } from '@niclab/shared/stores/metric-store';

/** Where a scrape reads the fleet from: the stores, never Redis keys of its own. */
export interface MetricsSources {
  store: JobStore;
  metricStore: MetricStore;
  agents: AgentRegistry;
  leases: Leases;
  jobsQueue: Queue;
}

/** What one scrape reads from Redis, shared by every family it renders. */
interface Snapshot {
  links: { labels: LinkLabels; values: LinkValues }[];
  agents: Agent[];
  jobs: Record<string, number>;
  runs: Record<string, number>;
  jobsByStatus: Record<string, number>;
  queue: Record<string, number>;
  leasesHeld: number;
  histograms: Record<HistogramName, { buckets: [string, number][]; sum: number; count: number }>;
}

const JOB_STATUSES = ['queued', 'running', 'succeeded', 'failed', 'canceled'] as const;
const QUEUE_STATES = ['waiting', 'active', 'delayed', 'prioritized', 'waiting-children', 'completed', 'failed'] as const;

export interface Metrics {
  registry: Registry;
  /** One scrape: reads Redis once, then renders every metric from that read. */
  render(): Promise<string>;
  /** Express-independent: call with the route template (e.g. `/v1/jobs/{id}`) when a response ends. */
  observeRequest(method: string, route: string, status: number, seconds: number): void;
}

export function createMetrics(sources: MetricsSources): Metrics {
  const { store, metricStore, agents, leases, jobsQueue } = sources;
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'niclab_' });

  // A link's labels never change and its values change once per run: a scrape parses only
  // what changed since the last one (thousands of links otherwise cost a JSON.parse each).
  let parsed = new Map<string, { valuesJson: string; link: Snapshot['links'][number] }>();
  const parseLinks = (raw: Record<string, string>): Snapshot['links'] => {
    const next = new Map<string, { valuesJson: string; link: Snapshot['links'][number] }>();
    for (const [labelsJson, valuesJson] of Object.entries(raw)) {
      const known = parsed.get(labelsJson);
      const link = known?.valuesJson === valuesJson ? known.link : { labels: known?.link.labels ?? (JSON.parse(labelsJson) as LinkLabels), values: JSON.parse(valuesJson) as LinkValues };
      next.set(labelsJson, { valuesJson, link });
    }
    parsed = next;
    return [...next.values()].map((entry) => entry.link);
  };
  const read = async (): Promise<Snapshot> => {
    const [rawLinks, agentList, jobs, runs, queue] = await Promise.all([
      metricStore.rawLinks(), agents.list(), metricStore.counts('jobs'), metricStore.counts('runs'), jobsQueue.getJobCounts(...QUEUE_STATES),
    ]);
    const links = parseLinks(rawLinks);
    const [jobsByStatus, leasesHeld] = await Promise.all([
      store.countByStatus(JOB_STATUSES),
      leases.countHeld(agentList.flatMap((a) => a.interfaces.map((i) => ({ agent: a.id, interface: i.name })))),
    ]);
    const histograms = Object.fromEntries(await Promise.all((Object.keys(HISTOGRAMS) as HistogramName[]).map(async (name) => [name, await metricStore.histogram(name)]))) as Snapshot['histograms'];
    return { links, agents: agentList, jobs, runs, jobsByStatus, queue, leasesHeld, histograms };
  };
  /** Metrics rendered from one scrape's snapshot by renderSamples (prom-client formats slowly at fleet size). */
  const snapshotMetrics: { name: string; help: string; type: 'gauge' | 'counter' | 'histogram'; samples: (s: Snapshot) => Sample[] }[] = [];
  const fromSnapshot = (name: string, help: string, type: 'gauge' | 'counter' | 'histogram', samples: (s: Snapshot) => Sample[]) => void snapshotMetrics.push({ name, help, type, samples });

  // Outcomes and the queue.
  const outcomes = (s: Snapshot, which: 'jobs' | 'runs') => ['succeeded', 'failed', 'canceled'].map((outcome) => ({ labels: { outcome }, value: s[which][outcome] ?? 0 }));
  fromSnapshot('niclab_runs_total', 'Runs ended, by outcome.', 'counter', (s) => outcomes(s, 'runs'));
  fromSnapshot('niclab_jobs_total', 'Jobs ended, by outcome.', 'counter', (s) => outcomes(s, 'jobs'));
  fromSnapshot('niclab_jobs', 'Jobs by status now.', 'gauge', (s) => Object.entries(s.jobsByStatus).map(([status, value]) => ({ labels: { status }, value })));
  fromSnapshot('niclab_queue_jobs', 'BullMQ jobs in the coordinators\' queue, by state.', 'gauge', (s) => Object.entries(s.queue).map(([state, value]) => ({ labels: { state }, value })));
  for (const name of Object.keys(HISTOGRAMS) as HistogramName[]) {
    fromSnapshot(`niclab_${name}`, name === 'job_duration_seconds' ? 'Jobs from start to end (seconds).' : 'Jobs from submission to start (seconds).', 'histogram', (s) => {
      const { buckets, sum, count } = s.histograms[name];
      return [...buckets.map(([le, value]) => ({ suffix: '_bucket', labels: { le }, value })), { suffix: '_sum', labels: {}, value: sum }, { suffix: '_count', labels: {}, value: count }];
    });
  }

  // Agents and their interfaces.
  fromSnapshot('niclab_agents', 'Registered agents, online or not.', 'gauge', (s) => [
    { labels: { state: 'online' }, value: s.agents.filter((a) => a.online).length },
    { labels: { state: 'offline' }, value: s.agents.filter((a) => !a.online).length },
  ]);
  fromSnapshot('niclab_agent_up', '1 while the agent heartbeats, 0 once it missed three heartbeats or stopped.', 'gauge', (s) => s.agents.map((a) => ({ labels: { agent: a.id }, value: a.online ? 1 : 0 })));
  const interfaceGauge = (name: string, help: string, pick: (i: Agent['interfaces'][number]) => number | null) =>
    fromSnapshot(name, help, 'gauge', (s) =>
      s.agents.flatMap((agent) =>
        agent.interfaces.flatMap((iface) => {
          const value = pick(iface);
          return value === null ? [] : [{ labels: { agent: agent.id, interface: iface.name }, value }];
        })));
  interfaceGauge('niclab_interface_speed_bits_per_second', 'Link speed the driver reports (absent where it reports none, e.g. lo).', (i) => i.speedBitsPerSecond);
  interfaceGauge('niclab_interface_mtu_bytes', 'Interface MTU.', (i) => i.mtu);
  fromSnapshot('niclab_leases_held', 'Interfaces a run holds a lease on now.', 'gauge', (s) => [{ labels: {}, value: s.leasesHeld }]);

  const requests = new Histogram({
    name: 'niclab_http_request_duration_seconds', help: 'API requests by route template and status (this replica).',
    labelNames: ['method', 'route', 'status'], buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5], registers: [registry],
  });
  return {
    registry,
    async render() {
      const [text, snap] = await Promise.all([registry.metrics(), read()]);
      const own = snapshotMetrics.map((m) => renderSamples(m.name, m.help, m.type, m.samples(snap)));
      return `${text}\n${own.join('')}${renderLinks(snap.links)}`;
    },
    observeRequest(method, route, status, seconds) {
      requests.observe({ method, route, status: String(status) }, seconds);
    },
  };
}

const LINK_LABELS: (keyof LinkLabels)[] = ['src_agent', 'src_interface', 'dst_agent', 'dst_interface', 'engine', 'protocol', 'test', 'direction', 'schedule'];

const LINK_METRICS: [string, string, (v: LinkValues) => number | null | undefined][] = [
  ['niclab_link_throughput_bits_per_second', "Goodput of the link's last run, as received (bits/s).", (v) => v.bitsPerSecond],
  ['niclab_link_last_run_timestamp_seconds', "When the link's last run ended (Unix seconds). Prometheus samples at scrape time: this is the measurement's own time.", (v) => v.endedAt],
  ['niclab_link_path_verified', "1 when the named interfaces' counters carried the last run's bytes, 0 when they did not.", (v) => v.pathVerified],
  ['niclab_link_retransmits', "TCP retransmits of the link's last run (sender side).", (v) => v.retransmits],
  ['niclab_link_udp_loss_ratio', "UDP datagrams lost / sent in the link's last run.", (v) => v.udpLossRatio],
  ['niclab_link_jitter_seconds', "RFC 3550 interarrival jitter of the link's last UDP run.", (v) => v.jitterSeconds],
  ['niclab_link_sender_cpu_seconds_per_bit', "Sender CPU seconds per bit sent in the link's last run.", (v) => v.senderCpuSecondsPerBit],
  ['niclab_link_receiver_cpu_seconds_per_bit', "Receiver CPU seconds per bit received in the link's last run.", (v) => v.receiverCpuSecondsPerBit],
];

/** A link's label set in the text format, escaped once per labels object (they are kept between scrapes). */
const labelSets = new WeakMap<LinkLabels, string>();
function labelSet(labels: LinkLabels): string {
  let set = labelSets.get(labels);
  if (set === undefined) {
    set = LINK_LABELS.map((k) => `${k}="${escapeLabel(labels[k])}"`).join(',');
    labelSets.set(labels, set);
  }
  return set;
}

const escapeLabel = (value: string) => value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
const sampleValue = (value: number) => (Number.isNaN(value) ? 'NaN' : value === Infinity ? '+Inf' : value === -Infinity ? '-Inf' : String(value));

/** One series of a family; `suffix` names a histogram's `_bucket`, `_sum` and `_count`. */
type Sample = { labels: Record<string, string>; value: number; suffix?: string };

/** One metric family in the text format. */
function renderSamples(name: string, help: string, type: string, samples: Sample[]): string {
  const lines = [`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`];
  for (const { labels, value, suffix = '' } of samples) {
    const set = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(',');
    lines.push(`${name}${suffix}${set ? `{${set}}` : ''} ${sampleValue(value)}`);
  }
  return `${lines.join('\n')}\n`;
}

/**
 * The last result of every link, in the text format. Rendered here rather than by prom-client:
 * each link's nine labels are escaped once and shared by its metrics, which keeps a scrape of
 * thousands of links cheap (prom-client formats every label of every series anew).
 */
export function renderLinks(links: { labels: LinkLabels; values: LinkValues }[]): string {
  const labelSets = links.map(({ labels }) => labelSet(labels));
  const out: string[] = [];
  for (const [name, help, pick] of LINK_METRICS) {
    out.push(`# HELP ${name} ${help}`, `# TYPE ${name} gauge`);
    links.forEach(({ values }, i) => {
      const value = pick(values);
      if (value !== null && value !== undefined) out.push(`${name}{${labelSets[i]}} ${sampleValue(value)}`);
    });
  }
  const rtt = 'niclab_link_rtt_seconds';
  out.push(`# HELP ${rtt} Round-trip time percentiles of the link's last request/response (rr) run.`, `# TYPE ${rtt} gauge`);
  links.forEach(({ values }, i) => {
    if (!values.rttSeconds) return;
    for (const [quantile, value] of [['0.5', values.rttSeconds.p50], ['0.9', values.rttSeconds.p90], ['0.99', values.rttSeconds.p99]] as const) {
      out.push(`${rtt}{${labelSets[i]},quantile="${quantile}"} ${sampleValue(value)}`);
    }
  });
  return `${out.join('\n')}\n`;
}
