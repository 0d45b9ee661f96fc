/**
 * The Prometheus text exposition format (0.0.4) of the families in metric-families.ts. Written
 * here rather than by prom-client: a link's nine labels are escaped once and shared by all its
 * series, which keeps a scrape of thousands of links cheap (prom-client formats every label of
 * every series anew).
 */
import type { LinkLabels } from '@niclab/shared/stores/metric-store';
import { LINK_FAMILIES, LINK_LABELS, type Family, type Link, type Sample } from './metric-families.js';

export const escapeLabel = (value: string) => value.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');
export const sampleValue = (value: number) => (Number.isNaN(value) ? 'NaN' : value === Infinity ? '+Inf' : value === -Infinity ? '-Inf' : String(value));

const labelPairs = (labels: Record<string, string>) => Object.entries(labels).map(([k, v]) => `${k}="${escapeLabel(v)}"`).join(',');

/** One family: its HELP and TYPE lines, then a line per sample. */
export function renderFamily(family: Pick<Family, 'name' | 'help' | 'type'>, samples: Sample[]): string {
  const { name } = family;
  const lines = [`# HELP ${name} ${family.help}`, `# TYPE ${name} ${family.type}`];
  for (const { labels, value, suffix = '' } of samples) {
    const set = labelPairs(labels);
    lines.push(`${name}${suffix}${set ? `{${set}}` : ''} ${sampleValue(value)}`);
  }
  return `${lines.join('\n')}\n`;
}

/** A link's label set in the text format, escaped once per labels object (callers keep them between scrapes). */
const labelSets = new WeakMap<LinkLabels, string>();
function linkLabelSet(labels: LinkLabels): string {
  let set = labelSets.get(labels);
  if (set === undefined) {
    set = LINK_LABELS.map((k) => `${k}="${escapeLabel(labels[k])}"`).join(',');
    labelSets.set(labels, set);
  }
  return set;
}

/** Every link family (LINK_FAMILIES), each with the series of every link that has its figure. */
export function renderLinks(links: Link[]): string {
  const sets = links.map(({ labels }) => linkLabelSet(labels));
  const out: string[] = [];
  for (const family of LINK_FAMILIES) {
    out.push(`# HELP ${family.name} ${family.help}`, `# TYPE ${family.name} ${family.type}`);
    links.forEach(({ values }, i) => {
      for (const { labels, value } of family.samples(values)) {
        out.push(`${family.name}{${sets[i]}${labels ? `,${labelPairs(labels)}` : ''}} ${sampleValue(value)}`);
      }
    });
  }
  return `${out.join('\n')}\n`;
}
