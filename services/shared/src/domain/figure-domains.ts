/**
 * Where each figure's values can lie, from the figure catalogue (figures/catalogue.ts). The
 * report's summaries, the comparison's intervals and the plots cut the Student-t interval
 * of a mean to it (and say so: `clipped-t`), so no interval says a rate, a delay or a count
 * could be below 0, or a loss ratio above 1.
 */
import type { MetricName, RunMetric } from './figure-directions.js';
import { COLUMNS } from './figures/columns.js';

/** The values a figure can take. */
export interface FigureDomain {
  /** The least value the figure can take (-Infinity: none). */
  min: number;
  /** The greatest, or null for none. */
  max: number | null;
}

/** A figure with no bound: the plain Student-t interval. */
export const UNBOUNDED: FigureDomain = { min: -Infinity, max: null };

/** The report's per-flow figures that are not run metrics of their own. */
export type LegFigureName = 'senderCpuSeconds' | 'receiverCpuSeconds' | 'senderServiceDemand' | 'receiverServiceDemand' | 'sourceDiskBitsPerSecond' | 'sinkDiskBitsPerSecond';
export type FigureName = MetricName | LegFigureName;

/** Each column's domain, as the figure catalogue has it for the figure the column is a view of. */
export const FIGURE_DOMAINS = Object.fromEntries(
  COLUMNS.map((c) => [c.name, { min: c.figure.domain.min ?? -Infinity, max: c.figure.domain.max }]),
) as Record<FigureName, FigureDomain>;

/**
 * The least change of a figure's mean a comparison calls `better` or `worse`, in its base
 * unit: one unit of the last digit its tables print (0.01 Mbit/s, 0.001 ms, 0.001 % of
 * datagrams, 1 segment). It is what judges a change from a baseline of 0, which has no %.
 */
export const minChange = (m: RunMetric): number => m.table.scale * 10 ** -m.table.digits;
