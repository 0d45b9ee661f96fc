/**
 * The change points niclab reports in one series: Otava's e-divisive points (edivisive.ts),
 * each kept only once both of its segments hold `minSegment` runs, with the step's size and
 * its confidence interval (Welch's, on the two segments' runs).
 *
 * The defaults, from the synthetic series of test/shared/changes.test.ts (2% cv noise, normal
 * and heavy-tailed; the rates it measures are in BENCHMARKS.md):
 * - p = 0.001 and a window of 50: Otava's own;
 * - minStep 2%: a run-to-run spread of 2% cv (what a loaded lab link shows) makes steps under it
 *   indistinguishable from a lab's drift, and Otava's authors found ±10% noise gave spurious
 *   alerts without one; Chromium's dashboard asks for 1% and 2.5σ;
 * - minSegment 4: a step is said within 4 runs after it, and a burst of 3 or fewer odd runs (a
 *   noisy neighbour, a reboot) is not a step. Chromium asks for 6; 5% steps at 2% cv are
 *   found with 4 in more than 95% of series.
 */
import { CONFIDENCE, summarize, welch } from '../statistics.js';
import { changePoints, OTAVA_DEFAULTS, type EDivisiveOptions } from './edivisive.js';

export interface ChangeOptions extends Pick<EDivisiveOptions, 'windowLength' | 'maxPValue'> {
  /** The smallest relative step reported (Otava's min_magnitude): 0.02 is 2%. */
  minStep: number;
  /** The fewest runs on each side of a change point before it is reported. */
  minSegment: number;
}

export const CHANGE_DEFAULTS: ChangeOptions = { windowLength: OTAVA_DEFAULTS.windowLength, maxPValue: OTAVA_DEFAULTS.maxPValue, minStep: 0.02, minSegment: 4 };

/** The most recent runs of a series that detection reads: older steps were found when they were recent. */
export const HISTORY = 200;

export interface Step {
  /** The first run after the change, an index into the series given. */
  index: number;
  /** The runs from the previous change point (or the series' start) up to this one, and from it to the next (or the end). */
  before: { mean: number; runs: number };
  after: { mean: number; runs: number };
  /** after − before, with its interval (Welch, at CONFIDENCE). */
  difference: number;
  differenceInterval: [number, number];
  /** The difference relative to `before`, with the interval scaled the same way; null when `before` is 0. */
  relative: number | null;
  relativeInterval: [number, number] | null;
  /** Otava's p: Student's t-test of the two segments. */
  pValue: number;
}

/** The steps of `values` (oldest first) at these options. */
export function steps(values: readonly number[], options: ChangeOptions = CHANGE_DEFAULTS): Step[] {
  const points = changePoints(values, { windowLength: options.windowLength, maxPValue: options.maxPValue, minMagnitude: options.minStep });
  const bounds = [0, ...points.map((p) => p.index), values.length];
  const out: Step[] = [];
  points.forEach((point, i) => {
    const left = values.slice(bounds[i]!, point.index);
    const right = values.slice(point.index, bounds[i + 2]!);
    if (left.length < options.minSegment || right.length < options.minSegment) return;
    const [a, b] = [summarize(left), summarize(right)];
    const test = welch(a, b, CONFIDENCE);
    const before = a.mean;
    const relative = before === 0 ? null : test.difference / Math.abs(before);
    out.push({
      index: point.index,
      before: { mean: before, runs: left.length },
      after: { mean: b.mean, runs: right.length },
      difference: test.difference,
      differenceInterval: test.differenceInterval,
      relative,
      relativeInterval: before === 0 ? null : [test.differenceInterval[0] / Math.abs(before), test.differenceInterval[1] / Math.abs(before)],
      pValue: point.stats.pValue,
    });
  });
  return out;
}
