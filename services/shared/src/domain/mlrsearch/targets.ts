/**
 * Each goal as a chain of targets, coarsest first (CSIT's TargetScaling): the goal itself last,
 * and before it `precedingTargets` targets whose duration sums fall geometrically from the goal's
 * to its initial trial duration, each twice the width of the next. CSIT's defaults make the
 * chain 1 s → 4.58 s → 21 s of trial-seconds at widths 2% → 1% → 0.5%.
 */
import type { Classifier } from './classification.js';
import type { SearchGoal } from './goals.js';
import type { LoadGrid } from './load-grid.js';

/** One target: classifies loads like a goal, with its own trial duration, sum and width. */
export interface Target extends Classifier {
  /** Index of the goal in the config. */
  goal: number;
  /** Place in the goal's chain: 0 the coarsest, the last one the goal itself. */
  index: number;
  /** Width in grid steps. */
  width: number;
  /** Duration of the trials the selector asks for while at this target, s. */
  trialDuration: number;
  expansionCoefficient: number;
}

/** The goal's chain of targets, coarsest first (the last is the goal, as the draft classifies it). */
export function targetChain(goal: SearchGoal, goalIndex: number, grid: LoadGrid): Target[] {
  const finalWidth = grid.steps(goal.width);
  const count = goal.precedingTargets;
  const multiplier = count > 0 ? Math.pow(goal.initialTrialDuration / goal.durationSum, 1 / count) : 1;
  const chain: Omit<Target, 'index'>[] = [];
  const base = { goal: goalIndex, lossRatio: goal.lossRatio, exceedRatio: goal.exceedRatio, expansionCoefficient: goal.expansionCoefficient };
  chain.push({ ...base, width: finalWidth, finalTrialDuration: goal.finalTrialDuration, trialDuration: goal.finalTrialDuration, durationSum: goal.durationSum });
  for (let n = 1; n <= count; n++) {
    const durationSum = n === count ? goal.initialTrialDuration : goal.durationSum * Math.pow(multiplier, n);
    const trialDuration = Math.min(goal.finalTrialDuration, durationSum);
    chain.push({ ...base, width: finalWidth * 2 ** n, finalTrialDuration: trialDuration, trialDuration, durationSum });
  }
  return chain.reverse().map((target, index) => ({ ...target, index }));
}
