/**
 * Where each figure's values can lie: the one place a figure's domain is written. The
 * report's summaries, the comparison's intervals and the plots cut the Student-t interval
 * of a mean to it (and say so: `clipped-t`), so no interval says a rate, a delay or a count
 * could be below 0, or a loss ratio above 1.
 */
import type { MetricName, RunMetric } from './figure-directions.js';

/** The values a figure can take. */
export interface FigureDomain {
  /** The least value the figure can take (-Infinity: none). */
  min: number;
  /** The greatest, or null for none. */
  max: number | null;
}

/** A figure with no bound: the plain Student-t interval. */
export const UNBOUNDED: FigureDomain = { min: -Infinity, max: null };
/** Rates, round trips, delays, jitter, CPU time: never below 0. */
const NON_NEGATIVE: FigureDomain = { min: 0, max: null };
/** Segments retransmitted. */
const COUNT: FigureDomain = NON_NEGATIVE;
/** Lost over sent. */
const RATIO: FigureDomain = { min: 0, max: 1 };

/** The report's per-flow figures that are not run metrics of their own. */
export type LegFigureName = 'senderCpuSeconds' | 'receiverCpuSeconds';
export type FigureName = MetricName | LegFigureName;

export const FIGURE_DOMAINS: Record<FigureName, FigureDomain> = {
  bitsPerSecond: NON_NEGATIVE,
  transactionsPerSecond: NON_NEGATIVE,
  rttP50Seconds: NON_NEGATIVE,
  rttP90Seconds: NON_NEGATIVE,
  rttP99Seconds: NON_NEGATIVE,
  idleRttP50Seconds: NON_NEGATIVE,
  idleRttP99Seconds: NON_NEGATIVE,
  udpLossRatio: RATIO,
  jitterSeconds: NON_NEGATIVE,
  retransmits: COUNT,
  cpuSecondsPerGigabit: NON_NEGATIVE,
  probeLossRatio: RATIO,
  // |d(i) - d(i-1)|: never below 0.
  ipdvP99Seconds: NON_NEGATIVE,
  forwardDelayP99Seconds: NON_NEGATIVE,
  returnDelayP99Seconds: NON_NEGATIVE,
  senderCpuSeconds: NON_NEGATIVE,
  receiverCpuSeconds: NON_NEGATIVE,
};

/**
 * The least change of a figure's mean a comparison calls `better` or `worse`, in its base
 * unit: one unit of the last digit its tables print (0.01 Mbit/s, 0.001 ms, 0.001 % of
 * datagrams, 1 segment). It is what judges a change from a baseline of 0, which has no %.
 */
export const minChange = (m: RunMetric): number => m.table.scale * 10 ** -m.table.digits;
