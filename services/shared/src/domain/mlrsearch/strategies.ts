/**
 * How a selector picks the next load for its current target (CSIT's strategy/ package and
 * expander): halve the bracket the preceding target left, confirm its ends at this target's
 * trial duration, search outwards (each miss doubling the step) while a bound is missing, and
 * bisect once both are there. Strategies are asked in this order; the first that nominates wins.
 */
import type { RelevantBounds } from './database.js';
import type { Limits } from './limits.js';
import { middle, widthInGoals } from './load-grid.js';
import type { Target } from './targets.js';

/** The step external search uses next, shared by every selector so two goals do not interleave their outward searches (CSIT's GlobalWidth). */
export class GlobalWidth {
  constructor(public width: number) {}
}

/** One selector's outward step for its current target (CSIT's TargetedExpander). */
export class Expander {
  private next: number;

  constructor(private readonly target: Target, private readonly global: GlobalWidth, lower: number | null, upper: number | null) {
    this.next = lower !== null && upper !== null ? Math.max(target.width, upper - lower) : target.width;
    this.expand(false);
  }

  /** Widens the next step; the global step follows when an outward search missed again. */
  expand(bumpGlobal = true): void {
    this.next *= this.target.expansionCoefficient;
    if (bumpGlobal) this.global.width = this.next;
  }

  width(): number {
    return Math.max(this.global.width, this.next);
  }

  /** Narrows the next step after a bracket got narrower (the global one only moves if this wins). */
  limit(lastWidth: number): void {
    this.next = Math.max(lastWidth, this.target.width);
    this.expand(false);
  }
}

/** A strategy's choice: a load step, and the width the global step takes if it wins. */
export interface Nomination {
  load: number;
  width: number;
}

export interface StrategyContext {
  target: Target;
  expander: Expander;
  /** The bracket the preceding target left (for the first target: the initial trials' two loads). */
  initialLower: number | null;
  initialUpper: number | null;
  limits: Limits;
}

export abstract class Strategy {
  constructor(protected readonly ctx: StrategyContext) {}

  abstract nominate(bounds: RelevantBounds): Nomination | null;

  /** Told after this strategy's load was measured. */
  won(_bounds: RelevantBounds, _load: number): void {}

  /** A load is worth a trial only if it can make or move a relevant bound of a bracket not yet narrow enough. */
  protected notWorth(bounds: RelevantBounds, load: number): boolean {
    const { clo, chi } = bounds;
    if (clo !== null && clo >= load) return true;
    if (chi !== null && chi <= load) return true;
    return clo !== null && chi !== null && widthInGoals(clo, chi, this.ctx.target.width) <= 1;
  }
}

/** First for a new target: the middle of the preceding target's bracket, when it is one to two widths wide. */
class Halve extends Strategy {
  nominate(bounds: RelevantBounds): Nomination | null {
    const { initialLower: lo, initialUpper: hi, target } = this.ctx;
    if (lo === null || hi === null) return null;
    const goals = widthInGoals(lo, hi, target.width);
    if (goals > 2 || goals <= 1) return null;
    const load = middle(lo, hi, target.width);
    if (this.notWorth(bounds, load)) return null;
    this.ctx.expander.limit(target.width);
    return { load, width: target.width };
  }
}

/** The preceding target's lower bound, measured at this target's duration. */
class RefineLo extends Strategy {
  nominate(bounds: RelevantBounds): Nomination | null {
    const load = this.ctx.initialLower;
    if (load === null || this.notWorth(bounds, load)) return null;
    this.ctx.expander.limit(this.ctx.target.width);
    return { load, width: this.ctx.target.width };
  }
}

/** The preceding target's upper bound, measured at this target's duration. */
class RefineHi extends Strategy {
  nominate(bounds: RelevantBounds): Nomination | null {
    const load = this.ctx.initialUpper;
    if (load === null || this.notWorth(bounds, load)) return null;
    return { load, width: this.ctx.target.width };
  }
}

/** No lower bound: step down from the upper bound, widening the step each time it is another upper bound. */
class ExtendLo extends Strategy {
  nominate(bounds: RelevantBounds): Nomination | null {
    const { limits, expander, target } = this.ctx;
    if (bounds.clo !== null || bounds.chi === null || bounds.chi <= limits.minStep) return null;
    const width = expander.width();
    const load = limits.handle(bounds.chi - width, target.width, bounds.clo, bounds.chi);
    if (load === null || this.notWorth(bounds, load)) return null;
    return { load, width };
  }

  override won(bounds: RelevantBounds, load: number): void {
    if (load === bounds.chi) this.ctx.expander.expand();
  }
}

/** No upper bound: step up from the lower bound, widening the step each time it is another lower bound. */
class ExtendHi extends Strategy {
  nominate(bounds: RelevantBounds): Nomination | null {
    const { limits, expander, target } = this.ctx;
    if (bounds.chi !== null || bounds.clo === null || bounds.clo >= limits.maxStep) return null;
    const width = expander.width();
    const load = limits.handle(bounds.clo + width, target.width, bounds.clo, bounds.chi);
    if (load === null || this.notWorth(bounds, load)) return null;
    return { load, width };
  }

  override won(bounds: RelevantBounds, load: number): void {
    if (load === bounds.clo) this.ctx.expander.expand();
  }
}

/**
 * Both bounds: bisect, unless an outward step from a bound that another goal's trials made
 * (one outside the preceding target's bracket) lands closer to where the bracket was.
 */
class Bisect extends Strategy {
  private expandOnClo = false;
  private expandOnChi = false;

  nominate(bounds: RelevantBounds): Nomination | null {
    const { clo, chi } = bounds;
    const { limits, target } = this.ctx;
    if (clo === null || clo >= limits.maxStep || chi === null || chi <= limits.minStep) return null;
    if (widthInGoals(clo, chi, target.width) <= 1) return null;
    const bisect = middle(clo, chi, target.width);
    const down = this.extendLo(clo, chi, bisect);
    if (down) return this.chose(down, false, true);
    const up = this.extendHi(clo, chi, bisect);
    if (up) return this.chose(up, true, false);
    if (this.notWorth(bounds, bisect)) return null;
    const width = Math.min(bisect - clo, chi - bisect);
    this.ctx.expander.limit(width);
    return this.chose({ load: bisect, width }, false, false);
  }

  private chose(nomination: Nomination, onClo: boolean, onChi: boolean): Nomination {
    this.expandOnClo = onClo;
    this.expandOnChi = onChi;
    return nomination;
  }

  private extendLo(clo: number, chi: number, bisect: number): Nomination | null {
    const upper = this.ctx.initialUpper;
    if (upper === null || bisect >= upper) return null;
    const width = this.ctx.expander.width();
    const load = this.ctx.limits.handle(chi - width, this.ctx.target.width, clo, chi);
    if (load === null || load <= bisect || load >= upper) return null;
    return { load, width };
  }

  private extendHi(clo: number, chi: number, bisect: number): Nomination | null {
    const lower = this.ctx.initialLower;
    if (lower === null || bisect <= lower) return null;
    const width = this.ctx.expander.width();
    const load = this.ctx.limits.handle(clo + width, this.ctx.target.width, clo, chi);
    if (load === null || load >= bisect || load <= lower) return null;
    return { load, width };
  }

  override won(bounds: RelevantBounds, load: number): void {
    if ((this.expandOnClo && load === bounds.clo) || (this.expandOnChi && load === bounds.chi)) this.ctx.expander.expand();
  }
}

/** The strategies for one target, in CSIT's order of priority. */
export const strategiesFor = (ctx: StrategyContext): Strategy[] => [new Halve(ctx), new RefineLo(ctx), new RefineHi(ctx), new ExtendLo(ctx), new ExtendHi(ctx), new Bisect(ctx)];
