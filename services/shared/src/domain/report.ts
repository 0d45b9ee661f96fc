/**
 * A job's report: per sweep point, per leg and summed, the statistics of its runs; as JSON,
 * as CSV (one header row) and as the nttcp table the seeds print.
 */
import { alignTable, csvCell } from './text-table.js';
import { whereLost } from './attribution.js';
import { byPoint, headline, headlineOf, pointStates } from './points.js';
import type { EndFigures, FlowResult, Job, JobSpec, Run, SweepPoint } from './contract.js';
import type { components } from '../generated/openapi.js';
import { DIMENSIONS, pointKey, pointLabel, repetitions, sweptValues } from './plan.js';
import { CONFIDENCE, summarize } from './statistics.js';
import { FIGURE_DOMAINS, type FigureName } from './figure-domains.js';
import { kindOf } from './test-kinds/index.js';
import { COLUMNS } from './figures/columns.js';
import { flowSpec, measuresHeadline } from './flow-tests.js';
import { campaignOf } from './campaigns/index.js';
import { factorialCsvRows } from './campaigns/factorial.js';
import { fileStages, stageLines } from './file-io/stages.js';

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
  // An MLRsearch's latency runs (after its search) are in its own section, not at a trial's rate.
  const grouped = byPoint(finished.filter((r) => r.latencyAt === undefined));
  const campaign = campaignOf(spec);
  const reported = campaign.reportedPoints(spec, finished);
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
    dimensions: DIMENSIONS.filter((d) => sweptValues(spec, d) !== undefined || campaign.addsDimensions.includes(d)),
    points,
    ...campaign.reportSection(job, finished, confidence),
    ...(spec.file ? { stages: fileStages(spec, points) } : {}),
    failedRuns: finished.filter((r) => r.status === 'failed').map((r) => ({ index: r.index, point: r.point, repetition: r.repetition, error: r.error! })),
  };
}


const METRICS = LEG_COLUMNS.map((c) => c.name as LegFigureName);

/** A point's values in the CSV's dimension columns (a rate as its label: `70000pps`). */
const dimValues = (dims: (typeof DIMENSIONS)[number][], point: SweepPoint) =>
  dims.map((d) => {
    const v = point[d];
    return typeof v === 'object' ? pointLabel({ [d]: v }).split('=')[1] : v;
  });

/** One header row, one row per point × leg (and `total`) × metric that has values. */
export function reportCsv(report: Report): string {
  const dims = report.dimensions as (typeof DIMENSIONS)[number][];
  const header = [...dims, 'flow', 'direction', 'from', 'to', 'metric', 'n', 'mean', 'standardDeviation', 'min', 'max', 'ciLow', 'ciHigh', 'coefficientOfVariation', 'ciMethod'];
  const rows: unknown[][] = [];
  type Where = { point: SweepPoint; flow: string; direction: string; from: string; to: string };
  const row = ({ point, flow, direction, from, to }: Where, metric: string, s: RepeatSummary | null | undefined) => {
    if (!s) return;
    rows.push([...dimValues(dims, point), flow, direction, from, to, metric, s.n, s.mean, s.standardDeviation, s.min, s.max, s.confidenceInterval[0], s.confidenceInterval[1], s.coefficientOfVariation, s.intervalMethod]);
  };
  for (const p of report.points) {
    for (const f of p.flows) {
      const where = { point: p.point, flow: String(f.flowIndex), direction: f.direction, from: `${f.from.agent}:${f.from.interface}`, to: `${f.to.agent}:${f.to.interface}` };
      for (const metric of METRICS) row(where, metric, f[metric]);
    }
    for (const metric of ['bitsPerSecond', 'retransmits', 'transactionsPerSecond'] as const) row({ point: p.point, flow: 'total', direction: '', from: '', to: '' }, metric, p.total[metric]);
  }
  // A factorial's cells with their pooled intervals and its contrasts, in the headline's unit (flow `factorial`).
  for (const f of (report.factorials ?? []).flatMap(factorialCsvRows)) {
    if (f.mean === null) continue;
    rows.push([...dimValues(dims, f.point), 'factorial', '', '', '', f.metric, f.n, f.mean, f.standardDeviation ?? '', '', '', f.interval?.[0] ?? '', f.interval?.[1] ?? '', '', f.method ?? '']);
  }
  return [header, ...rows].map((r) => r.map(csvCell).join(',')).join('\n') + '\n';
}

const mean = (values: number[]) => values.reduce((a, b) => a + b, 0) / values.length;

/**
 * nttcp's eight columns for one end, then netperf's service demand (CPU µs per KB, in all and as
 * user/system), averaged over the runs (`-` where the engine counts no calls or moved nothing).
 */
function nttcpColumns(ends: (EndFigures | null)[]): string[] {
  const present = ends.filter((e): e is EndFigures => e !== null);
  if (present.length === 0) return ['-', '-', '-', '-', '-', '-', '-', '-', '-', '-'];
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
    fixed(avg((e) => e.serviceDemand?.microsecondsPerKilobyte ?? null), 3),
    `${fixed(avg((e) => e.serviceDemand?.userMicrosecondsPerKilobyte ?? null), 3)}/${fixed(avg((e) => e.serviceDemand?.systemMicrosecondsPerKilobyte ?? null), 3)}`,
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
  const own = campaignOf(spec).tableLines(job, report);
  for (const p of own.replacesPoints ? [] : report.points) {
    const ok = grouped.get(pointKey(p.point)) ?? [];
    out.push('', `point ${pointLabel(p.point)}  (${p.runs.succeeded} succeeded, ${p.runs.failed} failed${p.stoppedBy && p.stoppedBy !== 'fixed' ? `, stopped by ${p.stoppedBy}` : ''})`);
    const rows: string[][] = [['flow', 'path', 'end', 'Bytes', 'Real s', 'CPU s', 'Real-Mbit/s', 'CPU-Mbit/s', 'Calls', 'Real-C/s', 'CPU-C/s', 'us/KB', 'usr/sys us/KB']];
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
  out.push(...own.lines, ...stageLines(report.stages ?? []));
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
