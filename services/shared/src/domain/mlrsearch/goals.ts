/**
 * Search Goals of MLRsearch (draft-ietf-bmwg-mlrsearch-15, RFC 9971 §4.5 "Goal Terms"): what a
 * load must uphold to be a Lower Bound, and how close the two relevant bounds must come.
 * Defaults are FD.io CSIT's production NDR/PDR settings (PerformanceUtils' optimized
 * NDR/PDR search): exceed ratio 50%, width 0.5%, 1 s trials, duration sum 21 s, two
 * preceding targets, expansion coefficient 2.
 */
import type { FieldError } from '../contract.js';

/** One Search Goal, with two attributes of CSIT's implementation beside the draft's. */
export interface SearchGoal {
  /** Goal Loss Ratio: a trial whose loss ratio is above it is high-loss (0 for NDR). */
  lossRatio: number;
  /** Goal Exceed Ratio: the share of trial-seconds at a Lower Bound that may be high-loss. */
  exceedRatio: number;
  /** Goal Final Trial Duration (s): trials at least this long are full-length. */
  finalTrialDuration: number;
  /** Goal Duration Sum (s): full-length trial-seconds that always decide a load. */
  durationSum: number;
  /** Goal Width: the relevant bounds' relative distance, (upper − lower) / upper, at most this. */
  width: number;
  /** Goal Initial Trial Duration (s): the shortest trials the search uses for this goal. */
  initialTrialDuration: number;
  /** Coarser targets searched first, each with a shorter duration sum and twice the width (CSIT). */
  precedingTargets: number;
  /** External search multiplies its step by this each time it misses (CSIT). */
  expansionCoefficient: number;
}

/** A goal as a user writes it: the loss ratio, the rest optional. */
export type GoalSpec = Pick<SearchGoal, 'lossRatio'> & Partial<SearchGoal>;

export const GOAL_DEFAULTS = {
  exceedRatio: 0.5,
  finalTrialDuration: 1,
  durationSum: 21,
  width: 0.005,
  precedingTargets: 2,
  expansionCoefficient: 2,
} as const;

/** CSIT's two goals: NDR (no loss) and PDR (0.5% loss), one search. */
export const NDR_PDR: readonly GoalSpec[] = [{ lossRatio: 0 }, { lossRatio: 0.005 }];

/** The goal with its defaults; the initial trial duration defaults to 1 s, or the final one if shorter. */
export function withGoalDefaults(spec: GoalSpec): SearchGoal {
  const final = spec.finalTrialDuration ?? GOAL_DEFAULTS.finalTrialDuration;
  return { ...GOAL_DEFAULTS, initialTrialDuration: Math.min(1, final), ...spec };
}

/** What a goal must satisfy (CSIT's SearchGoal.validate), each error naming its field under `at`. */
export function goalErrors(goal: SearchGoal, at: string): FieldError[] {
  const errors: FieldError[] = [];
  const need = (ok: boolean, field: keyof SearchGoal, message: string) => {
    if (!ok) errors.push({ field: `${at}.${field}`, message });
  };
  need(goal.lossRatio >= 0 && goal.lossRatio < 1, 'lossRatio', 'must be at least 0 and below 1');
  need(goal.exceedRatio >= 0 && goal.exceedRatio < 1, 'exceedRatio', 'must be at least 0 and below 1');
  need(goal.width > 0 && goal.width < 1, 'width', 'must be above 0 and below 1');
  need(goal.initialTrialDuration > 0, 'initialTrialDuration', 'must be positive');
  need(goal.finalTrialDuration >= goal.initialTrialDuration, 'finalTrialDuration', 'must be at least initialTrialDuration');
  need(goal.durationSum >= goal.finalTrialDuration, 'durationSum', 'must be at least finalTrialDuration');
  need(Number.isInteger(goal.expansionCoefficient) && goal.expansionCoefficient > 1, 'expansionCoefficient', 'must be a whole number above 1');
  const enoughTargets = goal.precedingTargets >= 1 || (goal.precedingTargets === 0 && goal.initialTrialDuration >= goal.durationSum);
  need(Number.isInteger(goal.precedingTargets) && enoughTargets, 'precedingTargets', 'must be a whole number, at least 1 unless initialTrialDuration reaches durationSum');
  return errors;
}
