/**
 * How a group job's pairs ended: each pair is a link of its own, so one that failed leaves the
 * others' figures standing. A pair at a sweep point is measured when any of its runs succeeded.
 */
import type { ErrorInfo, JobSpec, Run } from './contract.js';
import type { components } from '../generated/openapi.js';
import { pointKey, sweepPoints } from './plan.js';

export type PairOutcome = components['schemas']['PairOutcome'];

/** The group job's pairs from its finished runs (a run's flows carry its pair's index). */
export function pairOutcome(spec: JobSpec, runs: Iterable<Run>): PairOutcome {
  const byPair = new Map<string, Run[]>();
  for (const run of runs) {
    const pair = run.flows[0]?.flowIndex;
    if (pair === undefined || (run.status !== 'succeeded' && run.status !== 'failed')) continue;
    const key = `${pointKey(run.point)} ${pair}`;
    byPair.set(key, [...(byPair.get(key) ?? []), run]);
  }
  const failures: PairOutcome['failures'] = [];
  let measured = 0;
  let total = 0;
  for (const point of sweepPoints(spec)) {
    spec.flows.forEach(({ from, to }, pair) => {
      total++;
      const made = (byPair.get(`${pointKey(point)} ${pair}`) ?? []).sort((a, b) => a.index - b.index);
      if (made.some((run) => run.status === 'succeeded')) measured++;
      else if (made.length > 0) failures.push({ pair, from, to, point, error: made.at(-1)!.error ?? { code: 'runs_failed', message: 'the run failed' } });
    });
  }
  return { total, measured, failed: failures.length, failures };
}

/** A group job fails only when no pair was measured; then it says why, as a job of runs does. */
export function pairsError(outcome: PairOutcome): ErrorInfo | null {
  if (outcome.measured > 0 || outcome.failed === 0) return null;
  const codes = new Set(outcome.failures.map((f) => f.error.code));
  const first = outcome.failures[0]!;
  return {
    code: codes.size === 1 ? first.error.code : 'runs_failed',
    message: `all ${outcome.failed} pairs failed; first ${first.from.agent}:${first.from.interface} -> ${first.to.agent}:${first.to.interface}: ${first.error.message}`,
  };
}
