/**
 * /metrics: every niclab figure computed from the stores at scrape time (one read per scrape),
 * so any API replica answers the same. What is shown is metric-families.ts, how it is written
 * exposition.ts. Only the HTTP request histogram and the process metrics are this replica's
 * own; they alone go through prom-client.
 */
import type { ChangeStore } from '@niclab/shared/stores/changes';
import type { Queue } from 'bullmq';
import { Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { AgentRegistry } from '@niclab/shared/stores/agent-registry';
import type { JobStore } from '@niclab/shared/stores/job-store';
import type { Leases } from '@niclab/shared/stores/leases';
import { HISTOGRAMS, type HistogramName, type LinkLabels, type LinkValues, type MetricStore } from '@niclab/shared/stores/metric-store';
import type { Redis } from 'ioredis';
import type { Keys } from '@niclab/shared/stores/keys';
import { storedRetention } from '@niclab/shared/stores/retention-estimate';
import { Exposition } from './exposition.js';
import { FLEET_FAMILIES, JOB_STATUSES, QUEUE_STATES, type Link, type Snapshot } from './metric-families.js';

/** Where a scrape reads the fleet from: the stores, never Redis keys of its own. */
export interface MetricsSources {
  store: JobStore;
  metricStore: MetricStore;
  agents: AgentRegistry;
  leases: Leases;
  jobsQueue: Queue;
  changes: ChangeStore;
  /**
   * Where the coordinators store their retention estimate (once a minute, a few dozen MEMORY
   * USAGE reads): a scrape reads that one key, so every replica shows the same figures.
   */
  retention?: { redis: Redis; keys: Keys };
}

export interface Metrics {
  registry: Registry;
  /** One scrape: reads Redis once, then renders every metric from that read. */
  render(): Promise<string>;
  /** One scrape as the response's bytes: the text, or its gzip when the scraper accepts it. */
  scrape(encoding: 'gzip' | 'identity'): Promise<Buffer[]>;
  /** Express-independent: call with the route template (e.g. `/v1/jobs/{id}`) when a response ends. */
  observeRequest(method: string, route: string, status: number, seconds: number): void;
}

export function createMetrics(sources: MetricsSources): Metrics {
  const { store, metricStore, agents, leases, jobsQueue, changes, retention } = sources;
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'niclab_' });

  // A link's labels never change and its values change once per run: a scrape parses only
  // what changed since the last one (thousands of links otherwise cost a JSON.parse each).
  let parsed = new Map<string, { valuesJson: string; link: Link }>();
  const parseLinks = (raw: Record<string, string>): Link[] => {
    const next = new Map<string, { valuesJson: string; link: Link }>();
    for (const [labelsJson, valuesJson] of Object.entries(raw)) {
      const known = parsed.get(labelsJson);
      const link = known?.valuesJson === valuesJson ? known.link : { labels: known?.link.labels ?? (JSON.parse(labelsJson) as LinkLabels), values: JSON.parse(valuesJson) as LinkValues };
      next.set(labelsJson, { valuesJson, link });
    }
    parsed = next;
    return [...next.values()].map((entry) => entry.link);
  };
  // Three round trips, whatever the fleet: the agents' ids, then their records (with everything
  // else beside them), then their leases.
  const read = async (): Promise<Snapshot> => {
    const [rawLinks, searches, agentList, jobs, runs, firings, queue, jobsByStatus, histograms, changeList, retentionNow] = await Promise.all([
      metricStore.rawLinks(), metricStore.searchLinks(), agents.list(), metricStore.counts('jobs'), metricStore.counts('runs'), metricStore.counts('firings'), jobsQueue.getJobCounts(...QUEUE_STATES),
      store.countByStatus(JOB_STATUSES),
      Promise.all((Object.keys(HISTOGRAMS) as HistogramName[]).map(async (name) => [name, await metricStore.histogram(name)] as const)),
      changes.forMetrics(),
      retention ? storedRetention(retention.redis, retention.keys).catch(() => null) : null,
    ]);
    const leasesHeld = await leases.countHeld(agentList.flatMap((a) => a.interfaces.map((i) => ({ agent: a.id, interface: i.name }))));
    return { links: parseLinks(rawLinks), searches, agents: agentList, jobs, runs, firings, jobsByStatus, queue, leasesHeld, histograms: Object.fromEntries(histograms) as Snapshot['histograms'], changes: changeList, retention: retentionNow };
  };
  const requests = new Histogram({
    name: 'niclab_http_request_duration_seconds', help: 'API requests by route template and status (this replica).',
    labelNames: ['method', 'route', 'status'], buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5], registers: [registry],
  });
  const exposition = new Exposition();
  const scrape = async () => {
    const [own, snap] = await Promise.all([registry.metrics(), read()]);
    return exposition.scrape(own, FLEET_FAMILIES, snap);
  };
  return {
    registry,
    render: async () => (await scrape()).text(),
    async scrape(encoding) {
      const pieces = await scrape();
      return encoding === 'gzip' ? pieces.gzip() : pieces.bytes();
    },
    observeRequest(method, route, status, seconds) {
      requests.observe({ method, route, status: String(status) }, seconds);
    },
  };
}
