/**
 * Loads on a logarithmic grid of whole steps, as CSIT's MLRsearch rounds them (LoadRounding,
 * DiscreteLoad, DiscreteWidth, DiscreteInterval): step 0 is the min load, `maxStep` the max load,
 * and a relative width is a whole number of steps no wider than asked, so halving a bracket
 * and widening a step are exact. Every search position below is a step number.
 */

/** Each goal width must come out between these shares of itself in whole steps (CSIT's qualities). */
const QUALITY_LOWER = 0.99;
const QUALITY_UPPER = 0.999999;

/** The fewest steps between min and max load at which every width is a whole number of steps within quality (CSIT's _find_ints). */
function stepsFor(logSpan: number, widths: readonly number[]): number {
  const logWidths = [...new Set(widths)].map((w) => -Math.log1p(-w));
  for (let candidate = 1; ; ) {
    const unit = logSpan / candidate;
    const tries = logWidths.map((logWidth) => {
      const units = logWidth / unit;
      const whole = Math.floor(units);
      const quality = whole / units;
      return quality >= QUALITY_LOWER && quality <= QUALITY_UPPER ? candidate : (((whole + 1) / QUALITY_UPPER) / units) * candidate;
    });
    if (tries.every((t) => t === candidate)) return candidate;
    candidate = Math.max(Math.ceil(Math.max(...tries)), candidate + 1);
  }
}

export class LoadGrid {
  /** The max load's step. */
  readonly maxStep: number;
  private readonly unit: number;

  constructor(readonly minLoad: number, readonly maxLoad: number, goalWidths: readonly number[]) {
    const span = Math.log(maxLoad) - Math.log(minLoad);
    this.maxStep = stepsFor(span, goalWidths);
    this.unit = span / this.maxStep;
  }

  /** The load at a step (clamped to the limits). */
  load(step: number): number {
    if (step <= 0) return this.minLoad;
    if (step >= this.maxStep) return this.maxLoad;
    return this.minLoad * Math.exp(step * this.unit);
  }

  /** The highest step whose load is not above `load`. */
  floor(load: number): number {
    if (load <= this.minLoad) return 0;
    if (load >= this.maxLoad) return this.maxStep;
    let step = Math.floor(Math.log(load / this.minLoad) / this.unit);
    while (step < this.maxStep && this.load(step + 1) <= load) step++;
    while (step > 0 && this.load(step) > load) step--;
    return step;
  }

  /** A relative width (upper × (1 − width) = lower) in whole steps, rounded down. */
  steps(relativeWidth: number): number {
    return this.floor(this.minLoad / (1 - relativeWidth));
  }

  /** The relative width between two steps: (upper − lower) / upper. */
  relativeWidth(lower: number, upper: number): number {
    const high = this.load(upper);
    return (high - this.load(lower)) / high;
  }
}

/** The bracket's width as a multiple of a goal width, both in steps. */
export const widthInGoals = (lower: number, upper: number, goal: number) => (upper - lower) / goal;

/**
 * A step between `lower` and `upper` (CSIT's DiscreteInterval.middle): the upper part is the goal
 * width times a power of two, whichever makes the split most even, so later halvings land on the
 * goal; a bracket under two goals wide is split as if the goal were half as wide, or evenly.
 */
export function middle(lower: number, upper: number, goal: number): number {
  const width = upper - lower;
  if (width <= goal) throw new Error(`bracket ${lower}..${upper} is no wider than ${goal} steps: nothing to halve`);
  if (width === 2 * goal) return lower + goal;
  if (width < 2 * goal) return goal % 2 === 0 ? middle(lower, upper, goal / 2) : lower + Math.floor(width / 2);
  let high = goal;
  let low = width - high;
  for (;;) {
    const high2 = high * 2;
    const low2 = width - high2;
    if (low2 <= high2) {
      if (high * low < high2 * low2) low = low2;
      return lower + low;
    }
    high = high2;
    low = low2;
  }
}
