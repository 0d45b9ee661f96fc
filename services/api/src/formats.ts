import type { operations } from '@niclab/shared/generated/openapi';
import type { Job, Run } from '@niclab/shared/domain/contract';
import { comparisonTable, sweptFields, type Comparison } from '@niclab/shared/domain/compare';
import { reportCsv, reportTable, type Report } from '@niclab/shared/domain/report';
import { changeChart, comparisonChart, reportChart } from '@niclab/shared/domain/plots';
import type { ChangePoint, SeriesRun } from '@niclab/shared/stores/changes';
import type { ChartSpec } from '@niclab/shared/domain/plots';

/** vega is loaded with the first plot asked for, not at every API start (0.4 s of CPU). */
const renderSvg = async (spec: ChartSpec) => (await import('./render-svg.js')).renderSvg(spec);

/**
 * The formats the API renders a report and a comparison in besides JSON, one entry each (as
 * flent keeps a class per output format): adding a format is its entry here and its name in
 * the contract's `format` enum, which the keys' type is taken from, so neither can be missed.
 */
export interface Rendered<Media extends string = string> {
  /** One of the media types the operation declares, as the handler's typing checks. */
  contentType: `${Media}; charset=utf-8`;
  text: string;
  headers?: Record<string, string>;
}

type FormatOf<Op extends 'getReport' | 'compareJobs' | 'getChange'> = Exclude<NonNullable<NonNullable<operations[Op]['parameters']['query']>['format']>, 'json'>;

export interface ReportInput { id: string; job: Job; runs: Run[]; report: Report }
export interface ComparisonInput { baseline: Job; candidate: Job; comparison: Comparison }
export interface ChangeInput { change: ChangePoint; points: SeriesRun[] }

type ReportMedia = 'text/csv' | 'text/plain' | 'image/svg+xml';
type ComparisonMedia = 'text/plain' | 'image/svg+xml';

export const REPORT_FORMATS: Record<FormatOf<'getReport'>, (input: ReportInput) => Rendered<ReportMedia> | Promise<Rendered<ReportMedia>>> = {
  csv: ({ id, report }) => ({ contentType: 'text/csv; charset=utf-8', text: reportCsv(report), headers: { 'Content-Disposition': `attachment; filename="niclab-${id}.csv"` } }),
  table: ({ job, runs, report }) => ({ contentType: 'text/plain; charset=utf-8', text: reportTable(job, runs, report) }),
  svg: async ({ job, runs, report }) => ({ contentType: 'image/svg+xml; charset=utf-8', text: await renderSvg(reportChart(job, runs, report)) }),
};

export const COMPARISON_FORMATS: Record<FormatOf<'compareJobs'>, (input: ComparisonInput) => Rendered<ComparisonMedia> | Promise<Rendered<ComparisonMedia>>> = {
  table: ({ baseline, candidate, comparison }) => ({ contentType: 'text/plain; charset=utf-8', text: comparisonTable(comparison, sweptFields(baseline.spec, candidate.spec)) }),
  svg: async ({ baseline, candidate, comparison }) => ({ contentType: 'image/svg+xml; charset=utf-8', text: await renderSvg(comparisonChart(baseline, candidate, comparison)) }),
};

export const CHANGE_FORMATS: Record<FormatOf<'getChange'>, (input: ChangeInput) => Promise<Rendered<'image/svg+xml'>>> = {
  svg: async ({ change, points }) => ({ contentType: 'image/svg+xml; charset=utf-8', text: await renderSvg(changeChart(change, points)) }),
};

/** A rendered format as a handler's reply. */
export const reply = <Media extends string>({ contentType, text, headers }: Rendered<Media>) => ({ status: 200 as const, raw: { contentType, text }, ...(headers ? { headers } : {}) });
