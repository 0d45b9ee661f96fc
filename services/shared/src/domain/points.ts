/**
 * A job as a campaign: which of its planned runs are still needed (adaptive repetition), and
 * the headline figure each run contributes to its point's statistics.
 */
import type { ErrorInfo, FlowResult, JobSpec, Run } from './contract.js';
import { planRuns, pointKey, repetitions, sweepPoints, type PlannedRun } from './plan.js';
import { CONFIDENCE, halfWidthPercent, summarize } from './statistics.js';
import { kindOf, type Headline } from './test-kinds/index.js';
import { combineHeadline } from './test-kinds/kind.js';
import { maxSearchRuns, RateSearch } from './rate-search.js';
import { perFinishedRuns } from './finished-runs.js';
import { measuresHeadline } from './flow-tests.js';
import { planRounds } from './rounds.js';
import { pairOutcome, pairsError } from './pair-outcome.js';

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

/**
 * How a campaign chooses its runs, one at a time: the coordinator asks for the next run to
 * make until there is none. A rate search is another strategy beside sweep × repeat.
 */
export interface CampaignStrategy {
  /** The next run to make, given every run finished so far (by plan index), or null when the campaign is complete. */
  next(finished: ReadonlyMap<number, Run>): PlannedRun | null;
  /** Runs to make at once (they share no interface), when the campaign makes some in parallel; else `next` alone is asked. */
  nextRound?(finished: ReadonlyMap<number, Run>): PlannedRun[];
  /** Runs the campaign will make in all, as far as it can tell now (its progress total). */
  expectedRuns(finished: ReadonlyMap<number, Run>): number;
  /** Once complete: why the job failed, or null when it succeeded. */
  outcome(finished: ReadonlyMap<number, Run>): ErrorInfo | null;
}

/** Every run must succeed: the job fails with the first failed run's reason (its code when all failed). */
export function everyRunOutcome(runs: Iterable<Run>): ErrorInfo | null {
  const all = [...runs];
  const failed = all.filter((r) => r.status === 'failed').sort((a, b) => a.index - b.index);
  if (failed.length === 0) return null;
  const first = failed[0]?.error;
  return {
    code: failed.length === all.length && first ? first.code : 'runs_failed',
    message: `${failed.length} of ${all.length} runs failed${first ? `; first: ${first.message}` : ''}`,
  };
}

/**
 * Every sweep point, each repeated `repeat` times, or adaptively: a point whose interval is
 * tight enough (or that reached `max`) needs no more runs. Runs go in plan order.
 */
export class SweepRepeat implements CampaignStrategy {
  private readonly planned: PlannedRun[];
  /** Every planned run before this one is finished or no longer needed (a settled point stays settled). */
  private cursor = 0;

  constructor(private readonly spec: JobSpec) {
    this.planned = planRuns(spec);
  }

  next(finished: ReadonlyMap<number, Run>): PlannedRun | null {
    const states = this.states(finished);
    for (; this.cursor < this.planned.length; this.cursor++) {
      const plan = this.planned[this.cursor]!;
      if (!finished.has(plan.index) && !states.get(pointKey(plan.point))?.settled) return plan;
    }
    return null;
  }

  expectedRuns(finished: ReadonlyMap<number, Run>): number {
    return expectedRuns(this.spec, this.states(finished));
  }

  outcome(finished: ReadonlyMap<number, Run>): ErrorInfo | null {
    return everyRunOutcome(finished.values());
  }

  /** Where each point stands. */
  private readonly states = perFinishedRuns((finished) => pointStates(this.spec, [...finished.values()].filter((r) => r.status !== 'canceled')));
}

/**
 * A group's pairs, each a run of its own: for each sweep point and repetition, the rounds of
 * planRounds in sequence, the runs of a round in parallel (no interface is in two of them).
 */
export class PairRounds implements CampaignStrategy {
  private readonly batches: PlannedRun[][] = [];
  private readonly total: number;

  constructor(private readonly spec: JobSpec) {
    const rounds = planRounds(spec.flows);
    let index = 0;
    for (const point of sweepPoints(spec)) {
      for (let repetition = 1; repetition <= repetitions(spec).max; repetition++) {
        for (const round of rounds) this.batches.push(round.map((pair) => ({ index: index++, point, repetition, pair })));
      }
    }
    this.total = index;
  }

  nextRound(finished: ReadonlyMap<number, Run>): PlannedRun[] {
    for (const batch of this.batches) {
      const open = batch.filter((plan) => !finished.has(plan.index));
      if (open.length > 0) return open;
    }
    return [];
  }

  next(finished: ReadonlyMap<number, Run>): PlannedRun | null {
    return this.nextRound(finished)[0] ?? null;
  }

  expectedRuns(): number {
    return this.total;
  }

  /** A failed pair does not fail the job: it fails only when no pair was measured (Job.pairs lists the failed ones). */
  outcome(finished: ReadonlyMap<number, Run>): ErrorInfo | null {
    return pairsError(pairOutcome(this.spec, finished.values()));
  }
}

/** The strategy a job's spec asks for: a group's pairs in rounds, a rate search, or every point repeated. */
export function strategyFor(spec: JobSpec): CampaignStrategy {
  if (spec.group) return new PairRounds(spec);
  return spec.search ? new RateSearch(spec) : new SweepRepeat(spec);
}

/** The most runs a job can make (what limits and the 10,000-run cap are checked against): a group's are per pair. */
export function maxRuns(spec: JobSpec): number {
  const perPoint = spec.search ? maxSearchRuns(spec) : sweepPoints(spec).length * repetitions(spec).max;
  return spec.group ? perPoint * spec.flows.length : perPoint;
}
