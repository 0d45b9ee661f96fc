/**
 * A job's points: the headline figure each run contributes to its point's statistics, and
 * where each point stands (adaptive repetition: which of its planned runs are still needed).
 * How a job chooses its runs is its campaign's (campaigns/).
 */
import type { FlowResult, JobSpec, Run } from './contract.js';
import { pointKey, repetitions, sweepPoints } from './plan.js';
import { CONFIDENCE, halfWidthPercent, summarize } from './statistics.js';
import { kindOf, type Headline } from './test-kinds/index.js';
import { combineHeadline } from './test-kinds/kind.js';
import { measuresHeadline } from './flow-tests.js';

/** The figure a point's statistics are about: its test kind's headline (throughput, transactions/s). */
export function headline(spec: JobSpec): { name: Headline['name']; unit: string } {
  const { name, unit } = kindOf(spec).headline;
  return { name, unit };
}

/** A succeeded run's headline value over its flows (summed, or the worst path's for a delay), or null. */
export function runValue(spec: JobSpec, run: Run): number | null {
  if (run.status !== 'succeeded') return null;
  return headlineOf(spec, run.flows);
}

/** The headline over the flows that measure it, combined as the test kind says; 0 for a rate no flow carried. */
export function headlineOf(spec: JobSpec, flows: FlowResult[]): number | null {
  const headline = kindOf(spec).headline;
  return combineHeadline(headline, flows.filter((f) => measuresHeadline(spec, f.flowIndex)).map((f) => headline.flowValue(f))) ?? (headline.combine === 'sum' ? 0 : null);
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
    const confidence = reps.adaptive?.confidence ?? CONFIDENCE;
    const summary = values.length >= 2 ? summarize(values, confidence) : null;
    const width = summary ? halfWidthPercent(summary, confidence) : null;
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
