/**
 * Reads the structure of an SVG that vega rendered: its mark groups (`<g class="mark-symbol
 * role-mark means_marks">`), their items with the aria labels vega gives each datum, and the
 * axis and chart titles. Enough to test a chart by what it shows, not by its pixels.
 */
import assert from 'node:assert/strict';
import type { Test } from 'supertest';

export interface SvgElement {
  tag: string;
  attrs: Record<string, string>;
  children: SvgElement[];
  text: string;
}

const unescape = (s: string) => s.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&amp;/g, '&');

/** A small XML reader: vega's SVG has no CDATA, comments or processing instructions. */
export function parseSvg(svg: string): SvgElement {
  const root: SvgElement = { tag: '#root', attrs: {}, children: [], text: '' };
  const stack = [root];
  const tag = /<(\/?)([a-zA-Z][\w:-]*)((?:\s+[\w:-]+="[^"]*")*)\s*(\/?)>|([^<]+)/g;
  for (const m of svg.matchAll(tag)) {
    const top = stack.at(-1)!;
    if (m[5] !== undefined) {
      top.text += unescape(m[5]);
      continue;
    }
    if (m[1]) {
      assert.equal(top.tag, m[2], `</${m[2]}> closes <${top.tag}>`);
      stack.pop();
      continue;
    }
    const attrs = Object.fromEntries([...m[3]!.matchAll(/([\w:-]+)="([^"]*)"/g)].map((a) => [a[1]!, unescape(a[2]!)]));
    const el: SvgElement = { tag: m[2]!, attrs, children: [], text: '' };
    top.children.push(el);
    if (!m[4]) stack.push(el);
  }
  assert.equal(stack.length, 1, 'every element is closed');
  assert.equal(root.children[0]?.tag, 'svg');
  return root.children[0]!;
}

function* walk(el: SvgElement): Generator<SvgElement> {
  yield el;
  for (const c of el.children) yield* walk(c);
}

const classes = (el: SvgElement) => (el.attrs.class ?? '').split(/\s+/);

/**
 * The items of the marks a chart layer named `name` drew with mark type `type` (`symbol`,
 * `line`, `rect`, `rule`, `text`): one per datum (a line: one per series), each with its
 * aria label read as `{field: value}`.
 */
export function markItems(svg: SvgElement, name: string, type: string): Record<string, string>[] {
  const groups = [...walk(svg)].filter((el) => el.tag === 'g' && classes(el).includes(`mark-${type}`) && classes(el).includes('role-mark') && classes(el).some((c) => c === `${name}_marks` || (c.startsWith(`${name}_`) && c.endsWith('_marks'))));
  return groups.flatMap((g) => g.children.filter((c) => c.attrs.role === 'graphics-symbol').map((c) => ariaFields(c.attrs['aria-label'] ?? '')));
}

/** Where each item of `markItems` was drawn (a symbol's `translate(x,y)`), with its fields. */
export function markPositions(svg: SvgElement, name: string, type: string): { x: number; y: number; fields: Record<string, string> }[] {
  const groups = [...walk(svg)].filter((el) => el.tag === 'g' && classes(el).includes(`mark-${type}`) && classes(el).includes('role-mark') && classes(el).includes(`${name}_marks`));
  return groups.flatMap((g) => g.children.filter((c) => c.attrs.role === 'graphics-symbol').map((c) => {
    const [, x, y] = /translate\(([-\d.e]+),([-\d.e]+)\)/.exec(c.attrs.transform ?? '') ?? [];
    return { x: Number(x), y: Number(y), fields: ariaFields(c.attrs['aria-label'] ?? '') };
  }));
}

/** `x: 8; mean: 500; series: flow 0` as an object. */
export function ariaFields(label: string): Record<string, string> {
  return Object.fromEntries(label.split('; ').filter(Boolean).map((part) => {
    const at = part.indexOf(': ');
    return [part.slice(0, at), part.slice(at + 2)];
  }));
}

/** The axis titles, x first (vega writes the axes in that order). */
export function axisTitles(svg: SvgElement): string[] {
  return [...walk(svg)].filter((el) => classes(el).includes('role-axis-title')).flatMap((g) => g.children.map((c) => c.text.trim()));
}

/** Each axis's tick labels in drawn order, x first (a band axis draws its domain in order). */
export function axisLabels(svg: SvgElement): string[][] {
  return [...walk(svg)].filter((el) => el.tag === 'g' && classes(el).includes('role-axis-label')).map((g) => g.children.map((c) => c.text.trim()));
}

/** The chart's title and subtitle lines. */
export function chartTitle(svg: SvgElement): { text: string; subtitle: string } {
  const textOf = (role: string) => [...walk(svg)].filter((el) => classes(el).includes(role)).flatMap((g) => g.children.map((c) => c.text.trim() || c.children.map((t) => t.text).join(' '))).join(' ');
  return { text: textOf('role-title-text'), subtitle: textOf('role-title-subtitle') };
}

/** Every text of the chart's text marks (labels drawn from the data, such as verdicts). */
export function texts(svg: SvgElement, name: string): string[] {
  return [...walk(svg)].filter((el) => el.tag === 'g' && classes(el).includes('mark-text') && classes(el).includes(`${name}_marks`)).flatMap((g) => g.children.map((c) => c.text.trim() || c.children.map((t) => t.text).join(' ')));
}

/** A supertest request's body as text: it keeps an image's body (image/svg+xml) as bytes otherwise. */
export function asText(req: Test): Test {
  return req.buffer(true).parse((res, done) => {
    let text = '';
    res.on('data', (chunk: Buffer) => (text += chunk.toString()));
    res.on('end', () => done(null, text));
  });
}
