/**
 * MLRsearch (draft-ietf-bmwg-mlrsearch-15, RFC 9971) as a pure function of its config and the
 * trials made so far, in the shape of the binary search (campaigns/rate-search.ts): `next(trials)` is the
 * next trial to make, `outcome(trials)` what the search has found. Each call replays the search
 * from the first trial, so a job that resumes from its runs asks for the same next trial.
 *
 * A void trial (niclab limited it: see trial.ts) is kept with why and never classifies a load;
 * the same trial input is asked again, `maxVoidRepeats` times at most, and then the search stops
 * and says it could not conclude, naming the load niclab could not test.
 */
import type { FieldError } from '../contract.js';
import { conditionalLossRatio, isFullLength, isHighLoss, type ClassifiedTrial } from './classification.js';
import { controller, databaseFor, type Answer, type Ask } from './controller.js';
import type { LoadDatabase } from './database.js';
import { goalErrors, type SearchGoal } from './goals.js';
import { LoadGrid } from './load-grid.js';
import { Limits } from './limits.js';
import { targetChain, type Target } from './targets.js';
import { effectiveDuration, trialLossRatio, voidReasons, type TrialInput, type TrialResult, type VoidReason } from './trial.js';

/** The Controller Input (draft §4.5.8) and CSIT's settings around it. */
export interface MlrSearchConfig {
  goals: readonly SearchGoal[];
  /** Min Load and Max Load (§4.5.8.2, §4.5.8.1), datagrams/s per flow. */
  minLoad: number;
  maxLoad: number;
  /** Seconds of a first trial at max load whose result is ignored; 0: none. CSIT: 1. */
  warmupDuration?: number;
  /** Void trials tolerated at one trial input before the search stops. */
  maxVoidRepeats?: number;
  /** Trial-seconds (effective durations, void and warm-up trials included) after which the search stops unfinished. */
  searchDurationMax?: number;
  /** Trial durations are asked in whole multiples of this (1 for a Measurer that takes whole seconds), rounded up. */
  durationQuantum?: number;
  /** The Measurer offers loads in whole multiples of this (1: whole datagrams/s): a trial within half of it of the asked load is the one asked. */
  loadQuantum?: number;
}

export const SEARCH_DEFAULTS = { warmupDuration: 1, maxVoidRepeats: 2, searchDurationMax: 1200 } as const;

/** What the config must satisfy beyond its types, each error naming its field under `at`. */
export function configErrors(config: MlrSearchConfig, at = 'search'): FieldError[] {
  const errors: FieldError[] = config.goals.flatMap((goal, i) => goalErrors(goal, `${at}.goals[${i}]`));
  const need = (ok: boolean, field: string, message: string) => {
    if (!ok) errors.push({ field: `${at}.${field}`, message });
  };
  need(config.goals.length > 0, 'goals', 'must name at least one goal');
  need(config.minLoad > 0, 'minLoad', 'must be positive');
  need(config.maxLoad > config.minLoad, 'maxLoad', 'must be above minLoad');
  need((config.warmupDuration ?? 0) >= 0, 'warmupDuration', 'must not be negative');
  need(Number.isInteger(config.maxVoidRepeats ?? 0) && (config.maxVoidRepeats ?? 0) >= 0, 'maxVoidRepeats', 'must be a whole number, at least 0');
  need((config.searchDurationMax ?? 1) > 0, 'searchDurationMax', 'must be positive');
  need((config.durationQuantum ?? 1) > 0, 'durationQuantum', 'must be positive');
  need((config.loadQuantum ?? 1) > 0, 'loadQuantum', 'must be positive');
  return errors;
}

/** A goal's result (the draft's Goal Result, §4.7.4), loads in the config's units. */
export interface GoalResult {
  goal: SearchGoal;
  /** Relevant Lower Bound: the largest Lower Bound below the Relevant Upper Bound. */
  relevantLowerBound: number | null;
  /** Relevant Upper Bound: the smallest Upper Bound. */
  relevantUpperBound: number | null;
  /** Conditional Throughput at the Relevant Lower Bound: the load × (1 − the quantile loss ratio). */
  conditionalThroughput: number | null;
  /** The quantile of the full-length trial loss ratios there (Appendix B). */
  conditionalLossRatio: number | null;
  /** (upper − lower) / upper of the relevant bounds. */
  relativeWidth: number | null;
  /** Both relevant bounds, no further apart than the goal's width (a Regular Goal Result). */
  regular: boolean;
  /** Why the result is irregular: no upper bound (max load is a lower bound), no lower bound (min load is an upper bound), or still wider than the goal. */
  irregular: 'no_upper_bound' | 'no_lower_bound' | 'too_wide' | null;
}

/** One trial as the search used it. */
export interface TrialReport {
  index: number;
  load: number;
  duration: number;
  effectiveDuration: number;
  /** Why it was made; `unrequested`: not what the search asked at that point (still counted, if not void). */
  purpose: TrialInput['purpose'] | 'unrequested';
  goal: number | null;
  target: number | null;
  attempt: number;
  lossRatio: number;
  /** Trial Forwarding Rate: the load × (1 − loss ratio). */
  forwardingRate: number;
  /** Why niclab limited it; empty when it measured the path. */
  void: VoidReason[];
  /** Per goal, how this trial counted: null when it did not (void, or warm-up). */
  goals: { fullLength: boolean; highLoss: boolean }[] | null;
}

export interface SearchOutcome {
  state: 'searching' | 'done' | 'could_not_conclude';
  /** Why the search ended: every goal reached, a trial input niclab could not make, or the trial-seconds budget. */
  stoppedBy: 'goals' | 'void_trials' | 'search_duration_max' | null;
  /** The trial input that stayed void, with its last attempt's reasons: niclab's limit, not the path's. */
  limit: { load: number; duration: number; attempts: number; reasons: VoidReason[] } | null;
  goals: GoalResult[];
  trials: TrialReport[];
  /** Sum of the trials' effective durations, s. */
  trialSeconds: number;
}

interface Replay {
  next: TrialInput | null;
  outcome: Omit<SearchOutcome, 'goals'>;
  database: LoadDatabase;
}

const close = (a: number, b: number) => Math.abs(a - b) <= 1e-9 * Math.max(Math.abs(a), Math.abs(b));

export class MlrSearch {
  private readonly grid: LoadGrid;
  private readonly limits: Limits;
  private readonly chains: Target[][];
  private readonly settings: Required<Omit<MlrSearchConfig, 'durationQuantum' | 'loadQuantum'>> & { durationQuantum: number | null; loadQuantum: number | null };
  private cached: { trials: readonly TrialResult[]; length: number; replay: Replay } | null = null;

  constructor(readonly config: MlrSearchConfig) {
    const errors = configErrors(config);
    if (errors.length > 0) throw new Error(`invalid MLRsearch config: ${errors.map((e) => `${e.field} ${e.message}`).join('; ')}`);
    this.settings = { ...SEARCH_DEFAULTS, ...config, durationQuantum: config.durationQuantum ?? null, loadQuantum: config.loadQuantum ?? null };
    this.grid = new LoadGrid(config.minLoad, config.maxLoad, config.goals.map((g) => g.width));
    this.limits = new Limits(this.grid.maxStep);
    this.chains = config.goals.map((goal, i) => targetChain(goal, i, this.grid));
  }

  /** The next trial to make, or null when the search is over. */
  next(trials: readonly TrialResult[]): TrialInput | null {
    return this.replay(trials).next;
  }

  /** What the search has found from these trials (final once `next` is null). */
  outcome(trials: readonly TrialResult[]): SearchOutcome {
    const { outcome, database } = this.replay(trials);
    return { ...outcome, goals: this.chains.map((chain, i) => this.goalResult(this.settings.goals[i]!, chain.at(-1)!, database)) };
  }

  private replay(trials: readonly TrialResult[]): Replay {
    if (this.cached?.trials !== trials || this.cached.length !== trials.length) this.cached = { trials, length: trials.length, replay: this.run(trials) };
    return this.cached.replay;
  }

  private duration(ask: Ask): number {
    const q = this.settings.durationQuantum;
    return q === null ? ask.duration : Math.ceil(ask.duration / q - 1e-9) * q;
  }

  private input(ask: Ask, attempt: number): TrialInput {
    return { load: this.grid.load(ask.step), duration: this.duration(ask), purpose: ask.purpose, goal: ask.goal, target: ask.target, attempt };
  }

  /** Drives the controller with the trials in order; stops where they run out, or where the search does. */
  private run(trials: readonly TrialResult[]): Replay {
    const database = databaseFor(this.chains);
    const search = controller({ grid: this.grid, limits: this.limits, chains: this.chains, database, warmupDuration: this.settings.warmupDuration });
    const reports: TrialReport[] = [];
    let seconds = 0;
    let voids: VoidReason[][] = [];
    const end = (state: SearchOutcome['state'], stoppedBy: SearchOutcome['stoppedBy'], limit: SearchOutcome['limit'] = null, next: TrialInput | null = null): Replay =>
      ({ next, database, outcome: { state, stoppedBy, limit, trials: reports, trialSeconds: seconds } });
    for (let step = search.next(), index = 0; ; index++) {
      if (step.done) return end('done', 'goals');
      const input = this.input(step.value, voids.length + 1);
      if (voids.length > this.settings.maxVoidRepeats) return end('could_not_conclude', 'void_trials', { load: input.load, duration: input.duration, attempts: voids.length, reasons: voids.at(-1)! });
      if (seconds >= this.settings.searchDurationMax) return end('could_not_conclude', 'search_duration_max');
      const trial = trials[index];
      if (!trial) return end('searching', null, null, input);
      seconds += effectiveDuration(trial);
      const reasons = voidReasons(trial);
      const asked = this.sameLoad(trial.load, input.load) && close(trial.duration, input.duration);
      const counted = reasons.length === 0 && (!asked || input.purpose !== 'warmup');
      const report = this.report(index, trial, asked ? input : null, reasons, counted);
      reports.push(report);
      if (counted) database.add(asked ? step.value.step : this.grid.floor(trial.load * (1 + 1e-12)), this.classified(trial));
      if (!asked) {
        step = search.next({ kind: 'unrequested' });
      } else if (reasons.length > 0 && input.purpose !== 'warmup') {
        voids.push(reasons); // the same input is asked again
      } else {
        voids = [];
        step = search.next({ kind: 'measured', lossRatio: report.lossRatio } satisfies Answer);
      }
    }
  }

  /** Whether a trial's load is the one asked: the same, or where loads are offered in quanta, that load's quantum. */
  private sameLoad(offered: number, asked: number): boolean {
    const q = this.settings.loadQuantum;
    return q === null ? close(offered, asked) : Math.abs(offered - Math.max(q, Math.round(asked / q) * q)) <= 1e-9 * Math.max(1, asked);
  }

  private classified(trial: TrialResult): ClassifiedTrial {
    return { duration: trial.duration, effectiveDuration: effectiveDuration(trial), lossRatio: trialLossRatio(trial) };
  }

  private report(index: number, trial: TrialResult, input: TrialInput | null, reasons: VoidReason[], counts: boolean): TrialReport {
    const lossRatio = trialLossRatio(trial);
    return {
      index, load: trial.load, duration: trial.duration, effectiveDuration: effectiveDuration(trial),
      purpose: input?.purpose ?? 'unrequested', goal: input?.goal ?? null, target: input?.target ?? null, attempt: input?.attempt ?? 1,
      lossRatio, forwardingRate: trial.load * (1 - lossRatio), void: reasons,
      goals: counts ? this.chains.map((chain) => ({ fullLength: isFullLength(chain.at(-1)!, trial.duration), highLoss: isHighLoss(chain.at(-1)!, lossRatio) })) : null,
    };
  }

  private goalResult(goal: SearchGoal, target: Target, database: LoadDatabase): GoalResult {
    const { clo, chi } = database.relevantBounds(target);
    const lossRatio = clo === null ? null : conditionalLossRatio(target, database.trialsAt(clo));
    const lower = clo === null ? null : this.grid.load(clo);
    const relativeWidth = clo !== null && chi !== null ? this.grid.relativeWidth(clo, chi) : null;
    const irregular = chi === null ? 'no_upper_bound' : clo === null ? 'no_lower_bound' : chi - clo > target.width ? 'too_wide' : null;
    return {
      goal, relevantLowerBound: lower, relevantUpperBound: chi === null ? null : this.grid.load(chi),
      conditionalThroughput: lower === null || lossRatio === null ? null : lower * (1 - lossRatio), conditionalLossRatio: lossRatio,
      relativeWidth, regular: irregular === null, irregular,
    };
  }
}
