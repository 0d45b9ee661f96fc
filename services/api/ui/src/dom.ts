import type { components } from '@niclab/shared/generated/openapi';
/** A few DOM helpers: no framework, elements are built and replaced directly. */
type Child = Node | string | number | null | undefined | false;

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs: Record<string, string | undefined> = {}, ...children: Child[]): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) if (value !== undefined) el.setAttribute(name, value);
  el.append(...children.filter((c): c is Node | string | number => c !== null && c !== undefined && c !== false).map((c) => (typeof c === 'number' ? String(c) : c)));
  return el;
}

/** A table with a header row and one row per item. */
export function table(columns: string[], rows: Child[][], attrs: Record<string, string> = {}): HTMLTableElement {
  return h('table', attrs, h('thead', {}, h('tr', {}, ...columns.map((c) => h('th', {}, c)))), h('tbody', {}, ...rows.map((cells) => h('tr', {}, ...cells.map((c) => h('td', {}, c))))));
}

export const mbps = (bps: number | null | undefined): string => (bps === null || bps === undefined ? '–' : (bps / 1e6).toFixed(2));

export const when = (iso: string | null | undefined): string => (iso ? new Date(iso).toLocaleString() : '–');

export const shortId = (id: string): string => id.slice(0, 8);

export const jobLink = (id: string): HTMLAnchorElement => h('a', { href: `#/jobs/${id}`, class: 'id' }, shortId(id));

/** A status word, styled by its value. */
export const statusBadge = (status: string): HTMLSpanElement => h('span', { class: `status status-${status}`, 'data-status': status }, status);

/**
 * Puts an SVG the API rendered into the page as DOM (so it scales, and its marks can be
 * inspected), parsed as XML: nothing in it is run.
 */
export function inlineSvg(text: string): Element {
  const doc = new DOMParser().parseFromString(text, 'image/svg+xml');
  const svg = doc.documentElement;
  if (svg.nodeName !== 'svg') throw new Error('the chart is not an SVG');
  for (const script of svg.querySelectorAll('script, foreignObject')) script.remove();
  return document.importNode(svg, true);
}

/** A sweep point as `name=value` pairs (a rate as its JSON), or `none` for the empty point. */
export const pointText = (point: Record<string, unknown>, none = '–'): string => Object.entries(point).map(([k, v]) => `${k}=${typeof v === 'object' ? JSON.stringify(v) : String(v)}`).join(' ') || none;

type Finding = components['schemas']['JobFinding'];
/**
 * Each headline figure in the unit a person reads it in: the catalogue's display (as the
 * CLI's findingText uses it), restated because the page's modules import no runtime code from
 * @niclab/shared.
 */
const FINDING_UNITS: Record<Finding['figure'], { scale: number; unit: string; digits: number }> = {
  bitsPerSecond: { scale: 1e6, unit: 'Mbit/s', digits: 2 },
  transactionsPerSecond: { scale: 1, unit: 'transactions/s', digits: 1 },
  rttP50Seconds: { scale: 1e-3, unit: 'ms', digits: 3 },
};

/** What an ended job found (its `finding`), as the job list shows it: the figure and where, the verdict, and why. */
export function findingText(finding: Finding | null): { found: string; verdict: string; reason: string | null } {
  if (!finding) return { found: '–', verdict: '–', reason: null };
  const { scale, unit, digits } = FINDING_UNITS[finding.figure];
  const where = pointText(finding.point, '');
  const perFlow = finding.from === 'search' || finding.from === 'mlrsearch' ? ' per flow' : '';
  return { found: `${(finding.value / scale).toFixed(digits)} ${unit}${perFlow}${where ? ` at ${where}` : ''}`, verdict: finding.verdict ?? '–', reason: finding.reason };
}
