import type { EndFigures, RrFigures } from './contract.js';

/** nttcp's derived columns from its four measured ones. Rates are 0 where the divisor is 0. */
export function endFigures(bytes: number, realSeconds: number, cpuSeconds: number, calls: number | null): EndFigures {
  const per = (value: number, seconds: number) => (seconds > 0 ? Math.round((value / seconds) * 1000) / 1000 : 0);
  return {
    bytes,
    realSeconds: Math.round(realSeconds * 1e6) / 1e6,
    cpuSeconds: Math.round(cpuSeconds * 1e6) / 1e6,
    calls,
    realBitsPerSecond: per(bytes * 8, realSeconds),
    cpuBitsPerSecond: per(bytes * 8, cpuSeconds),
    realCallsPerSecond: calls === null ? null : per(calls, realSeconds),
    cpuCallsPerSecond: calls === null ? null : per(calls, cpuSeconds),
  };
}

/** Percentiles by nearest rank over sorted milliseconds, in seconds. */
export function rttSummary(sorted: Float64Array): RrFigures['rttSeconds'] {
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]! / 1000;
  if (sorted.length === 0) return { min: 0, mean: 0, p50: 0, p90: 0, p99: 0, max: 0 };
  const sum = sorted.reduce((a, b) => a + b, 0);
  return { min: sorted[0]! / 1000, mean: sum / sorted.length / 1000, p50: at(0.5), p90: at(0.9), p99: at(0.99), max: sorted[sorted.length - 1]! / 1000 };
}
