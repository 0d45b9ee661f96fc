/**
 * The statistics of repeated runs: summaries with the confidence interval of the mean (within
 * the figure's domain), Welch's t-test for comparing two campaigns and Holm's adjustment of a
 * family of its p-values. No dependencies: the t distribution comes from the regularized
 * incomplete beta function (Numerical Recipes' continued fraction).
 */
import { UNBOUNDED, type FigureDomain } from './figure-domains.js';

/** The confidence of every interval and test niclab reports, unless a job's adaptive `repeat` asks for another. */
export const CONFIDENCE = 0.95;

/** How an interval of the mean was made: `t` (mean ± t·sd/√n) or `clipped-t` (that cut at its figure's bounds, which it crossed). */
export type IntervalMethod = 't' | 'clipped-t';

export interface Summary {
  n: number;
  mean: number;
  standardDeviation: number;
  min: number;
  max: number;
  /** The interval of the mean at the summary's confidence, within the figure's domain ([mean, mean] when n < 2). */
  confidenceInterval: [number, number];
  intervalMethod: IntervalMethod;
  /** standardDeviation / mean; 0 when the mean is 0. */
  coefficientOfVariation: number;
}

const meanOf = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;
const sdOf = (values: number[], mean: number) => (values.length > 1 ? Math.sqrt(values.reduce((a, b) => a + (b - mean) ** 2, 0) / (values.length - 1)) : 0);

/** Half the Student-t interval of a mean: t(1 - (1 - confidence) / 2, n - 1) · sd / √n; 0 under 2 values. */
export function tHalfWidth(standardDeviation: number, n: number, confidence = CONFIDENCE): number {
  return n > 1 ? tQuantile(1 - (1 - confidence) / 2, n - 1) * (standardDeviation / Math.sqrt(n)) : 0;
}

/** An interval cut to `domain`, and whether the cut changed it. */
export function clipToDomain([low, high]: [number, number], domain: FigureDomain): { interval: [number, number]; clipped: boolean } {
  const interval: [number, number] = [Math.max(low, domain.min), Math.min(high, domain.max ?? Infinity)];
  return { interval, clipped: interval[0] !== low || interval[1] !== high };
}

/**
 * The Student-t interval of the mean, cut to `domain`: the mean lies in the domain, so the cut
 * never removes it and the coverage is the t-interval's (an interval of the logs would be the
 * geometric mean's, not that of the mean reported beside it and compared by Welch's test).
 */
function meanInterval(values: number[], mean: number, sd: number, confidence: number, domain: FigureDomain): { interval: [number, number]; method: IntervalMethod } {
  if (values.length < 2) return { interval: [mean, mean], method: 't' };
  const half = tHalfWidth(sd, values.length, confidence);
  const { interval, clipped } = clipToDomain([mean - half, mean + half], domain);
  return { interval, method: clipped ? 'clipped-t' : 't' };
}

/** n, mean, sample sd, min, max, the interval of the mean within `domain` and the cv of `values`. */
export function summarize(values: number[], confidence = CONFIDENCE, domain: FigureDomain = UNBOUNDED): Summary {
  const n = values.length;
  if (n === 0) return { n: 0, mean: 0, standardDeviation: 0, min: 0, max: 0, confidenceInterval: [0, 0], intervalMethod: 't', coefficientOfVariation: 0 };
  const mean = meanOf(values);
  const sd = sdOf(values, mean);
  const { interval, method } = meanInterval(values, mean, sd, confidence, domain);
  return {
    n,
    mean,
    standardDeviation: sd,
    min: Math.min(...values),
    max: Math.max(...values),
    confidenceInterval: interval,
    intervalMethod: method,
    coefficientOfVariation: mean !== 0 ? sd / Math.abs(mean) : 0,
  };
}

/** Half the Student-t interval's width as a percentage of the mean (netperf -I's measure), uncut: adaptive repetition stops on it. */
export function halfWidthPercent(summary: Summary, confidence = CONFIDENCE): number {
  return summary.mean !== 0 ? (tHalfWidth(summary.standardDeviation, summary.n, confidence) / Math.abs(summary.mean)) * 100 : 0;
}

/**
 * Holm's step-down adjustment of one family's p-values, in their order: the i-th smallest of
 * m becomes max over j <= i of min(1, (m - j + 1) p(j)). Rejecting where the adjusted p is
 * below alpha keeps the chance of any false rejection in the family at most alpha, whatever
 * the dependence between its tests. A null (no test) is no member and stays null.
 */
export function holm(pValues: (number | null)[]): (number | null)[] {
  const members = pValues.map((p, i) => ({ p, i })).filter((x): x is { p: number; i: number } => x.p !== null).sort((a, b) => a.p - b.p);
  const adjusted: (number | null)[] = pValues.map(() => null);
  let running = 0;
  members.forEach(({ p, i }, rank) => {
    running = Math.max(running, Math.min(1, (members.length - rank) * p));
    adjusted[i] = running;
  });
  return adjusted;
}

function logGamma(x: number): number {
  // Lanczos approximation (g = 7, n = 9).
  const c = [0.99999999999980993, 676.5203681218851, -1259.1392167224028, 771.32342877765313, -176.61502916214059, 12.507343278686905, -0.13857109526572012, 9.9843695780195716e-6, 1.5056327351493116e-7];
  if (x < 0.5) return Math.log(Math.PI / Math.sin(Math.PI * x)) - logGamma(1 - x);
  x -= 1;
  let a = c[0]!;
  const t = x + 7.5;
  for (let i = 1; i < 9; i++) a += c[i]! / (x + i);
  return 0.5 * Math.log(2 * Math.PI) + (x + 0.5) * Math.log(t) - t + Math.log(a);
}

function betaContinuedFraction(a: number, b: number, x: number): number {
  const tiny = 1e-300;
  let c = 1;
  let d = 1 - ((a + b) * x) / (a + 1);
  if (Math.abs(d) < tiny) d = tiny;
  d = 1 / d;
  let h = d;
  for (let m = 1; m <= 300; m++) {
    const m2 = 2 * m;
    let aa = (m * (b - m) * x) / ((a + m2 - 1) * (a + m2));
    d = 1 + aa * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    h *= d * c;
    aa = (-(a + m) * (a + b + m) * x) / ((a + m2) * (a + m2 + 1));
    d = 1 + aa * d;
    if (Math.abs(d) < tiny) d = tiny;
    c = 1 + aa / c;
    if (Math.abs(c) < tiny) c = tiny;
    d = 1 / d;
    const delta = d * c;
    h *= delta;
    if (Math.abs(delta - 1) < 1e-15) break;
  }
  return h;
}

/** The regularized incomplete beta function I_x(a, b). */
export function incompleteBeta(x: number, a: number, b: number): number {
  if (x <= 0) return 0;
  if (x >= 1) return 1;
  const front = Math.exp(logGamma(a + b) - logGamma(a) - logGamma(b) + a * Math.log(x) + b * Math.log(1 - x));
  return x < (a + 1) / (a + b + 2) ? (front * betaContinuedFraction(a, b, x)) / a : 1 - (front * betaContinuedFraction(b, a, 1 - x)) / b;
}

/** P(T <= t) for Student's t with `df` degrees of freedom. */
export function tCdf(t: number, df: number): number {
  if (!Number.isFinite(t)) return t > 0 ? 1 : 0;
  const tail = 0.5 * incompleteBeta(df / (df + t * t), df / 2, 0.5);
  return t >= 0 ? 1 - tail : tail;
}

/** Student's t density with `df` degrees of freedom. */
function tPdf(t: number, df: number): number {
  return Math.exp(logGamma((df + 1) / 2) - logGamma(df / 2) - ((df + 1) / 2) * Math.log1p((t * t) / df)) / Math.sqrt(df * Math.PI);
}

/**
 * The `p` quantile of Student's t with `df` degrees of freedom: Newton's method on the CDF,
 * kept inside a shrinking bracket (a step that leaves it bisects instead), so it converges
 * where Newton alone would overshoot in the heavy tails of a small df.
 */
export function tQuantile(p: number, df: number): number {
  let low = -1e4;
  let high = 1e4;
  let t = 0;
  for (let i = 0; i < 200; i++) {
    const f = tCdf(t, df) - p;
    if (f === 0) return t;
    if (f < 0) low = t;
    else high = t;
    let next = t - f / tPdf(t, df);
    if (!(next > low && next < high)) next = (low + high) / 2;
    if (Math.abs(next - t) <= 1e-13 * Math.max(1, Math.abs(t))) return next;
    t = next;
  }
  return t;
}

export interface Welch {
  /** candidate mean − baseline mean. */
  difference: number;
  /** The confidence interval of the difference (Welch). */
  differenceInterval: [number, number];
  degreesOfFreedom: number;
  t: number;
  /** Two-sided p-value; null when either side has fewer than 2 values. */
  pValue: number | null;
}

/** Welch's unequal-variance t-test of candidate against baseline. */
export function welch(baseline: Summary, candidate: Summary, confidence = CONFIDENCE): Welch {
  const difference = candidate.mean - baseline.mean;
  if (baseline.n < 2 || candidate.n < 2) return { difference, differenceInterval: [difference, difference], degreesOfFreedom: 0, t: 0, pValue: null };
  const vb = baseline.standardDeviation ** 2 / baseline.n;
  const vc = candidate.standardDeviation ** 2 / candidate.n;
  const se = Math.sqrt(vb + vc);
  if (se === 0) {
    // Both sides without spread: equal means are the same, different means certainly differ.
    return { difference, differenceInterval: [difference, difference], degreesOfFreedom: baseline.n + candidate.n - 2, t: difference === 0 ? 0 : Math.sign(difference) * Infinity, pValue: difference === 0 ? 1 : 0 };
  }
  const df = (vb + vc) ** 2 / (vb ** 2 / (baseline.n - 1) + vc ** 2 / (candidate.n - 1));
  const t = difference / se;
  const half = tQuantile(1 - (1 - confidence) / 2, df) * se;
  return { difference, differenceInterval: [difference - half, difference + half], degreesOfFreedom: df, t, pValue: Math.min(1, 2 * (1 - tCdf(Math.abs(t), df))) };
}

/** Groups of values summarised for contrasts of their means: each group's mean and size, and the pooled within-group standard deviation. */
export interface PooledGroups {
  means: number[];
  sizes: number[];
  /** √(Σ over groups of Σ (y − its group's mean)² / (N − k)); null without degrees of freedom. */
  pooledStandardDeviation: number | null;
  /** N − k: the values less the groups. */
  degreesOfFreedom: number;
}

/** The groups' means and sizes and their pooled within-group standard deviation (every group must have a value). */
export function pooledGroups(groups: number[][]): PooledGroups {
  const means = groups.map(meanOf);
  const sizes = groups.map((g) => g.length);
  const degreesOfFreedom = sizes.reduce((a, b) => a + b, 0) - groups.length;
  const squares = groups.reduce((sum, g, i) => sum + g.reduce((a, y) => a + (y - means[i]!) ** 2, 0), 0);
  return { means, sizes, pooledStandardDeviation: degreesOfFreedom > 0 ? Math.sqrt(squares / degreesOfFreedom) : null, degreesOfFreedom };
}

export interface ContrastEstimate {
  /** L = Σ w·mean. */
  estimate: number;
  /** s·√(Σ w²/n); null without degrees of freedom. */
  standardError: number | null;
  /** L ± t(1 − (1 − confidence)/2, N − k)·SE; null without degrees of freedom. */
  interval: [number, number] | null;
}

/** The linear contrast Σ w·mean of pooled groups (weights in the groups' order), with its Student-t interval on the pooled degrees of freedom. */
export function contrast(groups: PooledGroups, weights: number[], confidence = CONFIDENCE): ContrastEstimate {
  const estimate = weights.reduce((sum, w, i) => sum + w * groups.means[i]!, 0);
  const s = groups.pooledStandardDeviation;
  if (s === null) return { estimate, standardError: null, interval: null };
  const standardError = s * Math.sqrt(weights.reduce((sum, w, i) => sum + (w * w) / groups.sizes[i]!, 0));
  const half = tQuantile(1 - (1 - confidence) / 2, groups.degreesOfFreedom) * standardError;
  return { estimate, standardError, interval: [estimate - half, estimate + half] };
}
