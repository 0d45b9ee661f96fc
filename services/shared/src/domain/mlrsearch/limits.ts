/**
 * Keeps a candidate load inside min..max and at least a width away from known bounds and limits
 * (CSIT's LimitHandler): a load too close to a hard limit is moved onto it, one too close to a
 * bound is moved a width away from it, or dropped (null) when the bracket is narrow enough.
 */
import { middle } from './load-grid.js';

export class Limits {
  constructor(readonly maxStep: number) {}

  readonly minStep = 0;

  handle(load: number, width: number, clo: number | null, chi: number | null): number | null {
    const step = Math.min(Math.max(load, this.minStep), this.maxStep);
    if (clo === null && chi === null) return this.within(step, width, { lo: this.minStep, hi: this.maxStep, loExcluded: false, hiExcluded: false });
    if (clo === null) {
      // Expected when the min load is an upper bound, or when a forwarding rate rounds onto chi.
      if (chi! <= this.minStep || step >= chi!) return null;
      return this.within(step, width, { lo: this.minStep, hi: chi!, loExcluded: false, hiExcluded: true });
    }
    if (chi === null) {
      if (clo >= this.maxStep || step <= clo) throw new Error(`load step ${step} is not above the lower bound ${clo} below max`);
      return this.within(step, width, { lo: clo, hi: this.maxStep, loExcluded: true, hiExcluded: false });
    }
    if (!(clo < step && step < chi)) return null;
    return this.within(step, width, { lo: clo, hi: chi, loExcluded: true, hiExcluded: true });
  }

  /** The load moved away from the ends of lo..hi: onto an end that is a hard limit, a width inside one that is a bound. */
  private within(load: number, width: number, range: { lo: number; hi: number; loExcluded: boolean; hiExcluded: boolean }): number | null {
    const { lo, hi, loExcluded, hiExcluded } = range;
    if (load < lo || load > hi) throw new Error(`load step ${load} outside ${lo}..${hi}`);
    if (width >= hi - lo) return !loExcluded ? lo : !hiExcluded ? hi : null;
    let softMin = lo + width;
    let softMax = hi - width;
    // The whole range is under two widths: its middle is the only load far enough from both ends.
    if (softMin > softMax) softMin = softMax = middle(lo, hi, width);
    if (load < softMin) return loExcluded ? softMin : lo;
    if (load > softMax) return hiExcluded ? softMax : hi;
    return load;
  }
}
