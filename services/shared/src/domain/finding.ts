/**
 * What an ended job found, in one line of the job list (the contract's JobFinding): a copy of
 * one figure of its report, where it was taken, and what limited it there.
 */
import type { Job, Run } from './contract.js';
import type { components } from '../generated/openapi.js';
import { buildReport, type Report } from './report.js';
import { commonBottleneck } from './matrix-report.js';
import { pointKey, pointLabel } from './plan.js';
import { figure } from './figures/catalogue.js';
import { byPoint } from './points.js';

export type JobFinding = components['schemas']['JobFinding'];

const endpoint = (e: { agent: string; interface: string }) => `${e.agent}:${e.interface}`;

/** A binary search's found rate at its first point, per flow, with what failed above it. */
function searchFinding(report: Report): JobFinding | null {
  const search = report.searches?.[0];
  if (!search?.found) return null;
  const verdict = search.limitedBy ?? search.stoppedBy;
  const reason = search.bracket.high === null ? `every rate up to ${search.bracket.max} datagrams/s passed` : `${search.bracket.high} datagrams/s failed by ${search.limitedBy ?? 'error'}`;
  return { from: 'search', figure: 'bitsPerSecond', unit: 'bits/s', value: search.found.bitsPerSecond, point: search.point, verdict, reason };
}

/** An MLRsearch's first goal that has a Conditional Throughput, per flow. */
function mlrFinding(report: Report): JobFinding | null {
  for (const result of report.mlrSearches ?? []) {
    const goal = result.goals.find((g) => g.conditionalThroughput);
    if (!goal?.conditionalThroughput) continue;
    const verdict = result.state === 'could_not_conclude' ? result.stoppedBy : goal.regular ? 'regular' : 'irregular';
    const reason = `goal loss ratio ${goal.goal.lossRatio}${goal.irregular ? `: ${goal.irregular}` : ''}`;
    return { from: 'mlrsearch', figure: 'bitsPerSecond', unit: 'bits/s', value: goal.conditionalThroughput.bitsPerSecond, point: result.point, verdict, reason };
  }
  return null;
}

/** A group's weakest measured pair (the lowest rate, the slowest round trip) over every point. */
function pairFinding(report: Report, lowerIsBetter: boolean): JobFinding | null {
  const cells = (report.matrix ?? []).flatMap((m) => m.sources.flatMap((from, r) => m.destinations.map((to, c) => ({ point: m.point, from, to, cell: m.cells[r]?.[c] ?? null }))))
    .filter((x) => x.cell?.verdict === 'measured' && x.cell.value);
  if (cells.length === 0) return null;
  const weakest = cells.reduce((worst, x) => ((lowerIsBetter ? x.cell!.value!.mean > worst.cell!.value!.mean : x.cell!.value!.mean < worst.cell!.value!.mean) ? x : worst));
  const bottleneck = weakest.cell!.bottleneck;
  return {
    from: 'pair', figure: report.headline.name, unit: report.headline.unit, value: weakest.cell!.value!.mean, point: weakest.point,
    verdict: bottleneck?.verdict ?? null,
    reason: `the weakest of ${cells.length} measured pair${cells.length === 1 ? '' : 's'}: ${endpoint(weakest.from)} -> ${endpoint(weakest.to)}${bottleneck ? `; ${bottleneck.reason}` : ''}`,
  };
}

/** The sweep point whose total headline mean is best, with the verdict most of its legs gave. */
function pointFinding(report: Report, runs: Run[], lowerIsBetter: boolean): JobFinding | null {
  const name = report.headline.name;
  const measured = report.points.filter((p) => p.total[name]);
  if (measured.length === 0) return null;
  const best = measured.reduce((a, p) => ((lowerIsBetter ? p.total[name]!.mean < a.total[name]!.mean : p.total[name]!.mean > a.total[name]!.mean) ? p : a));
  const legs = (byPoint(runs).get(pointKey(best.point)) ?? []).filter((r) => r.status === 'succeeded' && r.latencyAt === undefined).flatMap((r) => r.flows);
  const bottleneck = commonBottleneck(legs);
  return { from: 'point', figure: name, unit: report.headline.unit, value: best.total[name]!.mean, point: best.point, verdict: bottleneck?.verdict ?? null, reason: bottleneck?.reason ?? null };
}

/** What the job found once it ended; null when no run measured its figure. */
export function jobFinding(job: Job, runs: Run[]): JobFinding | null {
  const report = buildReport(job, runs);
  const lowerIsBetter = report.headline.name === 'rttP50Seconds';
  if (report.searches) return searchFinding(report);
  if (report.mlrSearches) return mlrFinding(report);
  if (report.matrix) return pairFinding(report, lowerIsBetter);
  return pointFinding(report, runs, lowerIsBetter);
}

/** A finding as the job list says it: the figure in its display unit, where, and the verdict ('-' for none). */
export function findingText(finding: JobFinding | null): { found: string; verdict: string } {
  if (!finding) return { found: '-', verdict: '-' };
  const display = figure(finding.figure)!.display;
  const where = pointLabel(finding.point);
  const perFlow = finding.from === 'search' || finding.from === 'mlrsearch' ? ' per flow' : '';
  return {
    found: `${(finding.value / display.scale).toFixed(display.digits)} ${display.unit}${perFlow}${where === '-' ? '' : ` at ${where}`}`,
    verdict: finding.verdict ?? '-',
  };
}
