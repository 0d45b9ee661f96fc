/**
 * A group's report: per sweep point, source rows × destination columns, each cell the pair's
 * headline figure over its repetitions and its verdict; as JSON and as a text table.
 */
import { alignTable } from './text-table.js';
import { runValue } from './points.js';
import type { Endpoint, Job, Run } from './contract.js';
import type { components } from '../generated/openapi.js';
import { pointKey, sweepPoints } from './plan.js';
import { summarize } from './statistics.js';
import { FIGURE_DOMAINS } from './figure-domains.js';
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

type Flow = Run['flows'][number];
type Direction = Flow['direction'];

/** The verdict most of the legs gave (the latest on a tie), with that leg's reason. */
export function commonBottleneck(legs: Flow[]): MatrixCell['bottleneck'] {
  const verdicts = legs.map((f) => f.bottleneck).filter((b): b is NonNullable<typeof b> => !!b);
  const count = (verdict: string) => verdicts.filter((b) => b.verdict === verdict).length;
  const chosen = verdicts.reduce<(typeof verdicts)[number] | null>((best, b) => (!best || count(b.verdict) >= count(best.verdict) ? b : best), null);
  return chosen && { verdict: chosen.verdict, reason: chosen.reason, confident: chosen.confident, runs: count(chosen.verdict) };
}

/** One direction of a pair over its succeeded runs: its mean UDP loss, its common verdict, its mean rate. */
function directionOf(direction: Direction, legs: Flow[]) {
  return {
    direction,
    lossRatio: mean(legs.map((f) => f.udp?.lossRatio).filter((v): v is number => typeof v === 'number')),
    bottleneck: commonBottleneck(legs),
    bitsPerSecond: mean(legs.map((f) => f.bitsPerSecond).filter((v): v is number => typeof v === 'number')) ?? Infinity,
  };
}

/**
 * The worse direction of a pair (a bidir pair has two): the higher mean loss, then the one
 * something limited over one that nothing did, then the slower. A cell's loss and verdict are
 * both this direction's, so they never pair one leg's loss with the other leg's verdict.
 */
function worseDirection(ok: Run[]): Pick<MatrixCell, 'lossRatio' | 'bottleneck' | 'direction'> {
  const byDirection = new Map<Direction, Flow[]>();
  for (const f of ok.flatMap((r) => r.flows)) byDirection.set(f.direction, [...(byDirection.get(f.direction) ?? []), f]);
  const limited = (d: ReturnType<typeof directionOf>) => (d.bottleneck && d.bottleneck.verdict !== 'none' ? 1 : 0);
  const [worst] = [...byDirection].map(([direction, legs]) => directionOf(direction, legs))
    .sort((a, b) => (b.lossRatio ?? -1) - (a.lossRatio ?? -1) || limited(b) - limited(a) || a.bitsPerSecond - b.bitsPerSecond);
  if (!worst || (worst.lossRatio === null && !worst.bottleneck)) return { lossRatio: null, bottleneck: null, direction: null };
  return { lossRatio: worst.lossRatio, bottleneck: worst.bottleneck, direction: worst.direction };
}

/** One cell from the pair's finished runs (none yet: pending), in run order. */
function cellOf(job: Job, runs: Run[], confidence: number): MatrixCell {
  const ok = runs.filter((r) => r.status === 'succeeded');
  const failed = runs.filter((r) => r.status === 'failed');
  const values = ok.map((r) => runValue(job.spec, r)).filter((v): v is number => v !== null);
  const unverified = ok.some((r) => r.flows.some((f) => f.pathVerified === false));
  const verdict: MatrixCell['verdict'] = runs.length === 0 ? 'pending' : ok.length === 0 ? 'failed' : unverified ? 'unverified' : 'measured';
  return {
    // The headline's interval, cut to what it can be (a rate or a round trip is never below 0).
    value: values.length > 0 ? summarize(values, confidence, FIGURE_DOMAINS[kindOf(job.spec).headline.name]) : null,
    verdict,
    runs: { succeeded: ok.length, failed: failed.length },
    error: failed.at(-1)?.error ?? null,
    ...worseDirection(ok),
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
 * What a cell says beside its figure, as the text table and the heatmap's tooltip both show it:
 * the loss, the verdict and, for a bidir pair, the direction both come from.
 */
export function cellLimit(cell: MatrixCell, bidir: boolean): { loss: string | null; bottleneck: string | null; direction: string | null } {
  return {
    loss: cell.lossRatio !== null ? lossText(cell.lossRatio) : null,
    bottleneck: cell.bottleneck?.verdict ?? null,
    direction: bidir && cell.direction ? cell.direction : null,
  };
}

/**
 * A matrix as text: rows `from`, columns `to`, the headline in its table unit, then the UDP loss
 * and the bottleneck verdict in brackets (`941.2 0.12% [link]`), a bidir pair's with the
 * direction they come from (`1.95 40.00% [receiver socket buffer, reverse]`); an unverified cell
 * marked `?`, a failed one `FAILED` and its error's code.
 */
export function matrixTable(job: Job, matrix: Matrix): string {
  const { scale, unit, digits } = kindOf(job.spec).headline.table;
  const bidir = job.spec.direction === 'bidir';
  const cellText = (cell: MatrixCell | null) => {
    if (!cell) return '-';
    if (cell.verdict === 'failed') return `FAILED ${cell.error?.code ?? ''}`.trim();
    if (cell.verdict === 'pending' || !cell.value) return '...';
    const value = (cell.value.mean / scale).toFixed(digits);
    const { loss, bottleneck, direction } = cellLimit(cell, bidir);
    const limit = bottleneck || direction ? `[${[bottleneck, direction].filter(Boolean).join(', ')}]` : null;
    return [cell.verdict === 'unverified' ? `${value}?` : value, loss, limit].filter(Boolean).join(' ');
  };
  const rows = [[`${unit} from \\ to`, ...matrix.destinations.map(endpointLabel)]];
  matrix.sources.forEach((from, i) => rows.push([endpointLabel(from), ...matrix.cells[i]!.map(cellText)]));
  return alignTable(rows);
}
