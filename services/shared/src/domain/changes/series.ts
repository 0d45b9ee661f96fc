/**
 * The series change points are found in: one per schedule × flow (its link, source
 * agent:interface to destination agent:interface, each direction its own) × sweep point ×
 * headline figure, each point a succeeded run's value; and a search's, one per schedule × point
 * × loss goal, each point a firing's rate found. And what a run's environment was at each end,
 * so that a change point can say what changed between the runs on either side of it.
 */
import type { Endpoint, Job, Run, SweepPoint } from '../contract.js';
import type { components } from '../../generated/openapi.js';
import type { SearchRate } from '../campaigns/campaign.js';
import { figure as catalogued } from '../figures/catalogue.js';
import { HISTORY_COLUMNS, type HistoryColumnName } from '../figures/columns.js';

type RunSummary = components['schemas']['RunSummary'];
type Environment = NonNullable<components['schemas']['EndDiagnostics']['environment']>;

/** The history figures a series is kept of: retransmits are counts too noisy to be a level. */
export const SERIES_FIGURES = ['bitsPerSecond', 'transactionsPerSecond', 'udpLossRatio', 'jitterSeconds', 'rttP50Seconds'] as const satisfies readonly HistoryColumnName[];
/** A search's rate per loss goal: the binary search's rate found, an MLRsearch goal's relevant lower bound (datagrams/s per flow; the catalogue's searchFound). */
export const SEARCH_FIGURE = 'searchPacketsPerSecond';
export type SeriesFigure = (typeof SERIES_FIGURES)[number] | typeof SEARCH_FIGURE;

/** The loss goal a search's series is of. */
export interface SearchGoal {
  algorithm: SearchRate['algorithm'];
  lossRatio: number;
  exceedRatio: number | null;
}

export interface SeriesId {
  schedule: string;
  flowIndex: number;
  direction: 'forward' | 'reverse';
  src: Endpoint;
  dst: Endpoint;
  point: SweepPoint;
  figure: SeriesFigure;
  /** A search's series only. */
  goal?: SearchGoal;
}

const figureOf = (figure: SeriesFigure) => (figure === SEARCH_FIGURE ? catalogued('searchFound')! : HISTORY_COLUMNS.find((c) => c.name === figure)!.figure);

/** Whether a higher value of the figure is better (from the catalogue). */
export function higherIsBetter(figure: SeriesFigure): boolean {
  return figureOf(figure).better === 'higher';
}

/** The figure's unit, as JSON gives it. */
export function unitOf(figure: SeriesFigure): string {
  return figureOf(figure).unit;
}

/**
 * A search's firing as points of its series: per point and loss goal, the rate found (a binary
 * search's, an MLRsearch goal's relevant lower bound), on its first flow's link (every flow is
 * offered the same rate). A goal without a rate found (even min failed) adds no point.
 */
export function searchSeriesOf(job: Job, rates: readonly SearchRate[]): { id: SeriesId; value: number }[] {
  const schedule = job.spec.labels?.schedule;
  const [flow] = Array.isArray(job.spec.flows) ? job.spec.flows : [];
  if (!schedule || !flow) return [];
  return rates.flatMap((r) => (r.lower === null ? [] : [{
    id: { schedule, flowIndex: 0, direction: 'forward' as const, src: flow.from, dst: flow.to, point: r.point, figure: SEARCH_FIGURE, goal: { algorithm: r.algorithm, lossRatio: r.lossRatio, exceedRatio: r.exceedRatio } },
    value: r.lower,
  }]));
}

/** A value with its keys sorted, all the way down: the same value has one text. */
export function canonical(value: unknown): string {
  const sort = (v: unknown): unknown =>
    Array.isArray(v) ? v.map(sort) : v && typeof v === 'object' ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sort((v as Record<string, unknown>)[k])])) : v;
  return JSON.stringify(sort(value));
}

/** The series a run's summary extends, with its values: none for a run that failed or belongs to no schedule. */
export function seriesOf(summary: RunSummary): { id: SeriesId; value: number }[] {
  const schedule = summary.labels.schedule;
  if (!schedule || summary.status !== 'succeeded') return [];
  return summary.flows.flatMap((flow) =>
    SERIES_FIGURES.flatMap((figure) => {
      const value = flow[figure];
      if (value === null || !Number.isFinite(value)) return [];
      return [{ id: { schedule, flowIndex: flow.flowIndex, direction: flow.direction, src: flow.src, dst: flow.dst, point: summary.point, figure }, value }];
    }),
  );
}

/** One end's environment as a change point compares it: the host's, with the engine's version. */
export type EndEnvironment = Partial<Environment> & { agent: string; interface: string; engineVersion?: string };
export interface FlowEnvironment {
  sender?: EndEnvironment;
  receiver?: EndEnvironment;
}

/** Each flow's environment at its two ends, by flow index. */
export function flowEnvironments(run: Run): Map<number, FlowEnvironment> {
  const out = new Map<number, FlowEnvironment>();
  for (const flow of run.flows) {
    const end = (d: NonNullable<typeof flow.diagnostics>['sender']): EndEnvironment | undefined =>
      d ? { agent: d.agent, interface: d.interface, ...(d.environment ?? {}), ...(d.engineVersion ? { engineVersion: d.engineVersion } : {}) } : undefined;
    const sender = end(flow.diagnostics?.sender);
    const receiver = end(flow.diagnostics?.receiver);
    out.set(flow.flowIndex, { ...(sender ? { sender } : {}), ...(receiver ? { receiver } : {}) });
  }
  return out;
}

export interface EnvironmentChange {
  end: 'sender' | 'receiver';
  agent: string;
  interface: string;
  /** A dotted path: `mtu`, `tcpRmem`, `qdiscs.8001:.options.rate` (a qdisc by its handle). */
  field: string;
  before: unknown;
  after: unknown;
}

/** Leaves of a value by dotted path; a list of qdiscs is keyed by handle, other lists by position. */
function leaves(value: unknown, path: string, out: Map<string, unknown>): void {
  if (Array.isArray(value)) {
    value.forEach((item, i) => {
      const key = item && typeof item === 'object' && typeof (item as { handle?: unknown }).handle === 'string' ? (item as { handle: string }).handle : String(i);
      leaves(item, `${path}.${key}`, out);
    });
  } else if (value && typeof value === 'object') {
    for (const [key, inner] of Object.entries(value)) leaves(inner, path ? `${path}.${key}` : key, out);
  } else {
    out.set(path, value);
  }
}

/** What differs between two runs' environments of one flow, end by end and field by field. */
export function environmentChanges(before: FlowEnvironment | null, after: FlowEnvironment | null): EnvironmentChange[] {
  if (!before || !after) return [];
  const changes: EnvironmentChange[] = [];
  for (const end of ['sender', 'receiver'] as const) {
    const [a, b] = [before[end], after[end]];
    if (!a || !b) continue;
    const [la, lb] = [new Map<string, unknown>(), new Map<string, unknown>()];
    leaves(a, '', la);
    leaves(b, '', lb);
    for (const field of new Set([...la.keys(), ...lb.keys()])) {
      if (field === 'agent' || field === 'interface') continue;
      const [x, y] = [la.get(field) ?? null, lb.get(field) ?? null];
      if (canonical(x) !== canonical(y)) changes.push({ end, agent: b.agent, interface: b.interface, field, before: x, after: y });
    }
  }
  return changes;
}

type ChangePoint = components['schemas']['ChangePoint'];

/** When a job's last run ended (without one, when the job ended, started or was made), for placing it against a step. */
function jobTime(job: Job, runs: readonly Run[]): number {
  const ends = runs.flatMap((r) => (r.finishedAt ? [Date.parse(r.finishedAt)] : []));
  return ends.length ? Math.max(...ends) : Date.parse(job.finishedAt ?? job.startedAt ?? job.createdAt);
}

/**
 * The change points a comparison of two jobs spans: on a link of either job (a flow's ends,
 * either way round), with the step (its last run before and first after) overlapping the
 * time between the two jobs' ends.
 */
export function changesBetween(a: { job: Job; runs: readonly Run[] }, b: { job: Job; runs: readonly Run[] }, changes: readonly ChangePoint[]): ChangePoint[] {
  const [first, last] = [jobTime(a.job, a.runs), jobTime(b.job, b.runs)].sort((x, y) => x - y) as [number, number];
  const key = (from: { agent: string; interface: string }, to: { agent: string; interface: string }) => [from, to].map((e) => `${e.agent}:${e.interface}`).sort().join(' ');
  const links = new Set([a.job, b.job].flatMap((job) => (Array.isArray(job.spec.flows) ? job.spec.flows : []).map((f) => key(f.from, f.to))));
  return changes.filter((c) => links.has(key(c.series.src, c.series.dst)) && first < Date.parse(c.after.finishedAt) && Date.parse(c.before.finishedAt) < last);
}
