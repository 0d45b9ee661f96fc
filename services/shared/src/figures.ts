import type { EndFigures } from './contract.js';

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
