import { flowsOf, getJson, getText, type Job, type Schemas } from '../api.js';
import { h, inlineSvg, jobLink, mbps, shortId, table, when } from '../dom.js';
import type { PageContext } from '../page.js';

type Comparison = Schemas['Comparison'];

const pointText = (point: Record<string, unknown>): string => Object.entries(point).map(([k, v]) => `${k}=${String(v)}`).join(' ') || 'all points';
const percent = (x: number | null): string => (x === null ? '–' : `${x >= 0 ? '+' : ''}${x.toFixed(2)}%`);

function picker(name: string, jobs: Job[], selected: string | null): HTMLSelectElement {
  const select = h('select', { name, id: `pick-${name}`, 'aria-label': `${name[0]!.toUpperCase()}${name.slice(1)} job` }, h('option', { value: '' }, `— ${name} —`));
  for (const job of jobs) {
    const first = flowsOf(job)[0];
    const label = `${shortId(job.id)} · ${job.spec.engine} ${job.spec.protocol} · ${first ? `${first.from.agent}:${first.from.interface}→${first.to.agent}:${first.to.interface}` : ''} · ${when(job.finishedAt)}`;
    select.append(h('option', { value: job.id, ...(job.id === selected ? { selected: '' } : {}) }, label));
  }
  return select;
}

function verdicts(c: Comparison, headlineUnit: (x: number) => string): HTMLTableElement {
  // A change from a baseline of 0 has no %: it is shown as the difference itself.
  const change = (p: Comparison['points'][number]) => (p.changePercentReason && p.difference !== null ? `${p.difference >= 0 ? '+' : ''}${headlineUnit(p.difference)} (from 0)` : percent(p.changePercent));
  const range = (p: Comparison['points'][number]) =>
    p.changePercentInterval ? `${percent(p.changePercentInterval[0] ?? null)} … ${percent(p.changePercentInterval[1] ?? null)}`
      : p.changePercentReason && p.differenceInterval ? `${headlineUnit(p.differenceInterval[0]!)} … ${headlineUnit(p.differenceInterval[1]!)}` : '–';
  const p2 = (x: number | null) => (x === null ? '–' : x.toPrecision(2));
  return table(['point', 'baseline', 'candidate', 'change', `${Math.round(c.confidence * 100)}% interval`, 'p', `p (${c.correction.method}-adjusted)`, 'verdict'], c.points.map((p) => [
    pointText(p.point),
    headlineUnit(p.baseline.mean),
    headlineUnit(p.candidate.mean),
    change(p),
    range(p),
    p2(p.pValue),
    p2(p.adjustedPValue),
    h('span', { class: `verdict verdict-${p.verdict.replace(/ /g, '-')}`, title: p.reason ?? '' }, p.verdict),
  ]), { id: 'verdicts' });
}

/** Two finished jobs side by side: the API's A/B figure and its verdict per point. */
export async function comparePage({ root, query, signal }: PageContext): Promise<void> {
  const jobs = (await getJson<Schemas['JobPage']>('/v1/jobs?status=succeeded&limit=100', signal)).items;
  const baseline = picker('baseline', jobs, query.get('baseline'));
  const candidate = picker('candidate', jobs, query.get('candidate'));
  const form = h('form', { id: 'compare-form' }, baseline, ' against ', candidate, ' ', h('button', { type: 'submit' }, 'Compare'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    location.hash = `#/compare?${new URLSearchParams({ baseline: baseline.value, candidate: candidate.value })}`;
  });
  const result = h('section', { id: 'comparison' });
  root.replaceChildren(h('h1', {}, 'Compare two jobs'), form, result);
  const a = query.get('baseline');
  const b = query.get('candidate');
  if (!a || !b) return;
  const q = `/v1/compare?${new URLSearchParams({ baseline: a, candidate: b })}`;
  const [comparison, svg] = await Promise.all([getJson<Comparison>(q, signal), getText(`${q}&format=svg`, 'image/svg+xml', signal)]);
  const unit = comparison.headline.name === 'bitsPerSecond' ? (x: number) => `${mbps(x)} Mbit/s` : (x: number) => `${x.toFixed(1)} ${comparison.headline.unit}`;
  result.replaceChildren(
    h('p', {}, 'baseline ', jobLink(comparison.baseline), ', candidate ', jobLink(comparison.candidate), comparison.variedByUser.length ? ` · varied: ${comparison.variedByUser.join(', ')}` : ''),
    h('figure', { id: 'compare-chart' }, inlineSvg(svg)),
    verdicts(comparison, unit),
    ...(comparison.environmentDifferences.length
      ? [h('h2', {}, 'Environment differences'), table(['where', 'field', 'baseline', 'candidate', 'explained by what you varied'], comparison.environmentDifferences.map((d) => [d.where, d.field, d.baseline, d.candidate, d.variedByUser ? 'yes' : 'no']), { id: 'environment' })]
      : []),
  );
}
