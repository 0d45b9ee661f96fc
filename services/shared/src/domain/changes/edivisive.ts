/**
 * Change points by e-divisive means with a Student t significance test: a port of Apache
 * Otava's `compute_change_points` (otava/analysis.py, otava/change_point_divisive/, at
 * 1ceb153), the algorithm of Fleming et al., "Hunter: Using Change Point Detection to Hunt
 * for Performance Regressions" (ICPE 2023), on Matteson and James's e-divisive (2014).
 *
 * Two steps, as Otava takes them:
 * - split: windows of `windowLength` points, every half window, each searched by e-divisive
 *   (the split that maximizes Q̂, kept while the t-test of its two sides has p ≤ 10 × the
 *   target); the union of what the windows found are the "weak" change points;
 * - merge: the weakest of them (the largest p over the target, else the smallest step under
 *   `minMagnitude`) is dropped and its neighbours' tests redone on the merged segments, until
 *   every one left passes both.
 *
 * What differs from Otava, on purpose: Q̂ is read from 2-D prefix sums of the distances
 * (O(1) per split, where Otava forms the same sums with numpy's cumulative sums); a test of two
 * sides without spread gives p = 0 when their means differ and 1 when not (scipy gives NaN);
 * Otava's incremental form (old weak points reused for new data) is left out, since a series
 * here is at most `HISTORY` points. As in Otava, the t-test is Student's with pooled variance
 * from population standard deviations (numpy's default ddof = 0).
 */
import { incompleteBeta } from '../statistics.js';

export interface TTestStats {
  meanBefore: number;
  meanAfter: number;
  stdBefore: number;
  stdAfter: number;
  nBefore: number;
  nAfter: number;
  pValue: number;
}

export interface ChangePoint {
  /** The first point after the change. */
  index: number;
  qhat: number;
  stats: TTestStats;
}

interface Candidate {
  index: number;
  qhat: number;
}

/** Half-open [start, stop) of the series. */
interface Interval {
  start: number;
  stop: number;
}

/** Student's two-sided p of two samples, given as Otava gives them (population sds). */
export function studentP(meanA: number, sdA: number, nA: number, meanB: number, sdB: number, nB: number): number {
  if (nA + nB <= 2) return 1;
  const df = nA + nB - 2;
  const pooled = ((nA - 1) * sdA ** 2 + (nB - 1) * sdB ** 2) / df;
  const se = Math.sqrt(pooled * (1 / nA + 1 / nB));
  if (se === 0) return meanA === meanB ? 1 : 0;
  const t = (meanA - meanB) / se;
  // 2 · P(T > |t|) = I_{df/(df+t²)}(df/2, 1/2), read directly so a small p keeps its digits.
  return incompleteBeta(df / (df + t * t), df / 2, 0.5);
}

const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
const populationSd = (xs: readonly number[], m: number) => (xs.length >= 2 ? Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / xs.length) : 0);

export function compare(left: readonly number[], right: readonly number[]): TTestStats {
  if (left.length === 0 || right.length === 0) throw new Error('compare: an empty side');
  const meanBefore = mean(left);
  const meanAfter = mean(right);
  const stdBefore = populationSd(left, meanBefore);
  const stdAfter = populationSd(right, meanAfter);
  return { meanBefore, meanAfter, stdBefore, stdAfter, nBefore: left.length, nAfter: right.length, pValue: studentP(meanBefore, stdBefore, left.length, meanAfter, stdAfter, right.length) };
}

/** max(|after/before − 1|, |before/after − 1|), Otava's change_magnitude (0 for a side at 0). */
export function magnitude(stats: TTestStats): number {
  const forward = stats.meanBefore === 0 ? 0 : stats.meanAfter / stats.meanBefore - 1;
  const backward = stats.meanAfter === 0 ? 0 : stats.meanBefore / stats.meanAfter - 1;
  return Math.max(Math.abs(forward), Math.abs(backward));
}

/** The segments between sorted change points, empty ones left out (SignificanceTester.get_intervals). */
function intervalsOf(points: readonly { index: number }[], length: number): Interval[] {
  const out: Interval[] = [];
  for (let i = 0; i <= points.length; i++) {
    const start = i === 0 ? 0 : points[i - 1]!.index;
    const stop = i === points.length ? length : points[i]!.index;
    if (start !== stop) out.push({ start, stop });
  }
  return out;
}

/** The test of a candidate: splitting the segment it falls in, or (at a segment's end) the two segments it joins. */
function testCandidate(candidate: Candidate, series: readonly number[], intervals: readonly Interval[]): ChangePoint {
  for (let i = 0; i < intervals.length; i++) {
    const interval = intervals[i]!;
    if (interval.stop === candidate.index) {
      const right = intervals[i + 1]!;
      return { ...candidate, stats: compare(series.slice(interval.start, interval.stop), series.slice(right.start, right.stop)) };
    }
    if (interval.start < candidate.index && candidate.index < interval.stop) {
      return { ...candidate, stats: compare(series.slice(interval.start, candidate.index), series.slice(candidate.index, interval.stop)) };
    }
  }
  throw new Error(`no interval holds the candidate at ${candidate.index}`);
}

/**
 * Q̂ of every split of a series (PairDistanceCalculator with power 1): for X = z[s, τ) and
 * Y = z[τ, κ), n = |X|, m = |Y|,
 *   Q̂ = 2/(m+n)·Σ|X−Y| − 2m/((m+n)(n−1))·Σ_{i<k}|X_i−X_k| − 2n/((m+n)(m−1))·Σ_{j<k}|Y_j−Y_k|,
 * a term whose denominator is 0 counting as 0.
 */
class PairDistances {
  /** prefix[i · width + j] = Σ_{i' < i, j' < j} |z_i' − z_j'|, one flat array (width n + 1). */
  private readonly prefix: Float64Array;
  private readonly width: number;

  constructor(private readonly series: readonly number[]) {
    const n = series.length;
    const w = n + 1;
    const p = new Float64Array(w * w);
    for (let i = 0; i < n; i++) {
      let row = 0;
      const zi = series[i]!;
      for (let j = 0; j < n; j++) {
        row += Math.abs(zi - series[j]!);
        p[(i + 1) * w + j + 1] = p[i * w + j + 1]! + row;
      }
    }
    this.prefix = p;
    this.width = w;
  }

  /**
   * The split of z[start, end) with the largest Q̂ over start < τ < κ ≤ end. As numpy's argmax
   * over Otava's (end−start−1)² matrix, whose lower triangle is 0: the first maximum in row order.
   * Per row τ is fixed, so X's own sum and the prefix entries at τ are read once; each term is
   * the same expression, in the same order, as the closed form above, so Q̂ is bit for bit the
   * same as one computed split by split.
   */
  candidate(interval: Interval): Candidate {
    const { start: s, stop: end } = interval;
    const p = this.prefix;
    const w = this.width;
    const size = end - 1 - s;
    const sRow = s * w;
    let best = -Infinity;
    let atRow = 0;
    for (let row = 0; row < size; row++) {
      // The lower triangle's zeros: only the first of them, (1, 0), can be a first maximum.
      if (row === 1 && best < 0) {
        best = 0;
        atRow = 1;
      }
      const tau = s + 1 + row;
      const tRow = tau * w;
      const n = tau - s;
      const ptTau = p[tRow + tau]!;
      const psTau = p[sRow + tau]!;
      const within = ptTau - psTau - p[tRow + s]! + p[sRow + s]!;
      for (let col = row; col < size; col++) {
        const kappa = s + 2 + col;
        const kRow = kappa * w;
        const m = kappa - tau;
        const cross = p[tRow + kappa]! - p[sRow + kappa]! - ptTau + psTau;
        const x = n > 1 ? (m / (n - 1)) * within : 0;
        const y = m > 1 ? (n / (m - 1)) * (p[kRow + kappa]! - p[tRow + kappa]! - p[kRow + tau]! + ptTau) : 0;
        const value = (2 * cross - x - y) / (m + n);
        if (value > best) {
          best = value;
          atRow = row;
        }
      }
    }
    return { index: s + 1 + atRow, qhat: best };
  }

  /** The best candidate over the segments of two points or more (Calculator.get_next_candidate). */
  next(intervals: readonly Interval[]): Candidate | null {
    let best: Candidate | null = null;
    for (const interval of intervals) {
      if (interval.stop - interval.start <= 1) continue;
      const candidate = this.candidate(interval);
      if (!best || candidate.qhat > best.qhat) best = candidate;
    }
    return best;
  }

  get length(): number {
    return this.series.length;
  }
}

/** e-divisive on one window (ChangePointDetector.get_change_points): splits while the t-test says p ≤ maxPValue. */
function detectWindow(window: readonly number[], maxPValue: number): ChangePoint[] {
  const distances = new PairDistances(window);
  const points: ChangePoint[] = [];
  for (;;) {
    const intervals = intervalsOf(points, distances.length);
    const candidate = distances.next(intervals);
    if (!candidate) break;
    const point = testCandidate(candidate, window, intervals);
    if (!(point.stats.pValue <= maxPValue)) break;
    points.push(point);
    points.sort((a, b) => a.index - b.index);
  }
  return points;
}

/** The split step: e-divisive over sliding windows; every window's points, tested again over the whole series. */
export function split(series: readonly number[], windowLength: number, maxPValue: number): ChangePoint[] {
  if (windowLength < 2) throw new Error('windowLength must be at least 2');
  const step = Math.floor(windowLength / 2);
  const found: ChangePoint[] = [];
  for (let start = 0; start < series.length; ) {
    const end = Math.min(start + windowLength, series.length);
    const points = detectWindow(series.slice(start, end), maxPValue).map((p) => ({ ...p, index: p.index + start }));
    const last = points.length > 0 ? points[points.length - 1]!.index : 0;
    start = Math.max(last, start + step);
    for (const point of points) if (!found.some((f) => f.index === point.index)) found.push(point);
  }
  found.sort((a, b) => a.index - b.index);
  const intervals = intervalsOf(found, series.length);
  return found.map((p) => testCandidate(p, series, intervals));
}

/** The merge step: drops the weakest point until every one has p < maxPValue and a step over minMagnitude. */
export function merge(weak: readonly ChangePoint[], series: readonly number[], maxPValue: number, minMagnitude: number): ChangePoint[] {
  const points = [...weak];
  while (points.length > 0) {
    let weakest = points.reduce((a, b) => (b.stats.pValue > a.stats.pValue ? b : a));
    if (weakest.stats.pValue < maxPValue) {
      weakest = points.reduce((a, b) => (magnitude(b.stats) < magnitude(a.stats) ? b : a));
      if (magnitude(weakest.stats) > minMagnitude) return points;
    }
    const at = points.indexOf(weakest);
    points.splice(at, 1);
    const intervals = intervalsOf(points, series.length);
    for (const index of [at, at + 1]) {
      if (index < points.length) points[index] = testCandidate(points[index]!, series, intervals);
    }
  }
  return points;
}

export interface EDivisiveOptions {
  windowLength: number;
  maxPValue: number;
  minMagnitude: number;
}

/** Otava's defaults (AnalysisOptions): a window of 50, p = 0.001, no minimum step. */
export const OTAVA_DEFAULTS: EDivisiveOptions = { windowLength: 50, maxPValue: 0.001, minMagnitude: 0 };

/** compute_change_points: split at the relaxed first-pass p, then merge at the target. */
export function changePoints(series: readonly number[], options: EDivisiveOptions = OTAVA_DEFAULTS): ChangePoint[] {
  const p = options.maxPValue;
  const firstPass = p < 0.05 ? p * 10 : p < 0.5 ? p * 2 : p;
  return merge(split(series, options.windowLength, firstPass), series, p, options.minMagnitude);
}
