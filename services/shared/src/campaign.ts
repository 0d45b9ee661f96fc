/**
 * A job as a campaign: which of its planned runs are still needed (adaptive repetition), and
 * the headline figure each run contributes to its point's statistics.
 */
import type { JobSpec, Run } from './contract.js';
import { pointKey, repetitions, sweepPoints } from './plan.js';
import { halfWidthPercent, summarize } from './statistics.js';

/** The figure a point's statistics are about: throughput of all its legs, or rr transactions/s. */
export function headline(spec: JobSpec): { name: 'bitsPerSecond' | 'transactionsPerSecond'; unit: string } {
  return spec.test === 'rr' ? { name: 'transactionsPerSecond', unit: 'transactions/s' } : { name: 'bitsPerSecond', unit: 'bits/s' };
}

/** A succeeded run's headline value (summed over its flows), or null. */
export function runValue(spec: JobSpec, run: Run): number | null {
  if (run.status !== 'succeeded') return null;
  if (spec.test === 'rr') return run.flows.reduce((sum, f) => sum + (f.rr?.transactionsPerSecond ?? 0), 0);
  return run.flows.reduce((sum, f) => sum + (f.bitsPerSecond ?? 0), 0);
}

export interface PointState {
  /** Runs made (succeeded or failed). */
  made: number;
  /** True once the point needs no more runs. */
  settled: boolean;
  /** Why it stopped: all its fixed runs, its interval tight enough, or `max` reached. */
  stoppedBy: 'fixed' | 'confidence' | 'max' | null;
  /** The interval's half width as a % of the mean over its succeeded runs (null under 2 runs). */
  halfWidthPercent: number | null;
}

/** Runs grouped by their sweep point (pointKey), in their order. */
export function byPoint(runs: Run[]): Map<string, Run[]> {
  const grouped = new Map<string, Run[]>();
  for (const run of runs) {
    const key = pointKey(run.point);
    const list = grouped.get(key);
    if (list) list.push(run);
    else grouped.set(key, [run]);
  }
  return grouped;
}

/** Where each point of the job stands, from the runs made so far (finished ones only). */
export function pointStates(spec: JobSpec, finished: Run[]): Map<string, PointState> {
  const reps = repetitions(spec);
  const states = new Map<string, PointState>();
  const grouped = byPoint(finished);
  for (const point of sweepPoints(spec)) {
    const key = pointKey(point);
    const runs = grouped.get(key) ?? [];
    const values = runs.map((r) => runValue(spec, r)).filter((v): v is number => v !== null);
    const summary = values.length >= 2 ? summarize(values, reps.adaptive?.confidence ?? 0.95) : null;
    const width = summary ? halfWidthPercent(summary) : null;
    let stoppedBy: PointState['stoppedBy'] = null;
    if (!reps.adaptive) stoppedBy = runs.length >= reps.max ? 'fixed' : null;
    else if (runs.length >= reps.min && width !== null && width <= reps.adaptive.halfWidthPercent) stoppedBy = 'confidence';
    else if (runs.length >= reps.max) stoppedBy = 'max';
    states.set(key, { made: runs.length, settled: stoppedBy !== null, stoppedBy, halfWidthPercent: width });
  }
  return states;
}

/** Runs the job will make in all: what settled points made, and `max` for the others. */
export function expectedRuns(spec: JobSpec, states: Map<string, PointState>): number {
  const { max } = repetitions(spec);
  return [...states.values()].reduce((sum, s) => sum + (s.settled ? s.made : max), 0);
}
