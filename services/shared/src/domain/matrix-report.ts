/**
 * A group's report: per sweep point, source rows × destination columns, each cell the pair's
 * headline figure over its repetitions and its verdict; as JSON and as a text table.
 */
import { alignTable } from './text-table.js';
import { runValue } from './campaign.js';
import type { Endpoint, Job, Run } from './contract.js';
import type { components } from '../generated/openapi.js';
import { pointKey, sweepPoints } from './plan.js';
import { summarize } from './statistics.js';
import { kindOf } from './test-kinds/index.js';

type S = components['schemas'];
export type Matrix = NonNullable<S['Report']['matrix']>[number];
export type MatrixCell = S['MatrixCell'];

const endpointLabel = (e: Endpoint) => `${e.agent}:${e.interface}`;

/** Endpoints in first-seen order, each once. */
function distinct(endpoints: Endpoint[]): Endpoint[] {
  const seen = new Map<string, Endpoint>();
  for (const e of endpoints) if (!seen.has(endpointLabel(e))) seen.set(endpointLabel(e), e);
  return [...seen.values()].sort((a, b) => endpointLabel(a).localeCompare(endpointLabel(b)));
}

const mean = (values: number[]) => (values.length > 0 ? values.reduce((a, b) => a + b, 0) / values.length : null);

/**
 * A run's loss and verdict over its legs: a bidir pair's run has one per direction, and a cell
 * shows the worse (the higher loss; a leg that something limited over one that nothing did).
 */
const runLoss = (r: Run) => {
  const losses = r.flows.map((f) => f.udp?.lossRatio).filter((v): v is number => typeof v === 'number');
  return losses.length ? Math.max(...losses) : null;
};
const runBottleneck = (r: Run) => {
  const verdicts = r.flows.map((f) => f.bottleneck).filter((b): b is NonNullable<typeof b> => !!b);
  return verdicts.find((b) => b.verdict !== 'none') ?? verdicts[0];
};

/** The verdict most of the runs gave (the latest on a tie), with that run's reason. */
function commonBottleneck(ok: Run[]): MatrixCell['bottleneck'] {
  const verdicts = ok.map(runBottleneck).filter((b): b is NonNullable<typeof b> => !!b);
  const count = (verdict: string) => verdicts.filter((b) => b.verdict === verdict).length;
  const chosen = verdicts.reduce<(typeof verdicts)[number] | null>((best, b) => (!best || count(b.verdict) >= count(best.verdict) ? b : best), null);
  return chosen && { verdict: chosen.verdict, reason: chosen.reason, confident: chosen.confident, runs: count(chosen.verdict) };
}

/** One cell from the pair's finished runs (none yet: pending), in run order. */
function cellOf(job: Job, runs: Run[], confidence: number): MatrixCell {
  const ok = runs.filter((r) => r.status === 'succeeded');
  const failed = runs.filter((r) => r.status === 'failed');
  const values = ok.map((r) => runValue(job.spec, r)).filter((v): v is number => v !== null);
  const unverified = ok.some((r) => r.flows.some((f) => f.pathVerified === false));
  const verdict: MatrixCell['verdict'] = runs.length === 0 ? 'pending' : ok.length === 0 ? 'failed' : unverified ? 'unverified' : 'measured';
  return {
    value: values.length > 0 ? summarize(values, confidence) : null,
    verdict,
    runs: { succeeded: ok.length, failed: failed.length },
    error: failed.at(-1)?.error ?? null,
    lossRatio: mean(ok.map(runLoss).filter((v): v is number => v !== null)),
    bottleneck: commonBottleneck(ok),
  };
}

/** The matrix of each sweep point, from the job's pairs (`spec.flows`) and its finished runs. */
export function buildMatrix(job: Job, runs: Run[], confidence: number): Matrix[] {
  const pairs = job.spec.flows;
  const sources = distinct(pairs.map((p) => p.from));
  const destinations = distinct(pairs.map((p) => p.to));
  const pairKey = (from: Endpoint, to: Endpoint) => `${endpointLabel(from)} ${endpointLabel(to)}`;
  const inGroup = new Set(pairs.map((p) => pairKey(p.from, p.to)));
  return sweepPoints(job.spec).map((point) => {
    const byPair = new Map<string, Run[]>();
    for (const run of runs) {
      const flow = run.flows[0];
      if (!flow || pointKey(run.point) !== pointKey(point) || (run.status !== 'succeeded' && run.status !== 'failed')) continue;
      const key = pairKey(flow.from, flow.to);
      byPair.set(key, [...(byPair.get(key) ?? []), run]);
    }
    for (const list of byPair.values()) list.sort((a, b) => a.index - b.index);
    const cells = sources.map((from) => destinations.map((to) => (inGroup.has(pairKey(from, to)) ? cellOf(job, byPair.get(pairKey(from, to)) ?? [], confidence) : null)));
    return { point, sources, destinations, cells };
  });
}

/** A cell's loss as a percentage, as the matrix shows it. */
export const lossText = (ratio: number) => `${(ratio * 100).toFixed(ratio < 0.001 && ratio > 0 ? 3 : 2)}%`;

/**
 * A matrix as text: rows `from`, columns `to`, the headline in its table unit, then the UDP loss
 * and the bottleneck verdict in brackets (`941.2 0.12% [link]`); an unverified cell marked `?`,
 * a failed one `FAILED` and its error's code.
 */
export function matrixTable(job: Job, matrix: Matrix): string {
  const { scale, unit, digits } = kindOf(job.spec).headline.table;
  const cellText = (cell: MatrixCell | null) => {
    if (!cell) return '-';
    if (cell.verdict === 'failed') return `FAILED ${cell.error?.code ?? ''}`.trim();
    if (cell.verdict === 'pending' || !cell.value) return '...';
    const value = (cell.value.mean / scale).toFixed(digits);
    return [cell.verdict === 'unverified' ? `${value}?` : value, cell.lossRatio !== null ? lossText(cell.lossRatio) : null, cell.bottleneck ? `[${cell.bottleneck.verdict}]` : null].filter(Boolean).join(' ');
  };
  const rows = [[`${unit} from \\ to`, ...matrix.destinations.map(endpointLabel)]];
  matrix.sources.forEach((from, i) => rows.push([endpointLabel(from), ...matrix.cells[i]!.map(cellText)]));
  return alignTable(rows);
}
