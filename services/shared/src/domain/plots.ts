/**
 * The figure a lab engineer would draw for a report or a comparison, as a Vega-Lite spec: pure
 * data in, a JSON spec out. Rendering (vega, to SVG) belongs to the API, so this package needs
 * no plotting library.
 */
import type { Comparison, JobComparison } from './compare.js';
import type { components } from '../generated/openapi.js';
import type { Job, JobSpec, Run, SweepPoint } from './contract.js';
import { DIMENSIONS, pointKey, pointLabel, type Dimension } from './plan.js';
import type { Report } from './report.js';
import { basePoint } from './campaigns/rate-search.js';
import { kindOf } from './test-kinds/index.js';
import { RUN_METRICS } from './figure-directions.js';
import { columnOf } from './figures/columns.js';
import { cellLimit } from './matrix-report.js';

/** A Vega-Lite (v6) top-level spec. */
export type ChartSpec = Record<string, unknown>;

/** Which figure a report gets: the shape of the job decides, not its name. */
export type ReportChartKind = 'sweep' | 'search' | 'mlrsearch' | 'fan-in' | 'time-series' | 'matrix';

type ReportPoint = Report['points'][number];
type LegFigures = ReportPoint['flows'][number];

const SCHEMA = 'https://vega.github.io/schema/vega-lite/v6.json';
const SIZE = { width: 560, height: 320 };

/** An axis for a swept field, in the seeds' units: sizes in KiB, rates in kpps or Mbit/s. */
interface DimensionAxis {
  title: string;
  type: 'quantitative' | 'ordinal';
  value: (point: SweepPoint) => number | string;
  /** Sizes and stream counts: a log axis (base 2). */
  log?: boolean;
}

const axisOf = (title: string, type: DimensionAxis['type'], value: DimensionAxis['value']): DimensionAxis => ({ title, type, value });
/** Sizes and counts that sweeps grow by factors (8, 32, 128 KiB; 1, 4, 16, 64 streams) are spaced by ratio. */
const byRatio = (axis: DimensionAxis): DimensionAxis => ({ ...axis, log: true });
const KIB = (name: string, d: 'bufferLength' | 'socketBuffer' | 'requestSize' | 'responseSize') => byRatio(axisOf(`${name} (KiB)`, 'quantitative', (p) => (p[d] as number) / 1024));
/** A field of the chart's data as Vega-Lite encodes it, with the title its axis or legend shows. */
const quantitative = (field: string, title: string, more: Record<string, unknown> = {}) => ({ field, type: 'quantitative', title, ...more });
const nominal = (field: string, title: string | null, more: Record<string, unknown> = {}) => ({ field, type: 'nominal', title, ...more });

function dimensionAxis(d: Dimension, points: SweepPoint[]): DimensionAxis {
  switch (d) {
    case 'bufferLength': return KIB('buffer length', d);
    case 'socketBuffer': return KIB('socket buffer', d);
    case 'requestSize': return KIB('request size', d);
    case 'responseSize': return KIB('response size', d);
    case 'mtu': return axisOf('MTU (B)', 'quantitative', (p) => p.mtu!);
    case 'packetSize': return byRatio(axisOf('datagram payload (B)', 'quantitative', (p) => p.packetSize!));
    case 'streams': return byRatio(axisOf('parallel streams', 'quantitative', (p) => p.streams!));
    case 'noDelay': return axisOf('TCP_NODELAY', 'ordinal', (p) => String(p.noDelay));
    case 'direction': return axisOf('direction', 'ordinal', (p) => p.direction!);
    case 'io': return axisOf('source and sink', 'ordinal', (p) => p.io!);
    case 'tuned': return axisOf('ends tuned', 'ordinal', (p) => p.tuned!);
    case 'rate': {
      const inPackets = points.some((p) => p.rate && 'packetsPerSecond' in p.rate);
      return inPackets
        ? axisOf('offered rate (kpps)', 'quantitative', (p) => (p.rate && 'packetsPerSecond' in p.rate ? p.rate.packetsPerSecond / 1000 : 0))
        : axisOf('offered rate (Mbit/s)', 'quantitative', (p) => (p.rate && 'bitsPerSecond' in p.rate ? p.rate.bitsPerSecond / 1e6 : 0));
    }
  }
}

const endpoint = (e: { agent: string; interface: string }) => `${e.agent}:${e.interface}`;

/** The paths of a job's flows as the seeds write them, `A:eth1 -> B:eth1`, distinct ones joined. */
export function pathsOf(spec: JobSpec): string {
  return [...new Set(spec.flows.map((f) => `${endpoint(f.from)} -> ${endpoint(f.to)}`))].join(', ');
}

const legLabel = (f: LegFigures) => `flow ${f.flowIndex}${f.direction === 'reverse' ? ' (reverse)' : ''}: ${endpoint(f.from)} -> ${endpoint(f.to)}`;

function title(what: string, job: Job) {
  const s = job.spec;
  return { text: `${what}: ${pathsOf(s)}`, subtitle: `engine ${s.engine}, ${s.protocol} ${s.test}, job ${job.id}` };
}

/** A column's axis, as the catalogue names and shows it: `throughput (Mbit/s)`, `round-trip median (ms)`, and the divisor into it. */
function columnAxis(name: string): { title: string; scale: number } {
  const c = columnOf(name)!;
  return { title: `${c.label} (${c.figure.display.unit})`, scale: c.figure.display.scale };
}

/** The headline's axis. */
const headlineAxis = (spec: JobSpec) => columnAxis(kindOf(spec).headline.name);

/** A mean with its interval, as the layered line/bar charts read them. */
interface Estimate {
  mean: number;
  low: number;
  high: number;
  n: number;
}

const intervalLayer = (x: Record<string, unknown>, yTitle: string, extra: Record<string, unknown> = {}) => ({
  name: 'intervals',
  mark: { type: 'errorbar', ticks: true },
  encoding: { x, ...extra, y: quantitative('low', yTitle), y2: { field: 'high' } },
});

/** The figure a report gets from its shape. */
export function reportChartKind(report: Report): ReportChartKind {
  if (report.searches) return 'search';
  if (report.mlrSearches) return 'mlrsearch';
  if (report.matrix) return 'matrix';
  if (report.points.length > 1) return 'sweep';
  const [only] = report.points;
  return only && only.runs.succeeded <= 1 ? 'time-series' : 'fan-in';
}

/**
 * The report's figure: a sweep is throughput (with its interval) against the last swept field,
 * a line per flow and per value of the other fields; a rate search is loss against offered
 * rate, an MLRsearch's with each goal's relevant bounds; one point of several runs is a bar per flow (a fan-in's bars should be equal);
 * a single run is its intervals over time, a line per flow. `runs` are the job's runs
 * (the time series reads their intervals).
 */
export function reportChart(job: Job, runs: Run[], report: Report): ChartSpec {
  switch (reportChartKind(report)) {
    case 'search': return searchChart(job, report);
    case 'mlrsearch': return mlrSearchChart(job, report);
    case 'time-series': return timeSeriesChart(job, runs, report);
    case 'fan-in': return fanInChart(job, report);
    case 'sweep': return sweepChart(job, report);
    case 'matrix': return matrixChart(job, report);
  }
}

/**
 * A group's matrix (its first sweep point): a cell per pair, source rows by destination
 * columns, a measured one coloured and labelled with its mean headline figure, a failed one
 * grey and labelled FAILED; each cell's tooltip (its aria label in SVG) names the verdict,
 * the UDP loss, the bottleneck, the direction both come from (bidir) and a failed pair's error.
 */
function matrixChart(job: Job, report: Report): ChartSpec {
  const y = headlineAxis(job.spec);
  const m = report.matrix![0];
  const label = (e: { agent: string; interface: string }) => `${e.agent}:${e.interface}`;
  const rows = (m?.sources ?? []).flatMap((from, i) =>
    (m?.destinations ?? []).flatMap((to, j) => {
      const cell = m!.cells[i]?.[j];
      if (!cell || (!cell.value && cell.verdict !== 'failed')) return [];
      const mean = cell.value ? cell.value.mean / y.scale : null;
      const limit = cellLimit(cell, job.spec.direction === 'bidir');
      return [{
        source: label(from), destination: label(to), mean, verdict: cell.verdict,
        text: mean === null ? 'FAILED' : mean.toFixed(1),
        loss: limit.loss ?? '-',
        bottleneck: limit.bottleneck ?? '-',
        direction: limit.direction ?? '-',
        error: cell.error && cell.verdict === 'failed' ? `${cell.error.code}: ${cell.error.message}` : '-',
      }];
    }),
  );
  // Rows and columns in the matrix's own order, every member shown even where it has no cell, so a
  // mesh's empty diagonal is the diagonal (in the order the data came, columns were shifted by one).
  const axis = (field: string, members: { agent: string; interface: string }[]) => nominal(field, field, { sort: null, scale: { domain: members.map(label) } });
  const encoding = { x: axis('destination', m?.destinations ?? []), y: axis('source', m?.sources ?? []) };
  const tooltip = [{ field: 'source' }, { field: 'destination' }, { field: 'mean', title: y.title }, { field: 'verdict' }, { field: 'loss' }, { field: 'bottleneck' }, { field: 'direction' }, { field: 'error' }];
  return {
    $schema: SCHEMA,
    ...SIZE,
    title: title(`${y.title.split(' (')[0]} per pair, source x destination`, job),
    data: { values: rows },
    layer: [
      { name: 'cells', transform: [{ filter: 'datum.mean !== null' }], mark: { type: 'rect' }, encoding: { ...encoding, color: quantitative('mean', y.title), tooltip } },
      { name: 'failures', transform: [{ filter: 'datum.mean === null' }], mark: { type: 'rect', color: '#bbbbbb' }, encoding: { ...encoding, tooltip } },
      { name: 'values', mark: { type: 'text' }, encoding: { ...encoding, text: { field: 'text', type: 'nominal' } } },
    ],
  };
}

const estimate = (s: LegFigures['bitsPerSecond'], scale: number): Estimate | null =>
  s ? { mean: s.mean / scale, low: s.confidenceInterval[0]! / scale, high: s.confidenceInterval[1]! / scale, n: s.n } : null;

const legValue = (report: Report, f: LegFigures) => f[report.headline.name as 'bitsPerSecond' | 'transactionsPerSecond'];

function sweepChart(job: Job, report: Report): ChartSpec {
  const y = headlineAxis(job.spec);
  const dims = report.dimensions as Dimension[];
  const xDim = dims.at(-1);
  const points = report.points.map((p) => p.point);
  const axis = xDim ? dimensionAxis(xDim, points) : axisOf('point', 'ordinal', () => '-');
  const others = dims.slice(0, -1);
  const several = Math.max(0, ...report.points.map((p) => p.flows.length)) > 1;
  const rows = report.points.flatMap((p) => {
    const rest = pointLabel(Object.fromEntries(others.map((d) => [d, p.point[d]])) as SweepPoint);
    return p.flows.flatMap((f) => {
      const e = estimate(legValue(report, f), y.scale);
      if (!e) return [];
      const series = [several ? legLabel(f) : null, rest === '-' ? null : rest].filter(Boolean).join(', ') || legLabel(f);
      return [{ x: axis.value(p.point), series, ...e }];
    });
  });
  // A log scale cannot place 0 (a socket buffer of 0 is the kernel's default).
  const positive = points.every((p) => Number(axis.value(p)) > 0);
  const x = { field: 'x', type: axis.type, title: axis.title, ...(axis.log && positive ? { scale: { type: 'log', base: 2 } } : {}) };
  const color = nominal('series', null);
  return {
    $schema: SCHEMA,
    ...SIZE,
    title: title(`${y.title.split(' (')[0]} against ${axis.title.split(' (')[0]}, ${Math.round(report.confidence * 100)}% intervals`, job),
    data: { values: rows },
    layer: [
      intervalLayer(x, y.title, { color }),
      { name: 'lines', mark: { type: 'line' }, encoding: { x, y: quantitative('mean', y.title), color } },
      { name: 'means', mark: { type: 'point', filled: true, size: 50 }, encoding: { x, y: quantitative('mean', y.title), color, tooltip: [{ field: 'x', title: axis.title }, { field: 'mean', title: y.title }, quantitative('low', 'interval low'), quantitative('high', 'interval high'), { field: 'n' }] } },
    ],
  };
}

/** A search's series: its sweep point when the job searched several, else its datagram size. */
const searchSeries = (several: boolean, s: { point: SweepPoint; packetSize: number }) => (several ? pointLabel(basePoint(s.point)) : `${s.packetSize} B datagrams`);

function searchChart(job: Job, report: Report): ChartSpec {
  const searches = report.searches ?? [];
  const several = searches.length > 1;
  const rows = searches.flatMap((s) =>
    s.trials.map((t) => ({
      offered: t.packetsPerSecond / 1000,
      loss: t.lossRatio * 100,
      verdict: t.passed ? 'pass' : `fail (${t.failedBy})`,
      series: searchSeries(several, s),
    })),
  );
  const x = quantitative('offered', 'offered rate per flow (kpps)');
  const y = quantitative('loss', 'loss (%)');
  const found = searches.filter((s) => s.found).map((s) => `${s.target.toUpperCase()} ${(s.found!.packetsPerSecond / 1000).toFixed(1)} kpps`).join(', ');
  return {
    $schema: SCHEMA,
    ...SIZE,
    title: { ...title(`loss against offered rate (${searches[0]?.target ?? 'search'})`, job), subtitle: `engine ${job.spec.engine}, ${job.spec.protocol}; found ${found || 'none'}; job ${job.id}` },
    data: { values: rows },
    layer: [
      { name: 'lines', mark: { type: 'line' }, encoding: { x, y, color: nominal('series', null), order: { field: 'offered' } } },
      { name: 'trials', mark: { type: 'point', filled: true, size: 60 }, encoding: { x, y, color: nominal('series', null), shape: nominal('verdict', 'trial') } },
    ],
  };
}

const goalName = (lossRatio: number) => (lossRatio === 0 ? 'NDR' : `PDR ${+(lossRatio * 100).toFixed(3)}%`);

/**
 * An MLRsearch: each trial's loss against its offered rate (its symbol's size its duration, its
 * colour what it was: warm-up, a trial counted, or void, niclab's limit), a line per datagram
 * size or point, and each goal's relevant lower (solid) and upper (dashed) bound as a rule.
 */
function mlrSearchChart(job: Job, report: Report): ChartSpec {
  const searches = report.mlrSearches ?? [];
  const several = searches.length > 1;
  const seriesOf = (s: (typeof searches)[number]) => searchSeries(several, s);
  const rows = searches.flatMap((s) => s.trials.map((t) => ({
    offered: t.packetsPerSecond / 1000, loss: t.lossRatio * 100, seconds: t.duration,
    trial: t.void.length ? "void (niclab's limit)" : t.purpose === 'warmup' ? 'warm-up (not counted)' : 'counted',
    series: seriesOf(s),
  })));
  const bounds = searches.flatMap((s) => s.goals.flatMap((g) => ([['lower', g.relevantLowerBound], ['upper', g.relevantUpperBound]] as const).flatMap(([bound, rate]) =>
    rate ? [{ offered: rate.packetsPerSecond / 1000, bound: `${goalName(g.goal.lossRatio)} ${bound}`, goal: `${several ? `${seriesOf(s)}: ` : ''}${goalName(g.goal.lossRatio)}`, kind: bound }] : [])));
  const x = quantitative('offered', 'offered rate per flow (kpps)');
  const y = quantitative('loss', 'loss (%)');
  const found = searches.flatMap((s) => s.goals.map((g) => `${goalName(g.goal.lossRatio)} ${g.conditionalThroughput ? `${(g.conditionalThroughput.packetsPerSecond / 1000).toFixed(3)} kpps` : 'none'}${g.regular ? '' : ` (${g.irregular})`}`)).join(', ');
  const spent = searches.map((s) => `${s.trials.length} trials, ${s.trialSeconds} trial-s`).join('; ');
  return {
    $schema: SCHEMA,
    ...SIZE,
    title: { ...title('MLRsearch: loss against offered rate, each goal\'s relevant bounds', job), subtitle: `engine ${job.spec.engine}; conditional throughput ${found || 'none'}; ${spent}; job ${job.id}` },
    layer: [
      { name: 'lines', data: { values: rows }, mark: { type: 'line', opacity: 0.4 }, encoding: { x, y, color: nominal('series', null), order: { field: 'offered' } } },
      { name: 'trials', data: { values: rows }, mark: { type: 'point', filled: true }, encoding: { x, y, shape: nominal('trial', 'trial'), size: quantitative('seconds', 'trial duration (s)'), color: nominal('series', null) } },
      { name: 'bounds', data: { values: bounds }, mark: { type: 'rule' }, encoding: { x, strokeDash: nominal('kind', 'lower or upper'), color: nominal('goal', null), tooltip: [nominal('bound', 'bound'), quantitative('offered', 'offered rate per flow (kpps)')] } },
    ],
  };
}

function fanInChart(job: Job, report: Report): ChartSpec {
  const y = headlineAxis(job.spec);
  const p = report.points[0]!;
  const rows = p.flows.flatMap((f) => {
    const e = estimate(legValue(report, f), y.scale);
    return e ? [{ flow: legLabel(f), ...e }] : [];
  });
  const x = nominal('flow', 'flow', { sort: null, axis: { labelAngle: -20, labelLimit: 240 } });
  return {
    $schema: SCHEMA,
    ...SIZE,
    title: title(`${y.title.split(' (')[0]} per flow${rows.length > 1 ? ' (should be equal)' : ''}, ${Math.round(report.confidence * 100)}% intervals`, job),
    data: { values: rows },
    layer: [
      { name: 'bars', mark: { type: 'bar' }, encoding: { x, y: quantitative('mean', y.title), tooltip: [{ field: 'flow' }, { field: 'mean', title: y.title }, { field: 'n' }] } },
      intervalLayer(x, y.title),
    ],
  };
}

function timeSeriesChart(job: Job, runs: Run[], report: Report): ChartSpec {
  const key = report.points[0] ? pointKey(report.points[0].point) : null;
  const run = runs.find((r) => r.status === 'succeeded' && pointKey(r.point) === key);
  const rows = (run?.flows ?? []).flatMap((f) => {
    const label = `flow ${f.flowIndex}${f.direction === 'reverse' ? ' (reverse)' : ''}: ${endpoint(f.from)} -> ${endpoint(f.to)}`;
    return f.intervals.map((i) => ({ time: i.end, throughput: i.bitsPerSecond / 1e6, flow: label }));
  });
  const x = quantitative('time', 'time (s)');
  const y = quantitative('throughput', columnAxis('bitsPerSecond').title);
  return {
    $schema: SCHEMA,
    ...SIZE,
    title: title(`throughput per interval${run ? `, run ${run.index}` : ''}`, job),
    data: { values: rows },
    layer: [
      { name: 'lines', mark: { type: 'line' }, encoding: { x, y, color: nominal('flow', null) } },
      { name: 'samples', mark: { type: 'point', filled: true, size: 30 }, encoding: { x, y, color: nominal('flow', null) } },
    ],
  };
}

/**
 * An A/B comparison: per point a baseline and a candidate bar, each with the interval of its
 * mean, and the verdict (with the % change) above the pair.
 */
export function comparisonChart(baseline: Job, candidate: Job, c: JobComparison): ChartSpec {
  const judged = RUN_METRICS[c.metric.name];
  const axis = columnAxis(c.metric.name);
  const y = c.metric.name === c.headline.name ? axis : { ...axis, title: `${axis.title.slice(0, -1)}, ${judged.higherIsBetter ? 'higher' : 'lower'} is better)` };
  // Each side's interval as the comparison made it, within the figure's domain.
  const interval = (s: Comparison['points'][number]['baseline']) => ({ mean: s.mean / y.scale, low: s.confidenceInterval[0]! / y.scale, high: s.confidenceInterval[1]! / y.scale, n: s.n });
  const bars = c.points.flatMap((p) => {
    const point = pointLabel(p.point);
    return ([['baseline', p.baseline], ['candidate', p.candidate]] as const).filter(([, s]) => s.n > 0).map(([side, s]) => ({ point, side, ...interval(s) }));
  });
  const verdicts = c.points.map((p) => ({
    point: pointLabel(p.point),
    top: Math.max(...[p.baseline, p.candidate].filter((s) => s.n > 0).map((s) => interval(s).high), 0),
    verdict: `${p.verdict}${p.changePercent === null ? '' : ` (${p.changePercent >= 0 ? '+' : ''}${p.changePercent.toFixed(1)}%)`}${p.environmentFlagged ? ' *' : ''}`,
  }));
  const x = nominal('point', pointsTitle(c.points.map((p) => p.point)), { sort: null, axis: { labelAngle: 0, labelLimit: 240 } });
  const paths = [...new Set([pathsOf(baseline.spec), pathsOf(candidate.spec)])].join(' | ');
  const engines = [...new Set([baseline.spec.engine, candidate.spec.engine])].join(' vs ');
  return {
    $schema: SCHEMA,
    ...SIZE,
    title: {
      text: `A/B ${y.title.split(' (')[0]}: ${paths}`,
      subtitle: `engine ${engines}; baseline ${c.baseline} vs candidate ${c.candidate}; ${Math.round(c.confidence * 100)}% intervals${c.environmentDifferences.some((d) => !d.variedByUser) ? '; * environment differs' : ''}`,
    },
    layer: [
      {
        data: { values: bars },
        layer: [
          { name: 'bars', mark: { type: 'bar' }, encoding: { x, xOffset: { field: 'side', sort: ['baseline', 'candidate'] }, y: quantitative('mean', y.title), color: nominal('side', null, { sort: ['baseline', 'candidate'] }), tooltip: [{ field: 'point' }, { field: 'side' }, { field: 'mean', title: y.title }, { field: 'n' }] } },
          intervalLayer(x, y.title, { xOffset: { field: 'side', sort: ['baseline', 'candidate'] } }),
        ],
      },
      { name: 'verdicts', data: { values: verdicts }, mark: { type: 'text', dy: -8 }, encoding: { x, y: quantitative('top', y.title), text: { field: 'verdict' } } },
    ],
  };
}

/** The swept fields of a set of points, for the axis under them. */
function pointsTitle(points: SweepPoint[]): string {
  const fields = DIMENSIONS.filter((d) => points.some((p) => p[d] !== undefined));
  return fields.length ? `point (${fields.join(', ')})` : 'point';
}

type ChangeSeries = components['schemas']['ChangeSeries'];
const [RUN_FINISHED, MEAN, SEARCH_AXIS] = ['run finished', 'mean', 'rate found (pps per flow)'];

/** A change point's headline: `−9.8% [−11.2, −8.4] (worse)`, or the difference in the axis's unit when the mean before was 0. */
function stepText(change: ChangeSeries['change'], scale: number, unit: string): string {
  const signed = (x: number, digits: number) => `${x >= 0 ? '+' : '−'}${Math.abs(x).toFixed(digits)}`;
  if (change.relative !== null && change.relativeInterval) {
    const [low, high] = change.relativeInterval;
    return `${signed(change.relative * 100, 1)}% [${signed(low! * 100, 1)}, ${signed(high! * 100, 1)}] (${change.verdict})`;
  }
  const [low, high] = change.differenceInterval;
  return `${signed(change.difference / scale, 3)} ${unit} [${signed(low! / scale, 3)}, ${signed(high! / scale, 3)}] (${change.verdict})`;
}

/**
 * A change point on its series: a point per run against its end, the two segments' means as
 * lines over their runs, and the step as a dashed rule between the last run before it and the
 * first after; the title gives the step with its interval, the subtitle what changed.
 */
export function changeChart(change: ChangeSeries['change'], points: ChangeSeries['points']): ChartSpec {
  const axis = change.series.figure === 'searchPacketsPerSecond' ? { title: SEARCH_AXIS, scale: 1 } : columnAxis(change.series.figure);
  const [c, s] = [change, change.series];
  const goal = s.goal ? `, ${s.goal.algorithm} loss ${s.goal.lossRatio}${s.goal.exceedRatio === null ? '' : ` exceed ${s.goal.exceedRatio}`}` : '';
  const runs = points.map((p) => ({ finishedAt: p.finishedAt, value: p.value / axis.scale }));
  const first = points.findIndex((p) => p.runId === c.after.runId);
  // Each segment's mean over its own runs, where the series still holds them (its last 200).
  // (A step whose runs before it left the series is drawn from its first run after; one out of it altogether, without its means.)
  const segments = [
    ...(first > 0 ? [{ segment: 'before', from: points[Math.max(0, first - c.before.runs)]!.finishedAt, to: c.before.finishedAt, mean: c.before.mean / axis.scale, runs: c.before.runs }] : []),
    ...(first >= 0 ? [{ segment: 'after', from: c.after.finishedAt, to: points[Math.min(points.length, first + c.after.runs) - 1]!.finishedAt, mean: c.after.mean / axis.scale, runs: c.after.runs }] : []),
  ];
  const at = new Date((Date.parse(c.before.finishedAt) + Date.parse(c.after.finishedAt)) / 2).toISOString();
  const changed = c.changed.map((x) => `${x.end} ${x.agent}:${x.interface} ${x.field} ${JSON.stringify(x.before)} → ${JSON.stringify(x.after)}`);
  const x = { field: 'finishedAt', type: 'temporal', title: RUN_FINISHED };
  return {
    $schema: SCHEMA,
    ...SIZE,
    title: {
      text: `${axis.title.split(' (')[0]} ${stepText(c, axis.scale, axis.title.replace(/^.*\((.*)\)$/, '$1'))}: ${endpoint(s.src)} -> ${endpoint(s.dst)}`,
      subtitle: [`schedule ${s.schedule}${goal}, flow ${s.flowIndex}${s.direction === 'reverse' ? ' (reverse)' : ''}${Object.keys(s.point).length ? `, ${pointLabel(s.point)}` : ''}; p = ${c.pValue.toPrecision(2)}`, changed.length ? `changed: ${changed.join('; ')}` : 'nothing recorded changed in either end'],
    },
    layer: [
      { name: 'runs', data: { values: runs }, mark: { type: 'point', filled: true, size: 30 }, encoding: { x, y: quantitative('value', axis.title, { scale: { zero: false } }), tooltip: [{ field: 'finishedAt', type: 'temporal' }, { field: 'value', title: axis.title }] } },
      { name: 'means', data: { values: segments }, mark: { type: 'rule', strokeWidth: 2 }, encoding: { x: { ...x, field: 'from' }, x2: { field: 'to' }, y: quantitative('mean', axis.title, { scale: { zero: false } }), color: nominal('segment', null, { sort: ['before', 'after'] }), tooltip: [{ field: 'segment' }, { field: 'mean', title: MEAN, format: '.6~f' }, { field: 'runs' }] } },
      { name: 'step', data: { values: [{ at }] }, mark: { type: 'rule', strokeDash: [4, 4], color: 'firebrick' }, encoding: { x: { ...x, field: 'at' } } },
    ],
  };
}
