import { getJson, getText, type Schemas } from '../api.js';
import { h, inlineSvg, mbps, table, when } from '../dom.js';
import type { PageContext } from '../page.js';

type ChangePoint = Schemas['ChangePoint'];

const endpoint = (e: { agent: string; interface: string }): string => `${e.agent}:${e.interface}`;
const percent = (x: number): string => `${x >= 0 ? '+' : '−'}${Math.abs(x * 100).toFixed(1)}%`;

/** The step as the list says it: relative with its interval, or the difference when the mean before was 0. */
function stepText(c: ChangePoint): string {
  if (c.relative !== null && c.relativeInterval) return `${percent(c.relative)} [${percent(c.relativeInterval[0]!)}, ${percent(c.relativeInterval[1]!)}]`;
  return `${c.difference >= 0 ? '+' : ''}${c.difference.toPrecision(3)} ${c.unit}`;
}

/** A mean in the units the lab reads it in: Mbit/s, ms, %. */
function figureText(value: number, unit: string): string {
  if (unit === 'bits/s') return `${mbps(value)} Mbit/s`;
  if (unit === 's') return `${(value * 1000).toFixed(3)} ms`;
  if (unit === 'ratio') return `${(value * 100).toFixed(3)}%`;
  return `${value.toPrecision(4)} ${unit}`;
}

const changedText = (c: ChangePoint): string => c.changed.map((x) => `${x.end} ${x.field}: ${JSON.stringify(x.before)} → ${JSON.stringify(x.after)}`).join('; ') || 'nothing recorded';
const acknowledgedText = (c: ChangePoint): string => (c.acknowledged ? `${c.acknowledged.as} (${c.acknowledged.by}${c.acknowledged.note ? `: ${c.acknowledged.note}` : ''})` : 'open');

/** The change points of the last 30 days, newest first, read again every 30 s; `#/changes/ID` is one with its series drawn. */
export async function changesPage({ root, args, signal, every }: PageContext): Promise<void> {
  if (args[0]) return changePage(root, args[0], signal);
  const list = h('div');
  root.replaceChildren(h('h1', {}, 'Change points'), h('p', {}, "Steps found in the schedules' series as each run ended, with what changed at either end between the runs around them."), list);
  every(30_000, async () => {
    const { items } = await getJson<{ items: ChangePoint[] }>('/v1/changes?limit=1000', signal);
    const rows = [...items].reverse().map((c) => [
      h('a', { href: `#/changes/${c.id}`, class: 'id' }, when(c.after.finishedAt)),
      c.series.schedule, `${endpoint(c.series.src)} → ${endpoint(c.series.dst)}`, c.series.figure,
      h('span', { class: `verdict verdict-${c.verdict}`, 'data-verdict': c.verdict }, `${stepText(c)} ${c.verdict}`),
      changedText(c), acknowledgedText(c),
    ]);
    list.replaceChildren(rows.length ? table(['after the run of', 'schedule', 'link', 'figure', 'step (95% interval)', 'what changed', 'acknowledged'], rows, { id: 'changes' }) : h('p', {}, 'No change points in the last 30 days.'));
  });
}

async function changePage(root: HTMLElement, id: string, signal: AbortSignal): Promise<void> {
  const path = `/v1/changes/${encodeURIComponent(id)}`;
  const [{ change: c, points }, svg] = await Promise.all([getJson<Schemas['ChangeSeries']>(path, signal), getText(`${path}?format=svg`, 'image/svg+xml', signal)]);
  root.replaceChildren(
    h('h1', {}, `Change point: ${c.series.figure} ${stepText(c)} (${c.verdict})`),
    h('p', {}, h('a', { href: '#/changes' }, 'All change points')),
    table(['', ''], [
      ['series', `schedule ${c.series.schedule}, flow ${c.series.flowIndex} ${c.series.direction}: ${endpoint(c.series.src)} → ${endpoint(c.series.dst)}`],
      ['between', `the run of ${when(c.before.finishedAt)} (${c.before.runId}) and the run of ${when(c.after.finishedAt)} (${c.after.runId})`],
      ['means (as found)', `${figureText(c.before.mean, c.unit)} over ${c.before.runs} runs, then ${figureText(c.after.mean, c.unit)} over the ${c.after.runs} after it; p = ${c.pValue.toPrecision(2)}`],
      ['what changed', changedText(c)],
      ['acknowledged', acknowledgedText(c)],
    ], { id: 'change' }),
    h('figure', { id: 'change-chart', 'data-runs': String(points.length) }, inlineSvg(svg)),
  );
}
