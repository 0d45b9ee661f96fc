import { download, FINAL, flowsOf, getJson, getText, jobEvents, repeatRequest, sendJson, type Job, type Schemas } from '../api.js';
import { findingText, h, inlineSvg, mbps, pointText, statusBadge, table, when } from '../dom.js';
import { LiveChart } from '../live-chart.js';
import type { PageContext } from '../page.js';

type Report = Schemas['Report'];
type Summary = Schemas['NullableRepeatSummary'];

/** An interval as the report made it: `log-t` and `clipped-t` say so (see the contract's IntervalMethod). */
const interval = (s: Summary): string => (s ? `${mbps(s.confidenceInterval[0])}–${mbps(s.confidenceInterval[1])}${s.intervalMethod === 't' ? '' : ` (${s.intervalMethod})`}` : '–');

function specText(job: Job): string {
  const s = job.spec;
  const n = flowsOf(job).length;
  // An MLRsearch's trials each last their own duration: the runs' range, as they were made.
  const seconds = (job.runs ?? []).map((r) => r.duration ?? s.duration);
  const [shortest, longest] = seconds.length ? [Math.min(...seconds), Math.max(...seconds)] : [s.duration, s.duration];
  return `${s.engine} ${s.protocol} ${s.test}, ${n} flow${n > 1 ? 's' : ''}${s.group ? ` (a ${s.group.shape} group)` : ''}, ${shortest === longest ? shortest : `${shortest}–${longest}`} s per run`;
}

function downloadButton(label: string, path: string, filename: string, accept: string, fail: (e: unknown) => void): HTMLButtonElement {
  const button = h('button', { type: 'button', class: 'download', 'data-path': path }, label);
  button.addEventListener('click', () => void download(path, filename, accept).catch(fail));
  return button;
}

/** The iperf3 JSON each end kept, as the runs link it (`diagnostics.*.rawOutput`). */
function rawLinks(job: Job, fail: (e: unknown) => void): HTMLButtonElement[] {
  return (job.runs ?? []).flatMap((run) => run.flows.flatMap((flow, n) => (['sender', 'receiver'] as const).flatMap((end) => {
    const path = flow.diagnostics[end]?.rawOutput;
    return path ? [downloadButton(`run ${run.index} flow ${n} ${end} (iperf3 JSON)`, path, `${job.id}-run${run.index}-flow${n}-${end}.json`, 'application/json', fail)] : [];
  })));
}

function reportTable(report: Report): HTMLTableElement {
  const rows = report.points.flatMap((p) => [
    ...p.flows.map((f) => [pointText(p.point), `${f.flowIndex} ${f.direction}: ${f.from.agent}:${f.from.interface} → ${f.to.agent}:${f.to.interface}`, mbps(f.bitsPerSecond?.mean), interval(f.bitsPerSecond), f.bitsPerSecond?.n ?? 0, f.retransmits?.mean?.toFixed(1) ?? '–', f.udpLossRatio ? `${(f.udpLossRatio.mean * 100).toFixed(3)}%` : '–']),
    [pointText(p.point), 'total', mbps(p.total.bitsPerSecond?.mean), interval(p.total.bitsPerSecond), p.total.bitsPerSecond?.n ?? 0, p.total.retransmits?.mean?.toFixed(1) ?? '–', ''],
  ]);
  return table(['point', 'flow', 'Mbit/s (mean)', `${Math.round(report.confidence * 100)}% interval`, 'n', 'retransmits', 'loss'], rows, { id: 'report-table' });
}

type MatrixCell = Schemas['MatrixCell'];
const endpoint = (e: { agent: string; interface: string }): string => `${e.agent}:${e.interface}`;

/** A cell as the matrix's text report says it: the pair's mean and its verdict, or why it has none. */
function cellText(cell: MatrixCell | null, headline: Report['headline']): string {
  if (!cell) return '';
  const mean = cell.value?.mean;
  const figure = mean === undefined || mean === null ? '–' : headline.name === 'bitsPerSecond' ? mbps(mean) : headline.unit === 's' ? (mean * 1000).toFixed(3) : mean.toFixed(1);
  return cell.verdict === 'measured' ? figure : `${figure} (${cell.verdict}${cell.error ? `: ${cell.error.code}` : ''})`;
}

/** A group's report: per sweep point, sources down and destinations across, as the heatmap draws them. */
function matrixTables(report: Report): HTMLElement[] {
  const unit = report.headline.name === 'bitsPerSecond' ? 'Mbit/s' : report.headline.unit === 's' ? 'ms, round-trip median' : report.headline.unit;
  return (report.matrix ?? []).map((m, i) => h('section', {},
    h('h3', {}, `Matrix (${unit})${Object.keys(m.point).length ? `, ${pointText(m.point)}` : ''}`),
    table(['from \\ to', ...m.destinations.map(endpoint)], m.sources.map((source, r) => [endpoint(source), ...m.destinations.map((_, c) => cellText(m.cells[r]?.[c] ?? null, report.headline))]), { id: `matrix-table-${i}`, class: 'matrix' })));
}

/**
 * What can be done with the job now: cancel it while it is queued or running; once it ended,
 * make it again as it was (a new job), or start a new job's form from its spec.
 */
function actions(job: Job, fail: (e: unknown) => void): (HTMLElement | string)[] {
  const button = (id: string, label: string, act: () => Promise<void>) => {
    const b = h('button', { type: 'button', id }, label);
    b.addEventListener('click', () => {
      b.disabled = true;
      act().catch(fail).finally(() => void (b.disabled = false));
    });
    return b;
  };
  if (!FINAL.includes(job.status)) return [button('job-cancel', 'Cancel job', async () => void (await sendJson<Job>('DELETE', `/v1/jobs/${encodeURIComponent(job.id)}`)))];
  return [
    button('job-repeat', 'Repeat job', async () => {
      const again = await sendJson<Job>('POST', '/v1/jobs', repeatRequest(job));
      location.hash = `#/jobs/${again.id}`;
    }),
    ' ',
    h('a', { href: `#/new?from=${job.id}`, id: 'job-edit' }, 'Edit as a new job…'),
  ];
}

/**
 * One job. While it runs: its status and progress from its event stream, and the current
 * run's intervals as they are taken. When it is done: the API's figure (`report?format=svg`),
 * the report's table, and downloads.
 */
export async function jobPage({ root, args, signal, fail }: PageContext): Promise<void> {
  const id = args[0] ?? '';
  const path = `/v1/jobs/${encodeURIComponent(id)}`;
  let job = await getJson<Job>(path, signal);
  const status = h('span', { id: 'job-status' }, statusBadge(job.status));
  const bar = h('progress', { id: 'job-progress', max: String(job.progress.runsTotal), value: String(job.progress.runsDone) });
  const progress = h('span', { id: 'job-progress-text' }, `${job.progress.runsDone}/${job.progress.runsTotal} runs`);
  const error = h('p', { id: 'job-error', class: 'error' });
  const live = h('section', { id: 'live' });
  const done = h('section', { id: 'done' });
  const buttons = h('span', { id: 'job-actions' }, ...actions(job, fail));
  const actionBar = h('p', {}, buttons, ' ', h('a', { href: `#/compare?baseline=${id}` }, 'Compare with another job…'));
  root.replaceChildren(
    h('h1', {}, 'Job ', h('code', {}, id)),
    h('p', {}, status, ' ', bar, ' ', progress, ' · ', specText(job), ' · created ', when(job.createdAt), ' by ', job.owner),
    actionBar,
    error, live, done,
  );
  const showProgress = (p: { runsDone: number; runsTotal: number }) => {
    bar.max = p.runsTotal;
    bar.value = p.runsDone;
    progress.textContent = `${p.runsDone}/${p.runsTotal} runs`;
  };
  const showError = (e: Job['error']) => void (error.textContent = e ? `${e.code}: ${e.message}` : '');
  showError(job.error);

  if (!FINAL.includes(job.status)) {
    const chart = new LiveChart();
    live.replaceChildren(h('h2', {}, 'Current run'), chart.element, h('p', {}, job.spec.engine === 'builtin' ? '' : `Live samples come from the builtin engine; ${job.spec.engine} reports its intervals when the run ends.`));
    for await (const event of jobEvents(id, signal)) {
      if (event.type === 'status') {
        status.replaceChildren(statusBadge(event.status));
        showProgress(event.progress);
        showError(event.error);
      } else if (event.type === 'progress') showProgress(event);
      else if (event.type === 'interval') chart.add(event.runId, event.leg, event.interval);
    }
    job = await getJson<Job>(path, signal);
    buttons.replaceChildren(...actions(job, fail));
  }
  const [svg, report] = await Promise.all([getText(`${path}/report?format=svg`, 'image/svg+xml', signal), getJson<Report>(`${path}/report`, signal)]);
  const found = findingText(job.finding);
  done.replaceChildren(
    h('h2', {}, 'Report'),
    ...(job.finding ? [h('p', { id: 'job-finding' }, 'Found ', h('strong', {}, found.found), ` · verdict: ${found.verdict}${found.reason ? ` (${found.reason})` : ''}`)] : []),
    h('figure', { id: 'report-chart' }, inlineSvg(svg)),
    ...(report.matrix?.length ? matrixTables(report) : [reportTable(report)]),
    h('h2', {}, 'Downloads'),
    h('p', { id: 'downloads' },
      downloadButton('report (CSV)', `${path}/report?format=csv`, `${id}.csv`, 'text/csv', fail),
      downloadButton('report (JSON)', `${path}/report`, `${id}-report.json`, 'application/json', fail),
      downloadButton('chart (SVG)', `${path}/report?format=svg`, `${id}.svg`, 'image/svg+xml', fail),
      downloadButton('job with runs (JSON)', path, `${id}.json`, 'application/json', fail),
      ...rawLinks(job, fail)),
  );
}
