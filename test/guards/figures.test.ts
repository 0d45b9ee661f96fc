import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { FIGURES, NOT_FIGURES } from '@niclab/shared/domain/figures/catalogue';
import { FLEET_FAMILIES, LINK_FAMILIES } from '@niclab/api/metric-families';
import { loadOpenApi } from '@niclab/shared/runtime/openapi';
import { README, withFigures } from '../gen-figures.js';
import { METRIC_NAMES } from '@niclab/shared/domain/figure-directions';
import { LEG_COLUMNS } from '@niclab/shared/domain/report';
import { COLUMNS, HISTORY_COLUMNS } from '@niclab/shared/domain/figures/columns';

/**
 * The figure catalogue covers everything niclab reports: every numeric field of the contract's
 * results and every metric family is some figure's, or a named non-figure; and every figure has a
 * reference test that exists.
 */
const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const RESULTS = ['FlowResult', 'RunSummary', 'Report', 'Comparison', 'MatrixCell', 'ChangePoint', 'ChangeSeries', 'JobFinding'];
/** A figure's statistics over repeated runs are one field, the figure's. */
const SUMMARIES = new Set(['RepeatSummary', 'NullableRepeatSummary']);

const { doc } = loadOpenApi();
const schemas = doc.components.schemas as Record<string, any>;

/** Every numeric leaf under a schema, as `Schema.a.b[].c` (a map's keys as `{key}`). */
function numericFields(name: string): string[] {
  const out = new Set<string>();
  const walk = (node: any, path: string, seen: Set<string>) => {
    if (!node || typeof node !== 'object') return;
    if (node.$ref) {
      const ref = node.$ref.split('/').at(-1) as string;
      if (SUMMARIES.has(ref)) return void out.add(path);
      if (seen.has(ref)) return;
      return walk(schemas[ref], path, new Set([...seen, ref]));
    }
    for (const key of ['allOf', 'anyOf', 'oneOf'] as const) for (const part of node[key] ?? []) walk(part, path, seen);
    for (const branch of ['then', 'else'] as const) if (node[branch]) walk(node[branch], path, seen);
    const types = Array.isArray(node.type) ? node.type : [node.type];
    if (types.includes('number') || types.includes('integer')) out.add(path);
    for (const [key, value] of Object.entries(node.properties ?? {})) walk(value, `${path}.${key}`, seen);
    if (node.items) walk(node.items, `${path}[]`, seen);
    if (node.additionalProperties && typeof node.additionalProperties === 'object') walk(node.additionalProperties, `${path}.{key}`, seen);
  };
  walk(schemas[name], name, new Set([name]));
  return [...out];
}

/** A pattern of the catalogue (`*` one segment, `**` any) as a regular expression over whole paths. */
const pattern = (glob: string) =>
  new RegExp(`^${glob.split('**').map((any) => any.split('*').map((part) => part.replace(/[.[\]{}()+?^$|\\]/g, '\\$&')).join('[^.]+')).join('.+')}$`);
const fields = RESULTS.flatMap(numericFields);
const figureOf = (path: string) => FIGURES.filter((f) => f.fields.some((glob) => pattern(glob).test(path)));
const exempt = (path: string) => NOT_FIGURES.some((n) => n.fields.some((glob) => pattern(glob).test(path)));

test('every numeric field of the results is a figure of the catalogue, or a named non-figure', () => {
  assert.ok(fields.length > 100, `${fields.length} numeric fields found: the walk of openapi.yaml is broken`);
  const uncovered = fields.filter((path) => figureOf(path).length === 0 && !exempt(path));
  assert.deepEqual(uncovered, [], 'fields in no figure: add them to services/shared/src/domain/figures/catalogue.ts');
});

test("every catalogue pattern names fields the contract has (no entry outlives its field)", () => {
  const stale = [...FIGURES.flatMap((f) => f.fields.map((glob) => ({ where: f.name, glob }))), ...NOT_FIGURES.flatMap((n) => n.fields.map((glob) => ({ where: n.why, glob })))]
    .filter(({ glob }) => !fields.some((path) => pattern(glob).test(path)));
  assert.deepEqual(stale, []);
});

test('every metric family is a figure of the catalogue, and every figure metric a family', () => {
  const families = [...FLEET_FAMILIES, ...LINK_FAMILIES].map((f) => f.name);
  const named = new Set(FIGURES.flatMap((f) => f.metrics ?? []));
  assert.deepEqual(families.filter((name) => !named.has(name)), [], 'families in no figure');
  assert.deepEqual([...named].filter((name) => !families.includes(name)), [], 'figures naming a family /metrics does not have');
});

test('every figure names its reference test, and the test exists with that case', () => {
  const names = FIGURES.map((f) => f.name);
  assert.equal(new Set(names).size, names.length, 'figure names are unique');
  for (const f of FIGURES) {
    const file = `${ROOT}${f.reference.test}`;
    assert.ok(existsSync(file), `${f.name}: its reference test ${f.reference.test} does not exist`);
    // The file's text with the escapes of its quoted names undone.
    assert.ok(readFileSync(file, 'utf8').replace(/\\(['"`])/g, '$1').includes(f.reference.case), `${f.name}: ${f.reference.test} has no case "${f.reference.case}"`);
    assert.ok(f.reference.against.length > 10 && f.computed.length > 10 && f.meaning.length > 10, `${f.name}: say what it is, how it is computed and what it is checked against`);
    for (const [question, answer] of Object.entries(f.answers)) assert.ok(answer.length > 3, `${f.name}: answer "${question}"`);
    if (f.domain.min !== null && f.domain.max !== null) assert.ok(f.domain.min < f.domain.max, `${f.name}: its domain is empty`);
  }
});

test("the README's Figures section is the catalogue's (npm run gen:figures writes it)", () => {
  const readme = readFileSync(README, 'utf8');
  assert.equal(readme, withFigures(readme), 'README.md differs from the catalogue: run npm run gen:figures');
});

test("the comparison's figures are the contract's MetricName, each a column of a catalogue figure with a direction", () => {
  assert.deepEqual([...METRIC_NAMES].sort(), [...(schemas.MetricName.enum as string[])].sort());
  for (const c of COLUMNS.filter((col) => col.run)) assert.notEqual(c.figure.better, null, `${c.name}: a compared figure has a better way`);
  assert.equal(new Set(COLUMNS.map((c) => c.name)).size, COLUMNS.length, 'column names are unique');
});

test("the history's figures of a flow are exactly the catalogue's history columns (the contract's RunSummary flows)", () => {
  const flow = schemas.RunSummary.properties.flows.items;
  const figures = Object.keys(flow.properties).filter((name) => !['flowIndex', 'direction', 'src', 'dst', 'pathVerified'].includes(name));
  assert.deepEqual(figures.sort(), HISTORY_COLUMNS.map((c) => c.name).sort());
});

test("a report leg's figures are exactly the catalogue's per-flow columns (the contract's LegFigures)", () => {
  const leg = schemas.Report.properties.points.items.properties.flows.items;
  const figures = Object.keys(leg.properties).filter((name) => !['flowIndex', 'direction', 'test', 'from', 'to'].includes(name));
  assert.deepEqual(figures.sort(), LEG_COLUMNS.map((c) => c.name).sort());
});
