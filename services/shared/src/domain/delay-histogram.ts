/**
 * A histogram of delays with a bounded relative error at any size, as HdrHistogram keeps them:
 * exact nanoseconds below 2^SUB_BITS ns, then 2^(SUB_BITS-1) buckets per power of two, so a
 * reported quantile is within 2^-SUB_BITS of the delay it stands for, from a microsecond to days.
 * Negative delays (two ends' clocks a little apart) are counted as such, in a mirror histogram.
 * Pure and of fixed size (360 KB of counters), whatever the run's length.
 */

/** Significant bits kept: buckets are at most 2^-(SUB_BITS-1) of their value wide, a quantile (a bucket's middle) within 2^-SUB_BITS. */
const SUB_BITS = 11;
const LINEAR = 2 ** SUB_BITS;
const HALF = LINEAR / 2;
/** Powers of two above the linear part up to 2^53 ns (104 days): beyond that a delay is counted in the last bucket and the maximum. */
const BUCKETS = LINEAR + (53 - SUB_BITS) * HALF;

/** The largest relative error of a quantile the histogram reports (above the exact nanoseconds below 2 µs). */
export const DELAY_HISTOGRAM_RELATIVE_ERROR = 2 ** -SUB_BITS;

/** The bucket of a delay of `ns` nanoseconds (a non-negative integer). */
function bucketOf(ns: number): number {
  if (ns < LINEAR) return ns;
  let exponent = Math.floor(Math.log2(ns));
  // log2 of a double can land a hair off at a power of two.
  if (2 ** exponent > ns) exponent -= 1;
  else if (2 ** (exponent + 1) <= ns) exponent += 1;
  const shift = exponent - (SUB_BITS - 1);
  return Math.min(BUCKETS - 1, LINEAR + (exponent - SUB_BITS) * HALF + (Math.floor(ns / 2 ** shift) - HALF));
}

/** The middle of bucket `index`, in nanoseconds (the value itself in the exact part). */
function middleOf(index: number): number {
  if (index < LINEAR) return index;
  const exponent = SUB_BITS + Math.floor((index - LINEAR) / HALF);
  const width = 2 ** (exponent - (SUB_BITS - 1));
  const low = (HALF + ((index - LINEAR) % HALF)) * width;
  return low + width / 2;
}

export interface DelaySummary {
  min: number;
  mean: number;
  p50: number;
  p99: number;
  max: number;
}

/** Delays in seconds: add each, then the summary (min, mean and max exact; quantiles within DELAY_HISTOGRAM_RELATIVE_ERROR, nearest rank). */
export class DelayHistogram {
  private readonly positive = new Uint32Array(BUCKETS);
  private readonly negative = new Uint32Array(BUCKETS);
  private negatives = 0;
  private count = 0;
  private sum = 0;
  private min = Infinity;
  private max = -Infinity;

  /** One delay, in seconds. */
  add(seconds: number): void {
    const ns = Math.round(Math.abs(seconds) * 1e9);
    if (seconds < 0 && ns > 0) {
      this.negative[bucketOf(ns)]! += 1;
      this.negatives += 1;
    } else this.positive[bucketOf(ns)]! += 1;
    this.count += 1;
    this.sum += seconds;
    if (seconds < this.min) this.min = seconds;
    if (seconds > this.max) this.max = seconds;
  }

  get size(): number {
    return this.count;
  }

  /** The q-quantile (nearest rank), in seconds, held within the exact min and max. */
  quantile(q: number): number {
    if (this.count === 0) return 0;
    const rank = Math.max(1, Math.ceil(q * this.count));
    const clamp = (seconds: number) => Math.min(this.max, Math.max(this.min, seconds));
    if (rank <= this.negatives) {
      // The most negative first: the mirror histogram from its largest magnitude down.
      let seen = 0;
      for (let i = BUCKETS - 1; i >= 0; i--) {
        seen += this.negative[i]!;
        if (seen >= rank) return clamp(-middleOf(i) / 1e9);
      }
    }
    let seen = this.negatives;
    for (let i = 0; i < BUCKETS; i++) {
      seen += this.positive[i]!;
      if (seen >= rank) return clamp(middleOf(i) / 1e9);
    }
    return this.max;
  }

  summary(): DelaySummary {
    if (this.count === 0) return { min: 0, mean: 0, p50: 0, p99: 0, max: 0 };
    return { min: this.min, mean: this.sum / this.count, p50: this.quantile(0.5), p99: this.quantile(0.99), max: this.max };
  }
}
