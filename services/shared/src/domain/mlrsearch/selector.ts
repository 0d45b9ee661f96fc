/**
 * One goal's selector (CSIT's Selector): it works through the goal's targets, coarsest first,
 * asking its strategies for a load; when none nominates, the target is reached and the next
 * one starts from the bracket this one left. When the goal itself is reached it nominates nothing.
 */
import type { LoadDatabase, RelevantBounds } from './database.js';
import type { Limits } from './limits.js';
import { Expander, strategiesFor, type GlobalWidth, type Strategy } from './strategies.js';
import type { Target } from './targets.js';

/** A selector's proposal for the next trial. */
export interface Candidate {
  load: number;
  duration: number;
  width: number;
  target: Target;
  selector: Selector;
}

/**
 * Whether `a` is measured before `b` (CSIT's Candidate ordering): the lower load first (the
 * conservative order, so later bounds are less likely to be overturned), then the longer trial,
 * then the wider step. On a full tie the later selector's candidate wins, as in CSIT's main loop.
 */
export function before(a: Candidate, b: Candidate): boolean {
  if (a.load !== b.load) return a.load < b.load;
  if (a.duration !== b.duration) return a.duration > b.duration;
  return a.width >= b.width;
}

export interface SelectorDeps {
  database: LoadDatabase;
  limits: Limits;
  global: GlobalWidth;
}

export class Selector {
  private readonly stack: Target[];
  private current: Target;
  private strategies: Strategy[] = [];
  private chosen: Strategy | null = null;

  /** `chain` coarsest first; `lower`..`upper` is the bracket the initial trials gave. */
  constructor(chain: readonly Target[], private lower: number | null, private upper: number | null, private readonly deps: SelectorDeps) {
    this.stack = [...chain].reverse();
    this.current = this.stack.pop()!;
    this.recreate();
  }

  get target(): Target {
    return this.current;
  }

  private bounds(): RelevantBounds {
    return this.deps.database.relevantBounds(this.current);
  }

  private recreate(): void {
    const expander = new Expander(this.current, this.deps.global, this.lower, this.upper);
    this.strategies = strategiesFor({ target: this.current, expander, initialLower: this.lower, initialUpper: this.upper, limits: this.deps.limits });
    this.chosen = null;
  }

  nominate(): Candidate | null {
    let bounds = this.bounds();
    this.chosen = null;
    for (;;) {
      for (const strategy of this.strategies) {
        const nomination = strategy.nominate(bounds);
        if (nomination) {
          this.chosen = strategy;
          return { ...nomination, duration: this.current.trialDuration, target: this.current, selector: this };
        }
      }
      if (bounds.clo === null && bounds.chi === null) throw new Error(`goal ${this.current.goal} target ${this.current.index}: no bound and nothing to measure`);
      if (this.stack.length === 0) return null;
      // This target is reached: the next one starts from its bracket.
      this.current = this.stack.pop()!;
      this.lower = bounds.clo;
      this.upper = bounds.chi;
      bounds = this.bounds();
      this.recreate();
    }
  }

  /** Told after its candidate was measured. */
  won(load: number): void {
    this.chosen?.won(this.bounds(), load);
  }
}
