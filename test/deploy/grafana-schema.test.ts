import assert from 'node:assert/strict';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

/**
 * The three dashboards type-checked against @grafana/schema (Grafana itself cannot be
 * installed here): each file's JSON, as an object literal, must satisfy `NiclabDashboard`
 * (test/helpers/grafana-dashboard.ts: the dashboard, each panel with its plugin's options and
 * field config). Fields Grafana accepts that the schema does not type are in ACCEPTED, each
 * with its reason; they are taken out before the check, and each must still be in use.
 */
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const DASHBOARDS = join(ROOT, 'deploy/grafana/dashboards');
/** Inside the repository, so that `@grafana/schema` resolves from its node_modules. */
const WORK = join(ROOT, 'test-output', `grafana-schema-${process.pid}`);

type Json = Record<string, unknown>;
/** Where in a dashboard (a path of keys, `[]` for every element), and why Grafana accepts it. */
const ACCEPTED: { path: string; reason: string }[] = [
  { path: 'templating.list[].definition', reason: "a query variable's query as its editor shows it; Grafana keeps it beside `query`, the schema has no field for it" },
  ...['expr', 'step', 'titleFormat', 'textFormat', 'useValueForTime'].map((key) => ({
    path: `annotations.list[].${key}`,
    reason: "a Prometheus annotation's query and its formats, which Grafana's Prometheus data source reads from the annotation itself; the schema types only `target`",
  })),
];

/** Removes `path` from `value` wherever it is; returns how many it removed. */
function strip(value: unknown, path: string[]): number {
  if (value === null || typeof value !== 'object') return 0;
  const [head, ...rest] = path;
  if (head!.endsWith('[]')) {
    const list = (value as Json)[head!.slice(0, -2)];
    return Array.isArray(list) ? list.reduce((n: number, item) => n + strip(item, rest), 0) : 0;
  }
  if (rest.length === 0) {
    if (!(head! in (value as Json))) return 0;
    delete (value as Json)[head!];
    return 1;
  }
  return strip((value as Json)[head!], rest);
}

/** Every dashboard file, its JSON with ACCEPTED taken out, and how often each entry was. */
function dashboards(): { name: string; json: Json }[] {
  return readdirSync(DASHBOARDS).filter((f) => f.endsWith('.json')).map((name) => ({ name, json: JSON.parse(readFileSync(join(DASHBOARDS, name), 'utf8')) as Json }));
}

/** The TypeScript errors of each source, by name: `satisfies NiclabDashboard` on its JSON. */
function typeErrors(sources: Record<string, Json>): Record<string, string[]> {
  rmSync(WORK, { recursive: true, force: true });
  mkdirSync(WORK, { recursive: true });
  const helper = join(ROOT, 'test/helpers/grafana-dashboard.js');
  const files = Object.entries(sources).map(([name, json]) => {
    const file = join(WORK, `${name}.ts`);
    writeFileSync(file, `import type { NiclabDashboard } from ${JSON.stringify(helper)};\nexport const dashboard = ${JSON.stringify(json, null, 2)} satisfies NiclabDashboard;\n`);
    return [name, file] as const;
  });
  const program = ts.createProgram(files.map(([, f]) => f), { strict: true, noEmit: true, skipLibCheck: true, target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext });
  const diagnostics = ts.getPreEmitDiagnostics(program);
  return Object.fromEntries(files.map(([name, file]) => [name, diagnostics.filter((d) => d.file?.fileName === file).map((d) => ts.flattenDiagnosticMessageText(d.messageText, ' '))]));
}

after(() => rmSync(WORK, { recursive: true, force: true }));

test("every dashboard satisfies @grafana/schema's types, its panels their plugins' options; planted errors are each caught", () => {
  const all = dashboards();
  const used = new Map(ACCEPTED.map((a) => [a.path, 0]));
  for (const { json } of all) for (const { path } of ACCEPTED) used.set(path, used.get(path)! + strip(json, path.split('.')));
  assert.deepEqual([...used].filter(([, n]) => n === 0).map(([path]) => path), [], 'every accepted field is in use: an entry no dashboard needs goes');
  assert.deepEqual(all.map((d) => d.name).sort(), ['agents-queue.json', 'fleet-overview.json', 'link-detail.json']);

  // The planted errors, each in a copy of link-detail.json.
  const base = all.find((d) => d.name === 'link-detail.json')!.json;
  const plant = (change: (d: any) => void) => {
    const copy = structuredClone(base) as any;
    change(copy);
    return copy as Json;
  };
  const timeseries = (d: any) => d.panels.find((p: { type: string }) => p.type === 'timeseries');
  const planted: Record<string, [Json, RegExp]> = {
    'refresh-number': [plant((d) => (d.refresh = 60)), /'number' is not assignable to type 'string'/],
    'unit-number': [plant((d) => (timeseries(d).fieldConfig.defaults.unit = 5)), /'number' is not assignable to type 'string'/],
    'display-mode-lists': [plant((d) => (timeseries(d).options = { legend: { displayMode: 'lists' } })), /'"lists"' is not assignable to type .*'?"list"/],
    'unknown-option': [plant((d) => (timeseries(d).options = { notAnOption: true })), /'"notAnOption"' does not exist/],
    // Each panel is held to its own plugin's options: a table's on a time series is an error.
    'table-option-on-timeseries': [plant((d) => (timeseries(d).options = { showHeader: true })), /'"showHeader"' does not exist/],
  };
  const errors = typeErrors({ ...Object.fromEntries(all.map((d) => [d.name.replace('.json', ''), d.json])), ...Object.fromEntries(Object.entries(planted).map(([name, [json]]) => [name, json])) });
  for (const { name } of all) assert.deepEqual(errors[name.replace('.json', '')], [], `${name} satisfies the schema`);
  for (const [name, [, message]] of Object.entries(planted)) {
    assert.ok(errors[name]!.some((e) => message.test(e)), `${name} is caught: ${errors[name]!.join('\n') || 'no error'}`);
  }
});
