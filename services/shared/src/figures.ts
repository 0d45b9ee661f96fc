import type { EndFigures } from './contract.js';

/** nttcp's derived columns from its four measured ones. Rates are 0 where the divisor is 0. */
export function endFigures(bytes: number, realSeconds: number, cpuSeconds: number, calls: number): EndFigures {
  const per = (value: number, seconds: number) => (seconds > 0 ? value / seconds : 0);
  return {
    bytes,
    realSeconds,
    cpuSeconds,
    calls,
    realBitsPerSecond: per(bytes * 8, realSeconds),
    cpuBitsPerSecond: per(bytes * 8, cpuSeconds),
    realCallsPerSecond: per(calls, realSeconds),
    cpuCallsPerSecond: per(calls, cpuSeconds),
  };
}
