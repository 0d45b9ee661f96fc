/**
 * Sweep × repeat, the campaign of every job that asks for no other: each sweep point repeated
 * `repeat` times, or adaptively until its interval is tight enough (or it reached `max`).
 */
import type { ErrorInfo, JobSpec, Run } from '../contract.js';
import { planRuns, pointKey, repetitions, sweepPoints, type PlannedRun } from '../plan.js';
import { expectedRuns, pointStates } from '../points.js';
import { perFinishedRuns } from '../finished-runs.js';
import { everyRunOutcome, NOTHING_MORE, type Campaign, type CampaignStrategy } from './campaign.js';

/** Runs go in plan order; a point that settled needs no more of its runs. */
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

export const sweepRepeat: Campaign = {
  ...NOTHING_MORE,
  name: 'sweep-repeat',
  // No rules of its own: repeat's (min <= max) is the spec's consistency, whatever the campaign.
  asks: () => true,
  maxRuns: (spec) => ({ runs: sweepPoints(spec).length * repetitions(spec).max, by: 'points' }),
  strategy: (spec) => new SweepRepeat(spec),
  reportedPoints: (spec) => sweepPoints(spec),
};
