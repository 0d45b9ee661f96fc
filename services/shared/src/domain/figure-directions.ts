/**
 * Every figure a run can be judged by, each with the way it is better (from the figure
 * catalogue): higher throughput and transactions/s; lower round trips (rr's and the probe's),
 * loss, jitter, IPDV, one-way delays, retransmits and CPU per bit. A comparison judges one of
 * them and shows all the jobs measured.
 */
import type { components } from '../generated/openapi.js';
import type { JobSpec, Run } from './contract.js';
import { COLUMNS } from './figures/columns.js';

export { idleRoundTrips, roundTrips } from './figures/columns.js';

export type MetricName = components['schemas']['MetricName'];

export interface RunMetric {
  name: MetricName;
  /** Base unit, as in JSON. */
  unit: string;
  higherIsBetter: boolean;
  /** How tables show it: value / scale in `unit`, with `digits` decimals. */
  table: { scale: number; unit: string; digits: number };
  /** The run's value, over its flows; null when the run measured none. */
  value(spec: JobSpec, run: Run): number | null;
}

/** The columns a run has one value of, as the comparison reads them. */
export const RUN_METRICS = Object.fromEntries(
  COLUMNS.filter((c) => c.run).map((c) => [c.name, { name: c.name as MetricName, unit: c.figure.unit, higherIsBetter: c.figure.better === 'higher', table: c.figure.display, value: c.run! } satisfies RunMetric]),
) as Record<MetricName, RunMetric>;

/** The comparison's figures in catalogue order. */
export const METRIC_NAMES = Object.keys(RUN_METRICS) as MetricName[];
