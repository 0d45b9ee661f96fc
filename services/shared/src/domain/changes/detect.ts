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
 *   found within 5 runs in 88-90% of series with 4 (minSegment 3, 5 and 6 did no better on
 *   both detection and false points together).
 */
import { CONFIDENCE, summarize, welch } from '../statistics.js';
import { changePoints, compare, magnitude, OTAVA_DEFAULTS, type EDivisiveOptions, type TTestStats } from './edivisive.js';

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
  /** Student's t-test of the two segments as reported (Otava's test, on them). */
  pValue: number;
}

/**
 * A point that bounds a segment of fewer than `minSegment` runs before it (the series' start, or
 * the previous point): of the two points around such a segment, the one with the weaker test.
 * A change made during a run leaves one run between the two levels, and Otava places a point on
 * either side of it; neither would ever be reported (each has a side of one run), so the step
 * went unsaid. Of the two, the point with the weaker test goes, and the run joins one side. A
 * first segment that short (the series' first runs) joins the next. The last segment is left
 * alone: it is a step still waiting for its runs.
 */
function shortSegment<T extends { index: number; stats: TTestStats }>(tested: readonly T[], minSegment: number): T | null {
  for (let i = 0; i < tested.length; i++) {
    const start = i === 0 ? 0 : tested[i - 1]!.index;
    if (tested[i]!.index - start >= minSegment) continue;
    if (i === 0) return tested[0]!;
    return tested[i]!.stats.pValue >= tested[i - 1]!.stats.pValue ? tested[i]! : tested[i - 1]!;
  }
  return null;
}

/**
 * Otava's merge retests only the two points after one it drops, so the point before it keeps the
 * test of a segment that has since grown (the port keeps this, to match Otava point for point),
 * and a point can stand on a 3% step that is 0.3% on the segments it now divides. What niclab
 * reports must hold on the segments it reports: every point is tested again between its
 * neighbours, and the weakest that fails (p first, then the step, as Otava orders them; then a
 * segment too short to report, see shortSegment) is dropped, until none fails.
 */
export function settle(values: readonly number[], indices: readonly number[], options: ChangeOptions): { index: number; stats: TTestStats }[] {
  const points = [...indices];
  for (;;) {
    const bounds = [0, ...points, values.length];
    const tested = points.map((index, i) => ({ index, stats: compare(values.slice(bounds[i]!, index), values.slice(index, bounds[i + 2]!)) }));
    if (tested.length === 0) return tested;
    const unlikely = tested.reduce((a, b) => (b.stats.pValue > a.stats.pValue ? b : a));
    const smallest = tested.reduce((a, b) => (magnitude(b.stats) < magnitude(a.stats) ? b : a));
    const drop = unlikely.stats.pValue >= options.maxPValue ? unlikely : magnitude(smallest.stats) <= options.minStep ? smallest : shortSegment(tested, options.minSegment);
    if (!drop) return tested;
    points.splice(tested.indexOf(drop), 1);
  }
}

/** The steps of `values` (oldest first) at these options. */
export function steps(values: readonly number[], options: ChangeOptions = CHANGE_DEFAULTS): Step[] {
  const found = changePoints(values, { windowLength: options.windowLength, maxPValue: options.maxPValue, minMagnitude: options.minStep });
  const points = settle(values, found.map((p) => p.index), options);
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
