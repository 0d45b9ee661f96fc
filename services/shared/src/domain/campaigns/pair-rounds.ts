/**
 * A group's pair rounds: each pair of the group a run of its own; for each sweep point and
 * repetition, the rounds of planRounds in sequence, the runs of a round in parallel (no
 * interface is in two of them). The report is the group's matrix; the job records its pairs.
 */
import type { ErrorInfo, JobSpec, Run } from '../contract.js';
import { pointLabel, repetitions, sweepPoints, type PlannedRun } from '../plan.js';
import { planRounds } from '../rounds.js';
import { pairOutcome, pairsError } from '../pair-outcome.js';
import { buildMatrix, matrixTable } from '../matrix-report.js';
import { NOTHING_MORE, type Campaign, type CampaignStrategy } from './campaign.js';

export class PairRounds implements CampaignStrategy {
  private readonly batches: PlannedRun[][] = [];
  private readonly total: number;

  constructor(private readonly spec: JobSpec) {
    const rounds = planRounds(spec.flows);
    let index = 0;
    for (const point of sweepPoints(spec)) {
      for (let repetition = 1; repetition <= repetitions(spec).max; repetition++) {
        for (const round of rounds) this.batches.push(round.map((pair) => ({ index: index++, point, repetition, pair })));
      }
    }
    this.total = index;
  }

  nextRound(finished: ReadonlyMap<number, Run>): PlannedRun[] {
    for (const batch of this.batches) {
      const open = batch.filter((plan) => !finished.has(plan.index));
      if (open.length > 0) return open;
    }
    return [];
  }

  next(finished: ReadonlyMap<number, Run>): PlannedRun | null {
    return this.nextRound(finished)[0] ?? null;
  }

  expectedRuns(): number {
    return this.total;
  }

  /** A failed pair does not fail the job: it fails only when no pair was measured (Job.pairs lists the failed ones). */
  outcome(finished: ReadonlyMap<number, Run>): ErrorInfo | null {
    return pairsError(pairOutcome(this.spec, finished.values()));
  }
}

export const pairRounds: Campaign = {
  ...NOTHING_MORE,
  name: 'pair-rounds',
  // No specErrors: a group's rules (no search, no adaptive repeat) are checked where it is expanded (groups.ts).
  asks: (spec) => spec.group !== undefined,
  maxRuns: (spec) => ({ runs: sweepPoints(spec).length * repetitions(spec).max * spec.flows.length, by: 'pairs' }),
  strategy: (spec) => new PairRounds(spec),
  // Each pair is a run of its own: one host may send in one pair and receive in another.
  runShapes: (spec) => sweepPoints(spec).flatMap((point) => spec.flows.map((_, pair) => ({ point, pair }))),
  // Its pairs are runs of one point: its report is the matrix, not a point's statistics over pairs.
  reportedPoints: () => [],
  reportSection: (job, finished, confidence) => ({ matrix: buildMatrix(job, finished, confidence) }),
  tableLines(job, report) {
    const lines: string[] = [];
    const { spec } = job;
    for (const matrix of report.matrix ?? []) lines.push('', `${spec.group!.shape} matrix${Object.keys(matrix.point).length ? ` at ${pointLabel(matrix.point)}` : ''}: ${spec.flows.length} pairs in ${job.expansion?.rounds.length ?? '?'} rounds, rows from, columns to`, matrixTable(job, matrix));
    if (job.pairs) lines.push(`pairs measured: ${job.pairs.measured} of ${job.pairs.total}${job.pairs.failed ? `; ${job.pairs.failed} failed` : ''}`);
    for (const f of job.pairs?.failures ?? []) lines.push(`failed pair ${f.from.agent}:${f.from.interface} -> ${f.to.agent}:${f.to.interface}${Object.keys(f.point).length ? ` at ${pointLabel(f.point)}` : ''}: ${f.error.code}: ${f.error.message}`);
    for (const skipped of job.expansion?.skipped ?? []) lines.push(`skipped ${skipped.agent}${skipped.interface ? `:${skipped.interface}` : ''} (${skipped.reason}): ${skipped.message}`);
    return { replacesPoints: false, lines };
  },
  jobEnd: (spec, finished) => ({ pairs: pairOutcome(spec, finished) }),
};
