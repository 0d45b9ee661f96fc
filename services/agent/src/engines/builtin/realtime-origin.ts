/**
 * performance.now()'s zero on CLOCK_REALTIME (epoch ms), the clock of the kernel's receive
 * timestamps and of the send times a UDP datagram carries. Node's own performance.timeOrigin
 * was measured 3 µs to 1 ms off it (it reads the two clocks at different moments of start-up),
 * which showed as negative one-way delays on one host; read from libc it is within a microsecond.
 */
import { performance } from 'node:perf_hooks';
import { realtimeLessMonotonic } from './udp-batch.js';

/**
 * From libc: realtime less monotonic (udp-batch.ts, within tens of ns), and performance.now()
 * read between two process.hrtime()s (monotonic), the closest pair of a few.
 */
function fromLibc(): number | null {
  const offset = realtimeLessMonotonic();
  if (offset === null) return null;
  let best: { spread: bigint; origin: number } | null = null;
  for (let i = 0; i < 5; i++) {
    const before = process.hrtime.bigint();
    const now = performance.now();
    const after = process.hrtime.bigint();
    const realtime = offset + (before + after) / 2n;
    // Whole ms and the rest apart: a double of epoch ms keeps a quarter of a microsecond.
    const origin = Number(realtime / 1_000_000n) + Number(realtime % 1_000_000n) / 1e6 - now;
    if (!best || after - before < best.spread) best = { spread: after - before, origin };
  }
  return best!.origin;
}

// Without libc, Node's own (Date.now()'s millisecond edges are no better: measured 0.6 ms off).
export const REALTIME_ORIGIN_MS: number = fromLibc() ?? performance.timeOrigin;

/** CLOCK_REALTIME now, in epoch µs, on performance.now()'s monotonic clock. */
export const epochMicros = (): number => (REALTIME_ORIGIN_MS + performance.now()) * 1000;
