/**
 * The MLRsearch Controller (draft §4.8.2), after FD.io CSIT's MultipleLossRatioSearch: a warm-up
 * trial at max load whose result is ignored, up to three initial trials (max load, then the
 * forwarding rates it saw), then one selector per goal nominating loads, the lowest load winning
 * each round. It is written as a generator of trial inputs, so a replay of the trials made so far
 * is the same search, step for step: see MlrSearch, which drives it.
 */
import type { Classifier } from './classification.js';
import { LoadDatabase } from './database.js';
import type { LoadGrid } from './load-grid.js';
import type { Limits } from './limits.js';
import { before, Selector, type Candidate } from './selector.js';
import { GlobalWidth } from './strategies.js';
import type { Target } from './targets.js';
import type { TrialInput } from './trial.js';

/** What the controller asks for: a trial input without its attempt number, the load as a grid step. */
export type Ask = Omit<TrialInput, 'load' | 'attempt'> & { step: number };

/** What the controller is told back: a trial that measured the path at what it asked, or one it did not ask for (already counted). */
export type Answer = { kind: 'measured'; lossRatio: number } | { kind: 'unrequested' };

export interface ControllerContext {
  grid: LoadGrid;
  limits: Limits;
  /** Each goal's targets, coarsest first. */
  chains: readonly (readonly Target[])[];
  database: LoadDatabase;
  warmupDuration: number;
}

/** A database that classifies for every target of every goal. */
export const databaseFor = (chains: readonly (readonly Target[])[]) => new LoadDatabase(chains.flat() as Classifier[]);

/** Asks until a trial it asked for comes back (trials it did not ask for are counted, and it asks again). */
function* measure(ask: Ask): Generator<Ask, number, Answer> {
  for (;;) {
    const answer = yield ask;
    if (answer.kind === 'measured') return answer.lossRatio;
  }
}

/** The forwarding rate a loss ratio implies, as a load for the goal with the smallest loss ratio (CSIT's corrected rfr). */
const corrected = (c: ControllerContext, step: number, lossRatio: number, ratio: number) => c.grid.floor((c.grid.load(step) * (1 - lossRatio)) / (1 - ratio));

/** CSIT's run_initial_trials: the two loads the selectors start from. */
function* initialTrials(c: ControllerContext): Generator<Ask, [number, number], Answer> {
  const first = c.chains.map((chain) => chain[0]!);
  const ratio = Math.min(...first.map((t) => t.lossRatio));
  const duration = Math.max(...first.map((t) => t.trialDuration));
  const width = Math.max(...first.map((t) => t.width));
  const max = c.grid.maxStep;
  const ask = (step: number): Ask => ({ step, duration, purpose: 'initial', goal: null, target: null });
  const loss0 = yield* measure(ask(max));
  const rate0 = corrected(c, max, loss0, ratio);
  if (rate0 >= max) return [max, max];
  const mrr = c.limits.handle(rate0, width, null, max);
  if (mrr === null) return [max, max];
  const loss1 = yield* measure(ask(mrr));
  const mrr2 = loss1 > ratio ? c.limits.handle(corrected(c, mrr, loss1, ratio), width, null, mrr) : c.limits.handle(mrr + width, width, mrr, max);
  if (mrr2 === null) return [mrr, max];
  yield* measure(ask(mrr2));
  return [Math.min(mrr, mrr2), Math.max(mrr, mrr2)];
}

/** CSIT's main loop: every selector nominates, the candidate measured first by `before` is measured. */
function* mainLoop(c: ControllerContext, lower: number, upper: number): Generator<Ask, void, Answer> {
  const global = new GlobalWidth(upper - lower);
  const selectors = c.chains.map((chain) => new Selector(chain, lower, upper, { database: c.database, limits: c.limits, global }));
  for (;;) {
    let winner: Candidate | null = null;
    for (const selector of selectors) {
      const candidate = selector.nominate();
      if (candidate && (winner === null || before(candidate, winner))) winner = candidate;
    }
    if (winner === null) return;
    const answer = yield { step: winner.load, duration: winner.duration, purpose: 'search', goal: winner.target.goal, target: winner.target.index };
    if (answer.kind !== 'measured') continue;
    global.width = winner.width;
    winner.selector.won(winner.load);
  }
}

/** The whole search, as a sequence of asks; it returns when every goal is reached. */
export function* controller(c: ControllerContext): Generator<Ask, void, Answer> {
  if (c.warmupDuration > 0) yield* measure({ step: c.grid.maxStep, duration: c.warmupDuration, purpose: 'warmup', goal: null, target: null });
  const [lower, upper] = yield* initialTrials(c);
  yield* mainLoop(c, lower, upper);
}
