import type { EndFigures, RrFigures } from './contract.js';

/** An engine process's CPU seconds, split as the kernel counts them (utime and stime). */
export interface CpuTime {
  user: number;
  system: number;
}

/** Bytes in netperf's KB, the unit of its service demand. */
const KB = 1024;

/**
 * nttcp's derived columns from its four measured ones, and netperf's service demand (CPU µs per
 * KB moved). Rates are 0 where the divisor is 0; the service demand is null when no byte moved,
 * and without `perByte` (a request/response or probe end, whose bytes are its requests, not
 * what its CPU was for; an engine that gave no CPU figure).
 */
export function endFigures(bytes: number, realSeconds: number, cpu: CpuTime, calls: number | null, perByte = true): EndFigures {
  const per = (value: number, seconds: number) => (seconds > 0 ? Math.round((value / seconds) * 1000) / 1000 : 0);
  const micro = (seconds: number) => Math.round(seconds * 1e6) / 1e6;
  const cpuSeconds = cpu.user + cpu.system;
  const demand = (seconds: number) => Math.round(((seconds * 1e6) / (bytes / KB)) * 1e6) / 1e6;
  return {
    bytes,
    realSeconds: micro(realSeconds),
    cpuSeconds: micro(cpuSeconds),
    userCpuSeconds: micro(cpu.user),
    systemCpuSeconds: micro(cpu.system),
    calls,
    realBitsPerSecond: per(bytes * 8, realSeconds),
    cpuBitsPerSecond: per(bytes * 8, cpuSeconds),
    realCallsPerSecond: calls === null ? null : per(calls, realSeconds),
    cpuCallsPerSecond: calls === null ? null : per(calls, cpuSeconds),
    serviceDemand: perByte && bytes > 0
      ? { microsecondsPerKilobyte: demand(cpuSeconds), userMicrosecondsPerKilobyte: demand(cpu.user), systemMicrosecondsPerKilobyte: demand(cpu.system) }
      : null,
  };
}

/** Percentiles by nearest rank over sorted milliseconds, in seconds. */
export function rttSummary(sorted: Float64Array): RrFigures['rttSeconds'] {
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]! / 1000;
  if (sorted.length === 0) return { min: 0, mean: 0, p50: 0, p90: 0, p99: 0, max: 0 };
  const sum = sorted.reduce((a, b) => a + b, 0);
  return { min: sorted[0]! / 1000, mean: sum / sorted.length / 1000, p50: at(0.5), p90: at(0.9), p99: at(0.99), max: sorted[sorted.length - 1]! / 1000 };
}

/**
 * An rr end's figures from its round trips in milliseconds: the loaded ones over `seconds`,
 * and, after an idle baseline, the idle ones beside them with what the load added.
 */
export function rrFigures(sizes: { requestSize: number; responseSize: number }, loaded: number[], seconds: number, idle?: { rtts: number[]; seconds: number }): RrFigures {
  const rttSeconds = rttSummary(Float64Array.from(loaded).sort());
  const figures: RrFigures = {
    ...sizes,
    transactions: loaded.length,
    transactionsPerSecond: seconds > 0 ? Math.round((loaded.length / seconds) * 1000) / 1000 : 0,
    rttSeconds,
  };
  if (!idle) return figures;
  const idleRtt = rttSummary(Float64Array.from(idle.rtts).sort());
  figures.idle = { seconds: idle.seconds, transactions: idle.rtts.length, rttSeconds: idleRtt };
  figures.rttIncreaseSeconds = { p50: rttSeconds.p50 - idleRtt.p50, p90: rttSeconds.p90 - idleRtt.p90, p99: rttSeconds.p99 - idleRtt.p99 };
  return figures;
}
