/**
 * The normative part of MLRsearch, as draft-ietf-bmwg-mlrsearch-15 (RFC 9971) writes it:
 * Load Classification (§5.1 "Load Classification Logic", Appendix A "Load Classification
 * Code") and Conditional Throughput (§5.2, Appendix B). Every name below is the draft's.
 */

/** What classifies a load: a goal's four attributes, or a CSIT preceding target's. */
export interface Classifier {
  /** Goal Loss Ratio. */
  lossRatio: number;
  /** Goal Exceed Ratio. */
  exceedRatio: number;
  /** Goal Final Trial Duration: a trial at least this long (as asked) is full-length. */
  finalTrialDuration: number;
  /** Goal Duration Sum. */
  durationSum: number;
}

/** One Trial Result as the classification sees it. */
export interface ClassifiedTrial {
  /** Trial Duration: the intended duration, s. */
  duration: number;
  /** Trial Effective Duration, s: what the sums add up. */
  effectiveDuration: number;
  /** Trial Loss Ratio. */
  lossRatio: number;
}

/** The four duration sums a load's trials give for one goal. */
export interface DurationSums {
  fullLengthLowLoss: number;
  fullLengthHighLoss: number;
  shortLowLoss: number;
  shortHighLoss: number;
}

export type Bound = 'upper' | 'lower' | 'undecided';

/** Every temporary of §5.1, as the draft's Appendix C tables list them, and the result. */
export interface LoadClassification extends DurationSums {
  balancingSum: number;
  excessSum: number;
  positiveExcessSum: number;
  effectiveHighLossSum: number;
  effectiveFullSum: number;
  effectiveWholeSum: number;
  missingSum: number;
  pessimisticHighLossSum: number;
  optimisticExceedRatio: number;
  pessimisticExceedRatio: number;
  bound: Bound;
}

export const EMPTY_SUMS: DurationSums = Object.freeze({ fullLengthLowLoss: 0, fullLengthHighLoss: 0, shortLowLoss: 0, shortHighLoss: 0 });

/** A high-loss trial (§4.6.1.1): its loss ratio is above the goal's. */
export const isHighLoss = (goal: Classifier, lossRatio: number) => lossRatio > goal.lossRatio;
/** A full-length trial (§4.6.1.4): not shorter than the goal's final trial duration. */
export const isFullLength = (goal: Classifier, duration: number) => duration >= goal.finalTrialDuration;

/** The sums with one more trial added. */
export function addTrial(goal: Classifier, sums: DurationSums, trial: ClassifiedTrial): DurationSums {
  const high = isHighLoss(goal, trial.lossRatio);
  const key: keyof DurationSums = isFullLength(goal, trial.duration) ? (high ? 'fullLengthHighLoss' : 'fullLengthLowLoss') : high ? 'shortHighLoss' : 'shortLowLoss';
  return { ...sums, [key]: sums[key] + trial.effectiveDuration };
}

/** The sums of a load's trials. */
export const durationSums = (goal: Classifier, trials: readonly ClassifiedTrial[]): DurationSums =>
  trials.reduce((sums, trial) => addTrial(goal, sums, trial), EMPTY_SUMS);

/**
 * Load Classification: an Upper Bound when even the optimistic exceed ratio is above the goal's,
 * a Lower Bound when even the pessimistic one is not, else Undecided. Appendix A's code, line by line.
 */
export function classifyLoad(goal: Classifier, sums: DurationSums): LoadClassification {
  const exceedCoefficient = goal.exceedRatio / (1 - goal.exceedRatio);
  const balancingSum = sums.shortLowLoss * exceedCoefficient;
  const excessSum = sums.shortHighLoss - balancingSum;
  const positiveExcessSum = Math.max(0, excessSum);
  const effectiveHighLossSum = sums.fullLengthHighLoss + positiveExcessSum;
  const effectiveFullSum = sums.fullLengthLowLoss + effectiveHighLossSum;
  const effectiveWholeSum = Math.max(effectiveFullSum, goal.durationSum);
  const missingSum = effectiveWholeSum - effectiveFullSum;
  const quantileDurationSum = effectiveWholeSum * goal.exceedRatio;
  const pessimisticHighLossSum = effectiveWholeSum - sums.fullLengthLowLoss;
  const pessimisticIsLower = pessimisticHighLossSum <= quantileDurationSum;
  const optimisticIsLower = effectiveHighLossSum <= quantileDurationSum;
  const bound: Bound = optimisticIsLower ? (pessimisticIsLower ? 'lower' : 'undecided') : 'upper';
  return {
    ...sums, balancingSum, excessSum, positiveExcessSum, effectiveHighLossSum, effectiveFullSum, effectiveWholeSum, missingSum, pessimisticHighLossSum,
    optimisticExceedRatio: effectiveHighLossSum / effectiveWholeSum,
    pessimisticExceedRatio: pessimisticHighLossSum / effectiveWholeSum,
    bound,
  };
}

/** A load's classification from its trials directly. */
export const classifyTrials = (goal: Classifier, trials: readonly ClassifiedTrial[]) => classifyLoad(goal, durationSums(goal, trials));

/**
 * The quantile of the full-length trials' loss ratios that Conditional Throughput uses (Appendix B):
 * missing duration up to the Goal Duration Sum counts as 100% loss, so a load with only short trials
 * gives 1. Null for a load with no trial at all (where Appendix B's code does not apply).
 */
export function conditionalLossRatio(goal: Classifier, trials: readonly ClassifiedTrial[]): number | null {
  if (trials.length === 0) return null;
  const fullLength = trials.filter((t) => isFullLength(goal, t.duration)).sort((a, b) => a.lossRatio - b.lossRatio);
  const fullLengthSum = fullLength.reduce((sum, t) => sum + t.effectiveDuration, 0);
  let remaining = Math.max(goal.durationSum, fullLengthSum) * (1 - goal.exceedRatio);
  let quantile: number | null = null;
  for (const trial of fullLength) {
    if (quantile !== null && remaining <= 0) return quantile;
    quantile = trial.lossRatio;
    remaining -= trial.effectiveDuration;
  }
  return remaining > 0 ? 1 : quantile;
}

/** Conditional Throughput at a load: the load × (1 − the quantile loss ratio); null for a load with no trial. */
export function conditionalThroughput(goal: Classifier, load: number, trials: readonly ClassifiedTrial[]): number | null {
  const lossRatio = conditionalLossRatio(goal, trials);
  return lossRatio === null ? null : load * (1 - lossRatio);
}
