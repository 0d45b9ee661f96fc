/**
 * performance.now()'s zero on CLOCK_REALTIME (epoch ms), the clock of the kernel's receive
 * timestamps and of the send times a UDP datagram carries. Node's own performance.timeOrigin
 * was measured 3 µs to 1 ms off it (it reads the two clocks at different moments of start-up),
 * which showed as negative one-way delays on one host; read from libc it is within a microsecond.
 */
import { performance } from 'node:perf_hooks';
import { realtimeNanoseconds } from './udp-batch.js';

/** From libc's clock_gettime, read between two performance.now()s: the closest pair of a few. */
function fromLibc(): number | null {
  let best: { spread: number; origin: number } | null = null;
  for (let i = 0; i < 5; i++) {
    const before = performance.now();
    const realtime = realtimeNanoseconds();
    const after = performance.now();
    if (realtime === null) return null;
    // Whole ms and the rest apart: a double of epoch ms keeps a quarter of a microsecond.
    const origin = Number(realtime / 1_000_000n) + Number(realtime % 1_000_000n) / 1e6 - (before + after) / 2;
    if (!best || after - before < best.spread) best = { spread: after - before, origin };
  }
  return best!.origin;
}

// Without libc, Node's own (Date.now()'s millisecond edges are no better: measured 0.6 ms off).
export const REALTIME_ORIGIN_MS: number = fromLibc() ?? performance.timeOrigin;

/** CLOCK_REALTIME now, in epoch µs, on performance.now()'s monotonic clock. */
export const epochMicros = (): number => (REALTIME_ORIGIN_MS + performance.now()) * 1000;
