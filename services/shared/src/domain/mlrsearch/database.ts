/**
 * Every counted trial by load, and each target's view of it (CSIT's MeasurementDatabase): a
 * load's classification for a target, and the target's relevant bounds as the draft defines
 * them (§4.7.1, §4.7.2): the Relevant Upper Bound is the smallest Upper Bound, the Relevant Lower
 * Bound the largest Lower Bound below it, so when a lower load fails and a higher one passes, the
 * failure stands (the conservative rule of §6.3.3).
 */
import { addTrial, classifyLoad, EMPTY_SUMS, type Bound, type Classifier, type ClassifiedTrial, type DurationSums } from './classification.js';

/** A target's relevant bounds, as grid steps. */
export interface RelevantBounds {
  /** Relevant Lower Bound (CSIT's clo). */
  clo: number | null;
  /** Relevant Upper Bound (CSIT's chi). */
  chi: number | null;
}

interface LoadEntry {
  trials: ClassifiedTrial[];
  sums: Map<Classifier, DurationSums>;
}

export class LoadDatabase {
  private readonly loads = new Map<number, LoadEntry>();

  constructor(private readonly classifiers: readonly Classifier[]) {}

  add(step: number, trial: ClassifiedTrial): void {
    const entry = this.loads.get(step) ?? { trials: [], sums: new Map(this.classifiers.map((c) => [c, EMPTY_SUMS])) };
    entry.trials.push(trial);
    for (const [classifier, sums] of entry.sums) entry.sums.set(classifier, addTrial(classifier, sums, trial));
    this.loads.set(step, entry);
  }

  trialsAt(step: number): readonly ClassifiedTrial[] {
    return this.loads.get(step)?.trials ?? [];
  }

  /** The load's classification for a target; a load never measured is undecided. */
  bound(step: number, classifier: Classifier): Bound {
    const sums = this.loads.get(step)?.sums.get(classifier);
    return sums ? classifyLoad(classifier, sums).bound : 'undecided';
  }

  relevantBounds(classifier: Classifier): RelevantBounds {
    const steps = [...this.loads.keys()].sort((a, b) => a - b);
    const bounds = new Map(steps.map((step) => [step, this.bound(step, classifier)]));
    const chi = steps.find((step) => bounds.get(step) === 'upper') ?? null;
    const below = steps.filter((step) => bounds.get(step) === 'lower' && (chi === null || step < chi));
    return { clo: below.at(-1) ?? null, chi };
  }
}
