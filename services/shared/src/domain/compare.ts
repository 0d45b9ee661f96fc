/**
 * A/B comparison of two campaigns: points matched by their sweep values, Welch's t-test on a
 * figure in its own direction (the headline unless asked), a verdict, every other figure
 * measured, and what differed in the environment under them.
 */
import { byPoint, headline } from './points.js';
import { METRIC_NAMES, RUN_METRICS, type MetricName, type RunMetric } from './figure-directions.js';
import type { EndDiagnostics, Job, JobSpec, Run, SweepPoint } from './contract.js';
import type { components } from '../generated/openapi.js';
import { DIMENSIONS, pointKey, pointLabel, sweptValues } from './plan.js';
import { alignTable } from './text-table.js';
import { CONFIDENCE, clipToDomain, holm, summarize, welch, type Summary, type Welch } from './statistics.js';
import { FIGURE_DOMAINS, minChange } from './figure-domains.js';
import { campaignOf } from './campaigns/index.js';
import type { SearchRate } from './campaigns/campaign.js';

export type Comparison = components['schemas']['Comparison'];
/** Two jobs compared on their own runs; the API adds the history's change points between them (changesBetween). */
export type JobComparison = Omit<Comparison, 'changesBetween'> & Partial<Pick<Comparison, 'changesBetween'>>;
type ComparedPoint = components['schemas']['ComparedPoint'];
type SearchComparison = components['schemas']['SearchComparison'];
type MetricDirection = components['schemas']['MetricDirection'];
type Difference = Comparison['environmentDifferences'][number];
type Environment = NonNullable<EndDiagnostics['environment']>;

const ENVIRONMENT: (keyof Environment | 'engineVersion')[] = ['kernel', 'driver', 'firmware', 'mtu', 'speedBitsPerSecond', 'rmemMax', 'wmemMax', 'engineVersion'];
/** Spec fields that, when they differ, explain a difference in these environment fields. */
const EXPLAINED_BY: Partial<Record<(typeof ENVIRONMENT)[number], (keyof JobSpec)[]>> = { engineVersion: ['engine'] };

/** What the user varied between the two jobs: the spec fields (other than labels) that differ. */
function varied(a: JobSpec, b: JobSpec): string[] {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)].filter((k) => k !== 'labels' && k !== 'sweep' && k !== 'repeat'));
  return [...keys].filter((k) => JSON.stringify(a[k as keyof JobSpec]) !== JSON.stringify(b[k as keyof JobSpec])).sort();
}

/** Per end position (`flow 0 sender`), each environment field's values over the runs. */
function environments(runs: Run[]): Map<string, Map<string, Set<string>>> {
  const found = new Map<string, Map<string, Set<string>>>();
  for (const run of runs) {
    run.flows.forEach((flow, leg) => {
      for (const end of ['sender', 'receiver'] as const) {
        const d = flow.diagnostics[end];
        if (!d) continue;
        const where = `flow ${leg} ${end}`;
        const fields = found.get(where) ?? new Map<string, Set<string>>();
        found.set(where, fields);
        for (const field of ENVIRONMENT) {
          const value = field === 'engineVersion' ? d.engineVersion : d.environment?.[field];
          if (value === undefined) continue;
          fields.set(field, (fields.get(field) ?? new Set()).add(String(value)));
        }
      }
    });
  }
  return found;
}

function environmentDifferences(baseRuns: Run[], candRuns: Run[], userVaried: string[]): Difference[] {
  const base = environments(baseRuns);
  const cand = environments(candRuns);
  const out: Difference[] = [];
  for (const [where, fields] of base) {
    for (const [field, values] of fields) {
      const other = cand.get(where)?.get(field);
      if (!other) continue;
      const b = [...values].sort().join(', ');
      const c = [...other].sort().join(', ');
      if (b === c) continue;
      const explainedBy = (EXPLAINED_BY[field as keyof typeof EXPLAINED_BY] ?? []).filter((k) => userVaried.includes(k));
      out.push({ where, field, baseline: b, candidate: c, variedByUser: explainedBy.length > 0 });
    }
  }
  return out;
}

/** The metrics either job measured (a value in some succeeded run), in catalogue order. */
function measured(baseline: Job, baseRuns: Run[], candidate: Job, candRuns: Run[]): RunMetric[] {
  const has = (metric: RunMetric, job: Job, runs: Run[]) => runs.some((r) => r.status === 'succeeded' && metric.value(job.spec, r) !== null);
  return METRIC_NAMES.map((name) => RUN_METRICS[name]).filter((m) => has(m, baseline, baseRuns) || has(m, candidate, candRuns));
}

const direction = (m: RunMetric): MetricDirection => ({ name: m.name, unit: m.unit, higherIsBetter: m.higherIsBetter });

/** One point of one figure, tested: both sides' summaries and Welch's test, or why there is no test. */
interface Tested {
  point: SweepPoint;
  b: Summary;
  c: Summary;
  w: Welch;
  reason: string | null;
}

const side = (s: Summary): ComparedPoint['baseline'] => ({ n: s.n, mean: s.mean, standardDeviation: s.standardDeviation, confidenceInterval: s.confidenceInterval, intervalMethod: s.intervalMethod });

/**
 * The point's verdict on figure `m` from its Holm-adjusted p: `better` or `worse` when it is
 * below alpha and the change is at least the figure's least change (minChange) and, from a
 * baseline other than 0, at least `minChangePercent` of it.
 */
function judge(m: RunMetric, t: Tested, adjusted: number | null, rules: { alpha: number; minChangePercent: number; flagged: boolean }): ComparedPoint {
  const { b, c, w, reason } = t;
  const both = b.n > 0 && c.n > 0;
  const fromZero = both && b.mean === 0;
  const pct = (x: number) => (x / b.mean) * 100;
  const changePercent = both && !fromZero ? pct(w.difference) : null;
  // The candidate's mean cannot leave the figure's domain: nor can the difference, the baseline held at its mean.
  const domain = FIGURE_DOMAINS[m.name];
  const cut = b.n >= 2 && c.n >= 2 ? clipToDomain(w.differenceInterval, { ...domain, min: domain.min - b.mean, max: domain.max === null ? null : domain.max - b.mean }) : null;
  const large = Math.abs(w.difference) >= minChange(m) && (changePercent === null || Math.abs(changePercent) >= rules.minChangePercent);
  const significant = !reason && adjusted !== null && adjusted < rules.alpha && large;
  // A rise is better only for a figure where higher is better: a longer round trip is worse.
  const verdict: ComparedPoint['verdict'] = reason ? 'not comparable' : significant ? (w.difference > 0 === m.higherIsBetter ? 'better' : 'worse') : 'no significant change';
  const change = changePercent !== null ? `, ${changePercent >= 0 ? '+' : ''}${changePercent.toFixed(2)}%` : fromZero ? ', from 0 (no % change)' : '';
  return {
    point: t.point,
    baseline: side(b),
    candidate: side(c),
    difference: both ? w.difference : null,
    differenceInterval: cut?.interval ?? null,
    differenceIntervalMethod: cut ? (cut.clipped ? 'clipped-t' : 't') : null,
    changePercent,
    changePercentInterval: cut && !fromZero ? [pct(cut.interval[0]), pct(cut.interval[1])] : null,
    changePercentReason: fromZero ? 'the baseline mean is 0: a change from 0 has no percentage; `difference` is the change' : null,
    pValue: reason ? null : w.pValue,
    adjustedPValue: reason ? null : adjusted,
    verdict,
    judged: `${m.name} (${m.higherIsBetter ? 'higher' : 'lower'} is better): ${b.n ? fmt(b.mean, m) : '-'} -> ${c.n ? fmt(c.mean, m) : '-'} ${m.table.unit}${change}: ${verdict}`,
    reason,
    environmentFlagged: rules.flagged,
  };
}

const sideOf = (r: SearchRate | undefined): SearchComparison['baseline'] => (r ? { algorithm: r.algorithm, lower: r.lower, upper: r.upper, rate: r.rate } : null);
/** The candidate's rate against the baseline's, in percent of it; null when either has none (or the baseline's is 0). */
const rateChange = (b: SearchRate, c: SearchRate) => (b.rate && c.rate !== null ? ((c.rate - b.rate) / b.rate) * 100 : null);
const bracketText = (r: SearchRate | undefined) => (r ? `${r.algorithm} [${r.lower ?? '-'}, ${r.upper ?? '-'}] ${r.rate === null ? '-' : r.rate.toFixed(1)}` : 'no search');

/**
 * Two rates of one goal, each with its lower bound: better when the candidate met the goal at
 * or above the load where the baseline failed it and its rate is at least `minChangePercent`
 * higher; worse when it failed the goal at or below where the baseline met it and its rate is
 * that much lower. A missing upper bound (max carried) is no load where the goal failed.
 */
export function searchVerdict(b: SearchRate, c: SearchRate, minChangePercent: number): 'better' | 'worse' | 'no significant change' {
  const change = rateChange(b, c) ?? 0;
  const above = b.upper !== null && c.lower !== null && c.lower >= b.upper;
  const below = c.upper !== null && b.lower !== null && c.upper <= b.lower;
  return above && change >= minChangePercent ? 'better' : below && change <= -minChangePercent ? 'worse' : 'no significant change';
}

/**
 * Two searches' rates, point by point and goal by goal (matched by the point and the loss ratio,
 * and the exceed ratio when both have one), judged by their brackets: a search has one rate per
 * goal, not repeats, so the brackets are its uncertainty. Better when the candidate's lower
 * bound is at or above the baseline's upper one (it met the goal where the baseline failed it)
 * and its rate is at least `minChangePercent` higher; worse when its upper bound is at or below
 * the baseline's lower one and its rate that much lower. The rates are forwarded rates on both
 * sides (the conditional throughput; the binary search's rate found less its loss there), so a
 * binary search and an MLRsearch of one path compare equal.
 */
export function compareSearches(baseline: Job, baseRuns: Run[], candidate: Job, candRuns: Run[], minChangePercent: number): SearchComparison[] {
  // Each campaign keeps its finished trials itself (trialsByPoint), as its report does.
  const ratesOf = (job: Job, runs: Run[]) => campaignOf(job.spec).searchRates?.(job, runs) ?? null;
  const [base, cand] = [ratesOf(baseline, baseRuns), ratesOf(candidate, candRuns)];
  if (!base && !cand) return [];
  const same = (a: SearchRate, b: SearchRate) => pointKey(a.point) === pointKey(b.point) && a.lossRatio === b.lossRatio && (a.exceedRatio === null || b.exceedRatio === null || a.exceedRatio === b.exceedRatio);
  // Every matching pair, so that the result does not depend on which job is the baseline (a binary NDR against two MLRsearch NDR goals is two rows either way).
  const pairs: [SearchRate | undefined, SearchRate | undefined][] = (base ?? []).flatMap((b): [SearchRate | undefined, SearchRate | undefined][] => {
    const matched = (cand ?? []).filter((c) => same(b, c));
    return matched.length ? matched.map((c) => [b, c]) : [[b, undefined]];
  });
  for (const c of cand ?? []) if (!pairs.some(([, paired]) => paired === c)) pairs.push([undefined, c]);
  return pairs.map(([b, c]) => {
    const at = (b ?? c)!;
    const missing = !b ? `the baseline ${base ? 'has no such goal at this point' : 'is no search'}` : !c ? `the candidate ${cand ? 'has no such goal at this point' : 'is no search'}`
      : b.rate === null || b.lower === null ? 'the baseline found no rate here (no lower bound)' : c.rate === null || c.lower === null ? 'the candidate found no rate here (no lower bound)' : null;
    const changePercent = missing ? null : rateChange(b!, c!);
    const verdict: SearchComparison['verdict'] = missing ? 'not comparable' : searchVerdict(b!, c!, minChangePercent);
    // Nothing is known above a max that carried: the candidate cannot be shown above such a baseline, nor such a candidate below a baseline.
    const open = missing ? [] : [
      ...(b!.upper === null ? ['the baseline found no upper bound (its max carried), so the candidate cannot be shown better'] : []),
      ...(c!.upper === null ? ['the candidate found no upper bound (its max carried), so it cannot be shown worse'] : []),
    ];
    const change = changePercent === null ? '' : `, ${changePercent >= 0 ? '+' : ''}${changePercent.toFixed(2)}%`;
    return {
      // A binary side has no exceed ratio: the pair's is the MLRsearch goal's only when both are; a side alone keeps its own.
      point: at.point, lossRatio: at.lossRatio, exceedRatio: b && c ? (b.exceedRatio !== null && c.exceedRatio !== null ? b.exceedRatio : null) : at.exceedRatio,
      baseline: sideOf(b), candidate: sideOf(c), changePercent, verdict,
      judged: `loss ${at.lossRatio}: ${bracketText(b)} -> ${bracketText(c)} pps per flow${change}: ${verdict}`,
      reason: missing ?? (open.join('; ') || null),
    };
  });
}

/**
 * A/B of two jobs on `metricName` (default: the baseline's headline), each point's verdict in
 * that figure's own direction; `metrics` does the same for every figure either job measured.
 * Each figure's points are one family: their p-values are Holm-adjusted together and the
 * verdicts follow the adjusted ones.
 */
export function compareJobs(baseline: Job, baseRuns: Run[], candidate: Job, candRuns: Run[], minChangePercent = 1, metricName?: MetricName): JobComparison {
  const metric = headline(baseline.spec);
  const judged = RUN_METRICS[metricName ?? metric.name];
  const userVaried = varied(baseline.spec, candidate.spec);
  const notComparable = !metricName && metric.name !== headline(candidate.spec).name ? `the baseline measures ${metric.name}, the candidate ${headline(candidate.spec).name}` : null;
  const differences = environmentDifferences(baseRuns.filter((r) => r.status === 'succeeded'), candRuns.filter((r) => r.status === 'succeeded'), userVaried);
  const rules = { alpha: 1 - CONFIDENCE, minChangePercent, flagged: differences.some((d) => !d.variedByUser) };
  const keys = new Map<string, SweepPoint>();
  // Each job's points as its campaign runs them: a factorial's every sweep point in its four cells.
  const pointsOfJob = (spec: JobSpec) => campaignOf(spec).runShapes(spec).map((shape) => shape.point);
  for (const p of [...pointsOfJob(baseline.spec), ...pointsOfJob(candidate.spec)]) keys.set(pointKey(p), p);
  const [baseByPoint, candByPoint] = [byPoint(baseRuns), byPoint(candRuns)];
  const pointsOf = (m: RunMetric): ComparedPoint[] => {
    const values = (spec: JobSpec, runs: Run[] | undefined) => (runs ?? []).filter((r) => r.status === 'succeeded').map((r) => m.value(spec, r)).filter((v): v is number => v !== null);
    const tested = [...keys].map(([key, point]): Tested => {
      const b = summarize(values(baseline.spec, baseByPoint.get(key)), CONFIDENCE, FIGURE_DOMAINS[m.name]);
      const c = summarize(values(candidate.spec, candByPoint.get(key)), CONFIDENCE, FIGURE_DOMAINS[m.name]);
      const missing = b.n === 0 ? 'the baseline has no succeeded run at this point' : c.n === 0 ? 'the candidate has no succeeded run at this point' : null;
      const few = !missing && (b.n < 2 || c.n < 2) ? 'a verdict needs at least 2 succeeded runs on each side' : null;
      return { point, b, c, w: welch(b, c, CONFIDENCE), reason: notComparable ?? missing ?? few };
    });
    const adjusted = holm(tested.map((t) => (t.reason ? null : t.w.pValue)));
    return tested.map((t, i) => judge(m, t, adjusted[i] ?? null, rules));
  };
  const all = measured(baseline, baseRuns, candidate, candRuns);
  if (!all.includes(judged)) all.unshift(judged);
  const metrics = all.map((m) => ({ metric: direction(m), minChange: minChange(m), points: pointsOf(m) }));
  return {
    baseline: baseline.id,
    candidate: candidate.id,
    headline: metric,
    metric: direction(judged),
    higherIsBetter: judged.higherIsBetter,
    confidence: CONFIDENCE,
    correction: { method: 'holm', family: 'figure', alpha: rules.alpha },
    minChangePercent,
    minChange: minChange(judged),
    variedByUser: userVaried,
    environmentDifferences: differences,
    points: metrics.find((x) => x.metric.name === judged.name)!.points,
    metrics,
    searches: compareSearches(baseline, baseRuns, candidate, candRuns, minChangePercent),
  };
}

const fmt = (value: number, m: RunMetric) => (value / m.table.scale).toFixed(m.table.digits);

/**
 * Seed 001's table: points grouped by every swept field but the last, a line per point with
 * orig, new and % change (with its interval, the raw and the Holm-adjusted p and the verdict),
 * and each group's average change; then every other figure the jobs measured, a line per point
 * and figure. A change from a baseline of 0 is `Δ` in the figure's unit.
 */
export function comparisonTable(c: JobComparison, dimensions: string[]): string {
  const judged = RUN_METRICS[c.metric.name];
  const way = (m: { higherIsBetter: boolean }) => (m.higherIsBetter ? 'higher is better' : 'lower is better');
  const last = dimensions.at(-1);
  const groupOf = (p: SweepPoint) => pointLabel(Object.fromEntries(Object.entries(p).filter(([k]) => k !== last)) as SweepPoint);
  const lineOf = (p: SweepPoint) => (last ? pointLabel({ [last]: p[last as keyof SweepPoint] } as SweepPoint) : 'all');
  const confidence = `${Math.round(c.confidence * 100)}% CI`;
  const out = [`baseline ${c.baseline}`, `candidate ${c.candidate}`, `judged: ${judged.name} (${way(judged)})`, `${judged.table.unit}: orig, new, % change (${confidence}), p, Holm-adjusted p over the figure's points, verdict`];
  if (c.variedByUser.length) out.push(`varied: ${c.variedByUser.join(', ')}`);
  for (const d of c.environmentDifferences) out.push(`environment: ${d.where} ${d.field}: ${d.baseline} -> ${d.candidate}${d.variedByUser ? '' : '  (not varied by you: flagged)'}`);
  for (const x of c.changesBetween ?? []) out.push(`between them: a change point in schedule ${x.series.schedule}'s ${x.series.figure} on ${x.series.src.agent}:${x.series.src.interface} -> ${x.series.dst.agent}:${x.series.dst.interface}, ${x.relative === null ? `${x.difference} ${x.unit}` : `${(x.relative * 100).toFixed(1)}%`} (${x.verdict}) after the run of ${x.after.finishedAt}${x.acknowledged ? `, acknowledged ${x.acknowledged.as}` : ''} (${x.id})`);
  const signed = (x: number, m: RunMetric) => `${x >= 0 ? '+' : ''}${fmt(x, m)}`;
  const fromZero = (p: ComparedPoint) => p.changePercentReason !== null && p.difference !== null;
  const cells = (p: ComparedPoint, m: RunMetric) => [
    p.baseline.n ? fmt(p.baseline.mean, m) : '-',
    p.candidate.n ? fmt(p.candidate.mean, m) : '-',
    p.changePercent !== null ? p.changePercent.toFixed(2) : fromZero(p) ? `Δ${signed(p.difference!, m)}` : '-',
    p.changePercentInterval
      ? `[${p.changePercentInterval[0]!.toFixed(2)}, ${p.changePercentInterval[1]!.toFixed(2)}]`
      : fromZero(p) && p.differenceInterval ? `Δ[${fmt(p.differenceInterval[0]!, m)}, ${fmt(p.differenceInterval[1]!, m)}]` : '',
    p.pValue === null ? '' : `p=${p.pValue.toPrecision(2)}`,
    p.adjustedPValue === null ? '' : `adj=${p.adjustedPValue.toPrecision(2)}`,
    p.verdict + (p.environmentFlagged ? ' (environment differs)' : ''),
  ];
  if (c.searches.length) {
    out.push('', 'searches: per point and loss goal, [lower, upper] bound and the rate compared (pps per flow), % change, verdict from the brackets');
    out.push(alignTable(c.searches.map((s) => [`  ${pointLabel(s.point)}`, s.judged, s.reason ?? ''])));
  }
  const groups = new Map<string, ComparedPoint[]>();
  for (const p of c.points) groups.set(groupOf(p.point), [...(groups.get(groupOf(p.point)) ?? []), p]);
  for (const [group, points] of groups) {
    out.push('', group === '-' ? 'all points' : group);
    out.push(alignTable(points.map((p) => [`  ${lineOf(p.point)}`, ':', ...cells(p, judged)])));
    const changes = points.map((p) => p.changePercent).filter((v): v is number => v !== null);
    if (changes.length) out.push(`  Average : ${(changes.reduce((a, b) => a + b, 0) / changes.length).toFixed(2)}%`);
  }
  out.push('', `every figure measured: orig, new, % change (${confidence}), p, Holm-adjusted p over the figure's points, verdict in its own direction`);
  const rows = c.metrics.flatMap(({ metric, points }) => {
    const m = RUN_METRICS[metric.name];
    return points.map((p) => [`  ${pointLabel(p.point)}`, m.name, m.table.unit, way(m), ...cells(p, m)]);
  });
  out.push(alignTable(rows));
  if (c.metrics.some(({ points }) => points.some(fromZero))) out.push('Δ: the change from a baseline of 0, in the figure\'s unit (a change from 0 has no %)');
  return out.join('\n') + '\n';
}

/** The fields either job sweeps, in sweep order. */
export function sweptFields(a: JobSpec, b: JobSpec): string[] {
  return DIMENSIONS.filter((d) => sweptValues(a, d) !== undefined || sweptValues(b, d) !== undefined);
}
