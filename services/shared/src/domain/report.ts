/**
 * A job's report: per sweep point, per leg and summed, the statistics of its runs; as JSON,
 * as CSV (one header row) and as the nttcp table the seeds print.
 */
import { alignTable } from './text-table.js';
import { whereLost } from './attribution.js';
import { byPoint, headline, headlineOf, pointStates } from './campaign.js';
import type { EndFigures, FlowResult, Job, JobSpec, Run, SweepPoint } from './contract.js';
import type { components } from '../generated/openapi.js';
import { DIMENSIONS, pointKey, repetitions, sweepPoints } from './plan.js';
import { CONFIDENCE, summarize } from './statistics.js';
import { FIGURE_DOMAINS, type FigureName } from './figure-domains.js';
import { kindOf } from './test-kinds/index.js';
import { COLUMNS } from './figures/columns.js';
import { flowSpec, measuresHeadline } from './flow-tests.js';
import { basePoint, searchResults } from './rate-search.js';
import { buildMatrix, matrixTable } from './matrix-report.js';

export type Report = components['schemas']['Report'];
type ReportPoint = Report['points'][number];
type LegFigures = ReportPoint['flows'][number];
/** The summary of one figure over a point's repetitions (the contract's RepeatSummary). */
type RepeatSummary = components['schemas']['RepeatSummary'];

/** One figure's summary over a point's runs, its interval within the figure's domain. */
const summaryOf = (figure: FigureName, values: (number | null | undefined)[], confidence: number): RepeatSummary | null => {
  const present = values.filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
  return present.length === 0 ? null : summarize(present, confidence, FIGURE_DOMAINS[figure]);
};

/** The figures a report leg and the CSV carry: the catalogue's columns that have one value per flow. */
export const LEG_COLUMNS = COLUMNS.filter((c) => c.flow);
type LegFigureName = Exclude<keyof LegFigures, 'flowIndex' | 'direction' | 'test' | 'from' | 'to'>;

/** Every figure of one leg over a point's succeeded runs. */
function legFigures(spec: JobSpec, runs: Run[], leg: number, confidence: number): LegFigures {
  const flows = runs.map((r) => r.flows[leg]!);
  const [first] = flows;
  const figures = Object.fromEntries(LEG_COLUMNS.map((c) => [c.name, summaryOf(c.name as FigureName, flows.map(c.flow!), confidence)])) as Record<LegFigureName, RepeatSummary | null>;
  return {
    flowIndex: first!.flowIndex,
    direction: first!.direction,
    test: flowSpec(spec, first!.flowIndex).test,
    from: first!.from,
    to: first!.to,
    ...figures,
  };
}

export function buildReport(job: Job, runs: Run[]): Report {
  const spec = job.spec;
  const reps = repetitions(spec);
  const confidence = reps.adaptive?.confidence ?? CONFIDENCE;
  const finished = runs.filter((r) => r.status === 'succeeded' || r.status === 'failed');
  const states = pointStates(spec, finished);
  const grouped = byPoint(finished);
  // A group's pairs are runs of one point: its report is the matrix, not a point's statistics over pairs.
  const reported = spec.group ? [] : spec.search ? trialPoints(spec, finished) : sweepPoints(spec);
  const points: ReportPoint[] = reported.map((point) => {
    const key = pointKey(point);
    const mine = grouped.get(key) ?? [];
    const ok = mine.filter((r) => r.status === 'succeeded' && r.flows.length > 0);
    const legs = ok[0]?.flows.length ?? 0;
    const flows = Array.from({ length: legs }, (_, leg) => legFigures(spec, ok, leg, confidence));
    // Totals are over the flows of the job's own test: an rr flow's few bytes are no part of a stream job's throughput.
    const sum = (figure: FigureName, f: (flow: FlowResult) => number | null | undefined) =>
      summaryOf(figure, ok.map((r) => r.flows.reduce((a, flow) => a + (measuresHeadline(spec, flow.flowIndex) ? (f(flow) ?? 0) : 0), 0)), confidence);
    // A search's points are the rates it tried: each is repeated only to confirm it.
    const state = states.get(key) ?? { stoppedBy: null, halfWidthPercent: null };
    return {
      point,
      runs: { succeeded: ok.length, failed: mine.length - ok.length },
      stoppedBy: state.stoppedBy,
      halfWidthPercent: state.halfWidthPercent,
      flows,
      total: {
        bitsPerSecond: sum('bitsPerSecond', (f) => f.bitsPerSecond),
        retransmits: spec.protocol === 'tcp' ? sum('retransmits', (f) => f.retransmits) : null,
        transactionsPerSecond: kindOf(spec).headline.name === 'transactionsPerSecond' ? sum('transactionsPerSecond', (f) => f.rr?.transactionsPerSecond) : null,
        ...(kindOf(spec).headline.name === 'rttP50Seconds' ? { rttP50Seconds: summaryOf('rttP50Seconds', ok.map((r) => headlineOf(spec, r.flows)), confidence) } : {}),
      },
    };
  });
  return {
    jobId: job.id,
    status: job.status,
    headline: headline(spec),
    confidence,
    dimensions: DIMENSIONS.filter((d) => spec.sweep?.[d] !== undefined || (d === 'rate' && spec.search)),
    points,
    ...(spec.search ? { searches: searchResults(spec, finished) } : {}),
    ...(spec.group ? { matrix: buildMatrix(job, finished, confidence) } : {}),
    failedRuns: finished.filter((r) => r.status === 'failed').map((r) => ({ index: r.index, point: r.point, repetition: r.repetition, error: r.error! })),
  };
}

/** A search's trial points: each sweep point's offered rates, lowest first. */
function trialPoints(spec: JobSpec, finished: Run[]): SweepPoint[] {
  const order = new Map(sweepPoints(spec).map((point, i) => [pointKey(point), i]));
  const distinct = new Map(finished.map((run) => [pointKey(run.point), run.point]));
  const rate = (point: SweepPoint) => (point.rate && 'packetsPerSecond' in point.rate ? point.rate.packetsPerSecond : 0);
  return [...distinct.values()].sort((a, b) => (order.get(pointKey(basePoint(a))) ?? 0) - (order.get(pointKey(basePoint(b))) ?? 0) || rate(a) - rate(b));
}

/** A sweep point as the seeds write it: `bufferLength=10240 socketBuffer=8192`, or `-` for none. */
export function pointLabel(point: SweepPoint): string {
  const parts = DIMENSIONS.filter((d) => point[d] !== undefined).map((d) => {
    const value = point[d];
    return `${d}=${typeof value === 'object' ? ('packetsPerSecond' in value ? `${value.packetsPerSecond}pps` : `${value.bitsPerSecond}bps`) : String(value)}`;
  });
  return parts.length ? parts.join(' ') : '-';
}

const csvCell = (value: unknown) => {
  const text = value === null || value === undefined ? '' : String(value);
  return /[",\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
};

const METRICS = LEG_COLUMNS.map((c) => c.name as LegFigureName);

/** One header row, one row per point × leg (and `total`) × metric that has values. */
export function reportCsv(report: Report): string {
  const dims = report.dimensions as (typeof DIMENSIONS)[number][];
  const header = [...dims, 'flow', 'direction', 'from', 'to', 'metric', 'n', 'mean', 'standardDeviation', 'min', 'max', 'ciLow', 'ciHigh', 'coefficientOfVariation', 'ciMethod'];
  const rows: unknown[][] = [];
  const row = (point: SweepPoint, flow: string, direction: string, from: string, to: string, metric: string, s: RepeatSummary | null | undefined) => {
    if (!s) return;
    const dimValues = dims.map((d) => {
      const v = point[d];
      return typeof v === 'object' ? pointLabel({ [d]: v }).split('=')[1] : v;
    });
    rows.push([...dimValues, flow, direction, from, to, metric, s.n, s.mean, s.standardDeviation, s.min, s.max, s.confidenceInterval[0], s.confidenceInterval[1], s.coefficientOfVariation, s.intervalMethod]);
  };
  for (const p of report.points) {
    for (const f of p.flows) {
      for (const metric of METRICS) row(p.point, String(f.flowIndex), f.direction, `${f.from.agent}:${f.from.interface}`, `${f.to.agent}:${f.to.interface}`, metric, f[metric]);
    }
    for (const metric of ['bitsPerSecond', 'retransmits', 'transactionsPerSecond'] as const) row(p.point, 'total', '', '', '', metric, p.total[metric]);
  }
  return [header, ...rows].map((r) => r.map(csvCell).join(',')).join('\n') + '\n';
}

const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;

/** nttcp's eight columns for one end, averaged over the runs (`-` where the engine counts no calls). */
function nttcpColumns(ends: (EndFigures | null)[]): string[] {
  const present = ends.filter((e): e is EndFigures => e !== null);
  if (present.length === 0) return ['-', '-', '-', '-', '-', '-', '-', '-'];
  const avg = (f: (e: EndFigures) => number | null) => {
    const values = present.map(f).filter((v): v is number => v !== null);
    return values.length === present.length ? mean(values) : null;
  };
  const fixed = (v: number | null, digits: number) => (v === null ? '-' : v.toFixed(digits));
  return [
    fixed(avg((e) => e.bytes), 0),
    fixed(avg((e) => e.realSeconds), 2),
    fixed(avg((e) => e.cpuSeconds), 2),
    fixed(avg((e) => e.realBitsPerSecond / 1e6), 4),
    fixed(avg((e) => e.cpuBitsPerSecond / 1e6), 4),
    fixed(avg((e) => e.calls), 0),
    fixed(avg((e) => e.realCallsPerSecond), 2),
    fixed(avg((e) => e.cpuCallsPerSecond), 2),
  ];
}

/** An interval as the tables print it, with how it was made when that is not the plain t-interval. */
const ci = (s: Pick<RepeatSummary, 'confidenceInterval' | 'intervalMethod'>, scale: number, digits: number) =>
  `${(s.confidenceInterval[0]! / scale).toFixed(digits)}-${(s.confidenceInterval[1]! / scale).toFixed(digits)}${s.intervalMethod === 't' ? '' : ` (${s.intervalMethod})`}`;

/**
 * The nttcp table of seed 000: per point and leg a `local` (sender) and a `remote` (receiver)
 * line, each column the mean over the point's succeeded runs; then the point's statistics.
 */
export function reportTable(job: Job, runs: Run[], report: Report): string {
  const spec = job.spec;
  const out: string[] = [];
  const reps = repetitions(spec);
  const perPoint = reps.adaptive ? `${reps.min}-${reps.max} runs per point (adaptive)` : `${reps.min} run${reps.min === 1 ? '' : 's'} per point`;
  out.push(`job ${job.id}  ${spec.engine} ${spec.protocol} ${spec.test}  ${spec.flows.length} flow${spec.flows.length === 1 ? '' : 's'}  ${perPoint}  ${job.status}`);
  const grouped = byPoint(runs.filter((r) => r.status === 'succeeded'));
  // A search's trials are listed in its own table below, not as one nttcp block each.
  for (const p of report.searches ? [] : report.points) {
    const ok = grouped.get(pointKey(p.point)) ?? [];
    out.push('', `point ${pointLabel(p.point)}  (${p.runs.succeeded} succeeded, ${p.runs.failed} failed${p.stoppedBy && p.stoppedBy !== 'fixed' ? `, stopped by ${p.stoppedBy}` : ''})`);
    const rows: string[][] = [['flow', 'path', 'end', 'Bytes', 'Real s', 'CPU s', 'Real-Mbit/s', 'CPU-Mbit/s', 'Calls', 'Real-C/s', 'CPU-C/s']];
    p.flows.forEach((f, leg) => {
      const path = `${f.from.agent}:${f.from.interface} ${f.direction === 'forward' ? '->' : '<-'} ${f.to.agent}:${f.to.interface}`;
      rows.push([String(f.flowIndex), path, 'local', ...nttcpColumns(ok.map((r) => r.flows[leg]!.sender))]);
      rows.push(['', '', 'remote', ...nttcpColumns(ok.map((r) => r.flows[leg]!.receiver))]);
    });
    out.push(alignTable(rows));
    out.push(...rttLines(p.flows));
    out.push(...whyLines(ok));
    const { name, table: { scale, unit, digits } } = kindOf(spec).headline;
    const total = p.total[name];
    if (total) {
      out.push(`total ${unit}: mean ${(total.mean / scale).toFixed(digits)}, sd ${(total.standardDeviation / scale).toFixed(digits)}, ${Math.round(report.confidence * 100)}% CI ${ci(total, scale, digits)}, cv ${(total.coefficientOfVariation * 100).toFixed(1)}%, n ${total.n}`);
    }
  }
  if (report.searches) out.push('', ...searchTable(spec, report.searches));
  for (const matrix of report.matrix ?? []) out.push('', `${spec.group!.shape} matrix${Object.keys(matrix.point).length ? ` at ${pointLabel(matrix.point)}` : ''}: ${spec.flows.length} pairs in ${job.expansion?.rounds.length ?? '?'} rounds, rows from, columns to`, matrixTable(job, matrix));
  if (job.pairs) out.push(`pairs measured: ${job.pairs.measured} of ${job.pairs.total}${job.pairs.failed ? `; ${job.pairs.failed} failed` : ''}`);
  for (const f of job.pairs?.failures ?? []) out.push(`failed pair ${f.from.agent}:${f.from.interface} -> ${f.to.agent}:${f.to.interface}${Object.keys(f.point).length ? ` at ${pointLabel(f.point)}` : ''}: ${f.error.code}: ${f.error.message}`);
  for (const skipped of job.expansion?.skipped ?? []) out.push(`skipped ${skipped.agent}${skipped.interface ? `:${skipped.interface}` : ''} (${skipped.reason}): ${skipped.message}`);
  for (const failed of report.failedRuns) out.push('', `run ${failed.index} (${pointLabel(failed.point)}, repetition ${failed.repetition}) failed: ${failed.error.code}: ${failed.error.message}`);
  return out.join('\n') + '\n';
}

const ms = (s: RepeatSummary | null) => (s ? (s.mean * 1e3).toFixed(3) : '-');

/** The round trips of a point's rr and probe flows, idle beside loaded with what the load added (ms, means over runs). */
function rttLines(flows: LegFigures[]): string[] {
  const timed = flows.filter((f) => f.rttP99Seconds);
  if (timed.length === 0) return [];
  const idle = timed.some((f) => f.idleRttP99Seconds);
  const header = ['flow', 'path', 'transactions/s', ...(idle ? ['idle p50 ms', 'idle p99 ms'] : []), `${idle ? 'loaded ' : ''}p50 ms`, `${idle ? 'loaded ' : ''}p99 ms`, ...(idle ? ['+p99 ms'] : [])];
  const rows = timed.map((f) => {
    const added = f.rttP99Seconds && f.idleRttP99Seconds ? ((f.rttP99Seconds.mean - f.idleRttP99Seconds.mean) * 1e3).toFixed(3) : '-';
    return [
      String(f.flowIndex), `${f.from.agent}:${f.from.interface} ${f.direction === 'forward' ? '->' : '<-'} ${f.to.agent}:${f.to.interface}`,
      f.transactionsPerSecond ? f.transactionsPerSecond.mean.toFixed(1) : '-',
      ...(idle ? [ms(f.idleRttP50Seconds), ms(f.idleRttP99Seconds)] : []), ms(f.rttP50Seconds), ms(f.rttP99Seconds), ...(idle ? [added] : []),
    ];
  });
  const kinds = [...new Set(timed.map((f) => f.test))].join(', ');
  return [`round trips (${kinds}):`, alignTable([header, ...rows])];
}

const mbit = (bits: number) => (bits / 1e6).toFixed(2);

/**
 * Per run and leg, crude's UDP figures (received, lost, out of order, jitter), where the lost
 * datagrams went, and what limited the leg.
 */
function whyLines(runs: Run[]): string[] {
  const out: string[] = [];
  const udpRows = [['run', 'flow', 'sent', 'received', 'lost', 'loss %', 'out-of-order', 'jitter ms']];
  const notes: string[] = [];
  for (const run of runs) {
    for (const f of run.flows) {
      const label = `run ${run.index} flow ${f.flowIndex}${f.direction === 'reverse' ? ' reverse' : ''}`;
      if (f.udp) {
        udpRows.push([String(run.index), `${f.flowIndex}${f.direction === 'reverse' ? ' rev' : ''}`, String(f.udp.sent), String(f.udp.received), String(f.udp.lost), (f.udp.lossRatio * 100).toFixed(3), String(f.udp.outOfOrder), (f.udp.jitterSeconds * 1e3).toFixed(3)]);
      }
      if (f.lossAttribution && f.lossAttribution.lost > 0) notes.push(`${label}: ${whereLost(f.lossAttribution)}`);
      if (f.bottleneck) notes.push(`${label}: bottleneck ${f.bottleneck.reason}`);
    }
  }
  if (udpRows.length > 1) out.push(alignTable(udpRows));
  return [...out, ...notes];
}

/**
 * Seed 002's table: per point (direction × size, as swept) the rate found and where loss
 * began, then each point's trials in the order they ran.
 */
function searchTable(spec: JobSpec, searches: NonNullable<Report['searches']>): string[] {
  const search = spec.search!;
  const what = search.target === 'ndr' ? 'no-drop rate (NDR)' : `partial-drop rate (PDR, loss <= ${((search.lossRatio ?? 0) * 100).toPrecision(3)}%)`;
  const out = [`rate search: ${what}, resolution ${search.resolutionPercent ?? 1}%, ${search.confirmations ?? 1} confirming trial(s), ${spec.duration} s per trial; rates per flow`];
  const rows = [['point', 'size B', 'found pps', 'payload Mbit/s', 'wire Mbit/s', 'loss began pps', 'limited by', 'bottleneck at found', 'trials', 'stopped by']];
  const verdicts = (t: NonNullable<Report['searches']>[number]['trials'][number] | undefined) => (t ? [...new Set(t.flows.map((f) => f.bottleneck ?? '-'))].join(', ') : '-');
  for (const r of searches) {
    rows.push([
      pointLabel(basePoint(r.point)), String(r.packetSize),
      r.found ? String(r.found.packetsPerSecond) : '-', r.found ? mbit(r.found.bitsPerSecond) : '-', r.found ? mbit(r.found.wireBitsPerSecond) : '-',
      r.bracket.high === null ? '-' : String(r.bracket.high), r.limitedBy ?? '-',
      r.found ? verdicts(r.trials.findLast((t) => t.passed && t.packetsPerSecond === r.found!.packetsPerSecond)) : '-', String(r.trials.length), r.stoppedBy ?? 'searching',
    ]);
  }
  out.push(alignTable(rows));
  for (const r of searches) {
    out.push('', `trials at ${pointLabel(basePoint(r.point))}:`);
    out.push(alignTable([['run', 'offered pps', 'achieved pps', 'loss %', 'verdict', 'bottleneck'], ...r.trials.map((t) => [
      String(t.runIndex), String(t.packetsPerSecond), t.flows.length ? Math.round(Math.min(...t.flows.map((f) => f.achievedPacketsPerSecond))).toString() : '-',
      (t.lossRatio * 100).toFixed(3), t.passed ? 'pass' : `fail (${t.failedBy})`, verdicts(t),
    ])]));
  }
  return out;
}
