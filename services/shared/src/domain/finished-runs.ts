import type { Run } from './contract.js';

/**
 * What a campaign strategy derives from the runs finished so far, computed again only when a
 * run has finished: processJob asks next(), expectedRuns() and outcome() of one map that only
 * grows. Another map (a test, a resumed job) is never answered from the last one's result.
 */
export function perFinishedRuns<T>(derive: (finished: ReadonlyMap<number, Run>) => T): (finished: ReadonlyMap<number, Run>) => T {
  let cached: { finished: ReadonlyMap<number, Run>; size: number; value: T } | undefined;
  return (finished) => {
    if (cached?.finished !== finished || cached.size !== finished.size) cached = { finished, size: finished.size, value: derive(finished) };
    return cached.value;
  };
}
