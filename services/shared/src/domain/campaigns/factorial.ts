/**
 * A 2 × 2 factorial over which ends are tuned (seed 003: "If I adjusted the buffer sizes on one
 * system only, then the throughput was drastically reduced"): each sweep point in four cells,
 * none, the sender's block, the receiver's, both, each `repeat` times with the cells' order
 * rotated at every repetition so a drift of the machine does not pass for an effect. The report
 * gives the cell means, each end's main effect and the interaction, each as a linear contrast of
 * the cell means with the pooled within-cell variance (Student t on N − 4 degrees of freedom),
 * and says when tuning one end alone made the figure worse than tuning neither.
 */
import type { ErrorInfo, FieldError, Job, JobSpec, Run, SweepPoint } from '../contract.js';
import type { components } from '../../generated/openapi.js';
import { pointKey, pointLabel, repetitions, sweepPoints, type PlannedRun } from '../plan.js';
import { byPoint, headline, runValue } from '../points.js';
import { clipToDomain, contrast, pooledGroups, type PooledGroups } from '../statistics.js';
import { FIGURE_DOMAINS } from '../figure-domains.js';
import { columnOf } from '../figures/columns.js';
import { endTuningAt, ROLES, sameTuning, type Role } from '../end-tuning.js';
import { alignTable } from '../text-table.js';
import { everyRunOutcome, NOTHING_MORE, type Campaign, type CampaignStrategy } from './campaign.js';

export type FactorialResult = components['schemas']['FactorialResult'];
type Contrast = components['schemas']['Contrast'];
type Report = components['schemas']['Report'];
export type Cell = NonNullable<SweepPoint['tuned']>;

/** The cells in their first repetition's order. */
export const CELLS: readonly Cell[] = ['none', 'sender', 'receiver', 'both'];

/** The cells of repetition `repetition` (from 1), in the order they run: rotated by one at each repetition. */
export const cellOrder = (repetition: number): Cell[] => CELLS.map((_, i) => CELLS[(i + repetition - 1) % CELLS.length]!);

/** The contrasts' weights over the cells in CELLS order (none, sender, receiver, both). */
export const WEIGHTS = {
  /** Tuned less untuned sender, averaged over the receiver's two states. */
  sender: [-0.5, 0.5, -0.5, 0.5],
  receiver: [-0.5, -0.5, 0.5, 0.5],
  /** Half the difference of the sender's simple effects: with the receiver tuned, less without. */
  interaction: [0.5, -0.5, -0.5, 0.5],
  senderAlone: [-1, 1, 0, 0],
  receiverAlone: [-1, 0, 1, 0],
} as const;

/** Every run the factorial makes: per sweep point, its repetitions, each the four cells in rotation. */
export function planFactorial(spec: JobSpec): PlannedRun[] {
  const runs: PlannedRun[] = [];
  const { max } = repetitions(spec);
  for (const point of sweepPoints(spec)) {
    for (let repetition = 1; repetition <= max; repetition++) {
      for (const tuned of cellOrder(repetition)) runs.push({ index: runs.length, point: { ...point, tuned }, repetition });
    }
  }
  return runs;
}

/** Runs go in plan order: every cell's runs are made, none is settled early. */
class FactorialRuns implements CampaignStrategy {
  private readonly planned: PlannedRun[];

  constructor(spec: JobSpec) {
    this.planned = planFactorial(spec);
  }

  next(finished: ReadonlyMap<number, Run>): PlannedRun | null {
    return this.planned.find((plan) => !finished.has(plan.index)) ?? null;
  }

  expectedRuns(): number {
    return this.planned.length;
  }

  outcome(finished: ReadonlyMap<number, Run>): ErrorInfo | null {
    return everyRunOutcome(finished.values());
  }
}

/**
 * What the schema cannot say (it requires a fixed repeat of 2 or more and both blocks, not
 * empty): each block must change something over the shorthand, at every sweep point.
 */
function factorialErrors(spec: JobSpec): FieldError[] {
  return ROLES.filter((role) => spec.tuning?.[role] && sweepPoints(spec).every((point) => sameTuning(endTuningAt(spec, { ...point, tuned: role }, role), endTuningAt(spec, { ...point, tuned: 'none' }, role))))
    .map((role) => ({ field: `body.tuning.${role}`, message: `changes nothing over the shorthand (tuning's own fields): a factorial has nothing to toggle at the ${role}` }));
}

/** A contrast of the cells as the contract has it: significant when its interval leaves 0 out. */
function contrastOf(groups: PooledGroups | null, weights: readonly number[], confidence: number): Contrast {
  if (!groups) return { estimate: null, standardError: null, confidenceInterval: null, significant: null };
  const { estimate, standardError, interval } = contrast(groups, [...weights], confidence);
  return { estimate, standardError, confidenceInterval: interval, significant: interval ? interval[0] > 0 || interval[1] < 0 : null };
}

/** The figure a factorial judges: the job's headline, its direction, domain and how tables show it. */
export function factorialFigure(spec: JobSpec) {
  const { name, unit } = headline(spec);
  const column = columnOf(name)!;
  return { name, unit, higherIsBetter: column.figure.better === 'higher', domain: FIGURE_DOMAINS[name], display: column.figure.display, label: column.label };
}

/**
 * One sweep point's factorial from each cell's values (CELLS order): the cell means with pooled
 * intervals, the main effects, the interaction, each end alone against none, and the verdict.
 */
export function analyseFactorial(values: Record<Cell, number[]>, figure: ReturnType<typeof factorialFigure>, confidence: number): Omit<FactorialResult, 'point'> {
  const groups = CELLS.map((c) => values[c]);
  const runs = groups.reduce((n, g) => n + g.length, 0);
  const empty = CELLS.filter((c) => values[c].length === 0);
  const pooled = empty.length === 0 ? pooledGroups(groups) : null;
  const s = pooled?.pooledStandardDeviation ?? null;
  const cells = CELLS.map((tuned, i) => {
    const cell = groups[i]!;
    const n = cell.length;
    if (n === 0) return { tuned, n, mean: null, confidenceInterval: null, intervalMethod: null };
    // A cell's mean stands without the others; its interval needs the pooled variance of all four.
    const mean = cell.reduce((a, b) => a + b, 0) / n;
    const one = pooled ? contrast(pooled, CELLS.map((_, j) => (j === i ? 1 : 0)), confidence).interval : null;
    if (!one) return { tuned, n, mean, confidenceInterval: null, intervalMethod: null };
    const { interval, clipped } = clipToDomain(one, figure.domain);
    return { tuned, n, mean, confidenceInterval: interval, intervalMethod: clipped ? ('clipped-t' as const) : ('t' as const) };
  });
  const effects = { sender: contrastOf(pooled, WEIGHTS.sender, confidence), receiver: contrastOf(pooled, WEIGHTS.receiver, confidence), interaction: contrastOf(pooled, WEIGHTS.interaction, confidence) };
  const alone = { sender: contrastOf(pooled, WEIGHTS.senderAlone, confidence), receiver: contrastOf(pooled, WEIGHTS.receiverAlone, confidence) };
  const worse = (c: Contrast) => c.significant === true && (figure.higherIsBetter ? c.estimate! < 0 : c.estimate! > 0);
  const harmedBy = ROLES.filter((role) => worse(alone[role]));
  const base = { figure: figure.name, unit: figure.unit, higherIsBetter: figure.higherIsBetter, runs, degreesOfFreedom: Math.max(0, runs - CELLS.length), pooledStandardDeviation: s, cells, effects, alone, harmedBy };
  return { ...base, verdict: verdictOf(base, empty, figure, confidence) };
}

/** One sentence: why there is no analysis, or what tuning each end alone did and how the ends' tunings interact. */
function verdictOf(r: Omit<FactorialResult, 'point' | 'verdict'>, empty: Cell[], figure: ReturnType<typeof factorialFigure>, confidence: number): string {
  if (empty.length > 0) return `no analysis: the ${empty.join(', ')} cell${empty.length > 1 ? 's have' : ' has'} no succeeded run`;
  if (r.pooledStandardDeviation === null) return `no intervals: ${r.runs} runs in 4 cells leave no degrees of freedom for the pooled variance (repeat 2 or more gives them)`;
  const say = (c: Contrast) => `${amount(c.estimate!, figure)} [${amount(c.confidenceInterval![0]!, figure)}, ${amount(c.confidenceInterval![1]!, figure)}]`;
  const parts = ROLES.map((role: Role) => {
    const c = r.alone[role];
    const what = r.harmedBy.includes(role) ? 'harms' : c.significant ? 'improves' : 'does not significantly change';
    return `tuning the ${role} alone ${what} ${figure.label} (${say(c)} against none)`;
  });
  const interaction = r.effects.interaction;
  parts.push(interaction.significant ? `the two ends' tunings interact (${say(interaction)}): what one end's does depends on the other's` : `no significant interaction (${say(interaction)})`);
  return `${parts.join('; ')}; ${Math.round(confidence * 100)}% intervals`;
}

/** A value in the figure's table unit, signed. */
const amount = (value: number, figure: ReturnType<typeof factorialFigure>) => `${value >= 0 ? '+' : '−'}${Math.abs(value / figure.display.scale).toFixed(figure.display.digits)} ${figure.display.unit}`;

/** Each sweep point's factorial from the job's finished runs. */
export function factorialResults(spec: JobSpec, finished: Run[], confidence: number): FactorialResult[] {
  const figure = factorialFigure(spec);
  const grouped = byPoint(finished);
  return sweepPoints(spec).map((point) => {
    const values = Object.fromEntries(CELLS.map((tuned) => [tuned, (grouped.get(pointKey({ ...point, tuned })) ?? []).map((r) => runValue(spec, r)).filter((v): v is number => v !== null)])) as Record<Cell, number[]>;
    return { point, ...analyseFactorial(values, figure, confidence) };
  });
}

/** A factorial's lines in the text table: the cells, the contrasts, the verdict and the conventions. */
export function factorialTable(spec: JobSpec, result: FactorialResult, confidence: number): string[] {
  const figure = factorialFigure(spec);
  const { scale, unit, digits } = figure.display;
  const num = (v: number | null | undefined) => (v === null || v === undefined ? '-' : (v / scale).toFixed(digits));
  const ci = (interval: (number | undefined)[] | null) => (interval ? `${num(interval[0])} to ${num(interval[1])}` : '-');
  const level = `${Math.round(confidence * 100)}% CI`;
  const cells = [['cell', 'n', `mean ${unit}`, level], ...result.cells.map((c) => [c.tuned, String(c.n), num(c.mean), `${ci(c.confidenceInterval)}${c.intervalMethod === 'clipped-t' ? ' (clipped-t)' : ''}`])];
  const rows: [string, Contrast][] = [
    ['sender (main effect)', result.effects.sender], ['receiver (main effect)', result.effects.receiver], ['interaction', result.effects.interaction],
    ['sender alone - none', result.alone.sender], ['receiver alone - none', result.alone.receiver],
  ];
  const contrasts = [['contrast', `${unit}`, level, 'significant'], ...rows.map(([name, c]) => [name, num(c.estimate), ci(c.confidenceInterval), c.significant === null ? '-' : c.significant ? 'yes' : 'no'])];
  const at = Object.keys(result.point).length ? ` at ${pointLabel(result.point)}` : '';
  return [
    '', `factorial${at}: ${figure.label} (${result.figure}) by which ends are tuned; N ${result.runs}, pooled sd ${num(result.pooledStandardDeviation)} ${unit} on ${result.degreesOfFreedom} df`,
    alignTable(cells), alignTable(contrasts),
    `verdict: ${result.verdict}`,
    'main effect = mean(tuned) - mean(untuned) over the other end; interaction = half the difference of the simple effects; intervals: Student t on N - 4 df with the pooled within-cell sd',
  ];
}

/** One row of the CSV: a cell's mean with its pooled interval (`cellMean`, its `tuned` set), or a contrast (its estimate as the mean). */
export interface FactorialCsvRow {
  point: SweepPoint;
  metric: 'cellMean' | 'senderEffect' | 'receiverEffect' | 'interaction' | 'senderAlone' | 'receiverAlone';
  n: number;
  mean: number | null;
  /** The pooled within-cell sd for a cell; none for a contrast (its standard error is in the JSON). */
  standardDeviation: number | null;
  interval: (number | undefined)[] | null;
  method: 't' | 'clipped-t' | null;
}

/** A factorial's rows in the report's CSV, in the figure's base unit. */
export function factorialCsvRows(r: FactorialResult): FactorialCsvRow[] {
  const cells = r.cells.map((c): FactorialCsvRow => ({ point: { ...r.point, tuned: c.tuned }, metric: 'cellMean', n: c.n, mean: c.mean, standardDeviation: r.pooledStandardDeviation, interval: c.confidenceInterval, method: c.intervalMethod }));
  const contrasts = ([['senderEffect', r.effects.sender], ['receiverEffect', r.effects.receiver], ['interaction', r.effects.interaction], ['senderAlone', r.alone.sender], ['receiverAlone', r.alone.receiver]] as const)
    .map(([metric, c]): FactorialCsvRow => ({ point: r.point, metric, n: r.runs, mean: c.estimate, standardDeviation: null, interval: c.confidenceInterval, method: c.confidenceInterval ? 't' : null }));
  return [...cells, ...contrasts];
}

export const factorial: Campaign = {
  ...NOTHING_MORE,
  name: 'factorial',
  asks: (spec) => spec.factorial !== undefined,
  specErrors: factorialErrors,
  maxRuns: (spec) => ({ runs: sweepPoints(spec).length * CELLS.length * repetitions(spec).max, by: 'points' }),
  strategy: (spec) => new FactorialRuns(spec),
  runShapes: (spec) => sweepPoints(spec).flatMap((point) => CELLS.map((tuned) => ({ point: { ...point, tuned } }))),
  reportedPoints: (spec) => sweepPoints(spec).flatMap((point) => CELLS.map((tuned) => ({ ...point, tuned }))),
  addsDimensions: ['tuned'],
  reportSection: (job, finished, confidence) => ({ factorials: factorialResults(job.spec, finished.filter((r) => r.status === 'succeeded'), confidence) }),
  tableLines: (job: Job, report: Report) => ({ replacesPoints: false, lines: (report.factorials ?? []).flatMap((r) => factorialTable(job.spec, r, report.confidence)) }),
};
