/**
 * A campaign: how a job chooses its runs and what it makes of them. Each is one module of this
 * folder, listed once in CAMPAIGNS (index.ts): sweep × repeat, a group's pair rounds, a rate
 * search (binary), an MLRsearch, a factorial over which ends are tuned. A campaign owns what
 * the schema cannot say about its fields, its defaults, its run count, its run chooser, its
 * part of the report and what the job records at its end, so adding one touches its module,
 * one line of CAMPAIGNS, and the contract's fields.
 */
import type { Agent, ErrorInfo, FieldError, Job, JobSpec, Run, SweepPoint } from '../contract.js';
import type { components } from '../../generated/openapi.js';
import { sweepPoints, type Dimension, type PlannedRun } from '../plan.js';

type Report = components['schemas']['Report'];

/**
 * How a campaign chooses its runs, one at a time: the coordinator asks for the next run to
 * make until there is none. Replayable: a pure function of the spec and the runs finished so far.
 */
export interface CampaignStrategy {
  /** The next run to make, given every run finished so far (by plan index), or null when the campaign is complete. */
  next(finished: ReadonlyMap<number, Run>): PlannedRun | null;
  /** Runs to make at once (they share no interface), when the campaign makes some in parallel; else `next` alone is asked. */
  nextRound?(finished: ReadonlyMap<number, Run>): PlannedRun[];
  /** Runs the campaign will make in all, as far as it can tell now (its progress total). */
  expectedRuns(finished: ReadonlyMap<number, Run>): number;
  /** Once complete: why the job failed, or null when it succeeded. */
  outcome(finished: ReadonlyMap<number, Run>): ErrorInfo | null;
}

/** A kind of run a campaign makes: its point, and the pair of a group's run. */
export type RunShape = Pick<PlannedRun, 'point' | 'pair'>;

/** The most runs a job can make, and what makes them: its pairs (a group), or its points × repetitions or trials. */
export interface RunCount {
  runs: number;
  by: 'pairs' | 'points';
}

export interface Campaign {
  /** As logs and the README name it. */
  readonly name: string;
  /** Whether a spec asks for this campaign: the first of CAMPAIGNS that does runs the job. */
  asks(spec: JobSpec): boolean;
  /** What the schema cannot say about the spec's campaign fields, each naming its field. */
  specErrors(spec: JobSpec): FieldError[];
  /** The defaults that depend on the inventory, filled in so the stored job shows them (spec in, spec out), and what could not be. */
  withDefaults(spec: JobSpec, agents: Agent[]): { spec: JobSpec; errors: FieldError[] };
  /** Seconds of load of its longest run (the job's `duration`, or an MLRsearch's longest trial): what a token's maxDurationSeconds is checked against. */
  longestRun(spec: JobSpec): number;
  /** The most runs the job can make: what the 10,000-run cap and a token's maxRunsPerJob are checked against. */
  maxRuns(spec: JobSpec): RunCount;
  /** Its run chooser for one job. */
  strategy(spec: JobSpec): CampaignStrategy;
  /**
   * Each kind of run it makes, once (a sweep point; a group's pair at it; a factorial's cell):
   * what a rule about a run's ends is checked on before the job is accepted (no host tuned two
   * ways at once).
   */
  runShapes(spec: JobSpec): RunShape[];
  /** The points the report gives statistics for: the sweep's, a search's trial rates, none for a group (its matrix). */
  reportedPoints(spec: JobSpec, finished: Run[]): SweepPoint[];
  /** Report dimensions it adds to the sweep's (a search's offered rate). */
  readonly addsDimensions: readonly Dimension[];
  /** Its own part of the report. */
  reportSection(job: Job, finished: Run[], confidence: number): Pick<Report, 'searches' | 'mlrSearches' | 'matrix' | 'factorials'>;
  /** Its lines in the text table, after the points' blocks; `replacesPoints` where they stand for those blocks (a search's trials). */
  tableLines(job: Job, report: Report): { replacesPoints: boolean; lines: string[] };
  /** What the job records at its end beside its status: a group's pairs. */
  jobEnd(spec: JobSpec, finished: Iterable<Run>): Pick<Job, 'pairs'>;
  /** A search's results as each link's latest (/metrics), once its job succeeded; absent for a campaign that is no search. */
  searchLinks?(job: Job, finished: Run[]): SearchLink[];
  /** A search's rates per point and loss goal, as a comparison of two searches reads them (Comparison.searches); absent for a campaign that is no search. */
  searchRates?(job: Job, finished: Run[]): SearchRate[];
}

/** What one search found at one point for one loss goal, per flow in datagrams/s (Comparison.searches' sides). */
export interface SearchRate {
  point: SweepPoint;
  algorithm: 'binary' | 'mlrsearch';
  lossRatio: number;
  /** An MLRsearch goal's exceed ratio; null for a binary search. */
  exceedRatio: number | null;
  /** The relevant lower bound, or the binary search's rate found. */
  lower: number | null;
  /** The relevant upper bound, or the binary search's lowest failed rate; null when none failed. */
  upper: number | null;
  /** What is compared, a forwarded rate: the conditional throughput, or the rate found less the worst loss of its trials there. */
  rate: number | null;
}

/** Every run must succeed: the job fails with the first failed run's reason (its code when all failed). */
export function everyRunOutcome(runs: Iterable<Run>): ErrorInfo | null {
  const all = [...runs];
  const failed = all.filter((r) => r.status === 'failed').sort((a, b) => a.index - b.index);
  if (failed.length === 0) return null;
  const first = failed[0]?.error;
  return {
    code: failed.length === all.length && first ? first.code : 'runs_failed',
    message: `${failed.length} of ${all.length} runs failed${first ? `; first: ${first.message}` : ''}`,
  };
}

/** The labels of a link's last search at one datagram size and loss goal (bounded: no job id). */
export interface SearchLabels {
  src_agent: string;
  src_interface: string;
  dst_agent: string;
  dst_interface: string;
  engine: string;
  /** `binary` (RFC 2544) or `mlrsearch`. */
  algorithm: string;
  /** `ndr` (no loss) or `pdr`. */
  target: string;
  /** The loss ratio the rate met: 0 for an NDR. */
  loss_ratio: string;
  /** An MLRsearch goal's exceed ratio (two goals of one loss ratio are two series); empty for a binary search, which has none. */
  exceed_ratio: string;
  packet_size: string;
  schedule: string;
}

/** What a search found on that link: per flow, payload and on the wire; when its job ended. */
export interface SearchValues {
  packetsPerSecond: number;
  bitsPerSecond: number;
  wireBitsPerSecond: number;
  /** An MLRsearch goal's conditional throughput per flow (datagrams/s); absent for a binary search, which has none. */
  conditionalPacketsPerSecond?: number;
  endedAt: number;
}

export interface SearchLink {
  labels: SearchLabels;
  values: SearchValues;
}

/** A campaign's hooks that most leave as they are: no rules of its own, no inventory defaults, no section, no lines, nothing at the end. */
export const NOTHING_MORE = {
  specErrors: () => [] as FieldError[],
  longestRun: (spec: JobSpec) => spec.duration,
  addsDimensions: [] as readonly Dimension[],
  withDefaults: (spec: JobSpec) => ({ spec, errors: [] as FieldError[] }),
  // Every run of the sweep's point carries the job's flows alike (a search's rates, a latency run's probes change no end).
  runShapes: (spec: JobSpec): RunShape[] => sweepPoints(spec).map((point) => ({ point })),
  reportSection: () => ({}),
  tableLines: () => ({ replacesPoints: false, lines: [] as string[] }),
  jobEnd: () => ({}),
} satisfies Partial<Campaign>;
