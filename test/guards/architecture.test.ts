import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { Keys } from '@niclab/shared/stores/keys';
import { loadOpenApi } from '@niclab/shared/runtime/openapi';
import { RUN_ERRORS } from '@niclab/shared/domain/run-errors';
import { TEST_KINDS } from '@niclab/shared/domain/test-kinds/index';

const SERVICES = fileURLToPath(new URL('../../services', import.meta.url));

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (name === 'node_modules' || name === 'dist') return [];
    return statSync(path).isDirectory() ? sources(path) : path.endsWith('.ts') && !path.endsWith('.d.ts') ? [path] : [];
  });
}

/** The services/ file an import names (relative, or @niclab/<package>/<module>), if it is one. */
function target(from: string, specifier: string): string | null {
  let base: string;
  const workspace = /^@niclab\/([^/]+)\/(.+)$/.exec(specifier);
  if (workspace) base = join(SERVICES, workspace[1]!, 'src', workspace[2]!);
  else if (specifier.startsWith('.')) base = resolve(dirname(from), specifier);
  else return null;
  base = base.replace(/\.js$/, '');
  for (const candidate of [`${base}.ts`, join(base, 'index.ts')]) if (existsSync(candidate)) return candidate;
  return null;
}

/** Every import and re-export of a file, type-only ones included (they are cycles for a reader too). */
function imports(file: string): string[] {
  return specifiers(file).map((s) => target(file, s)).filter((t): t is string => t !== null);
}

/** What each import and re-export of a file names, as written (`vega`, `./plan.js`). */
function specifiers(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const found = [...text.matchAll(/^\s*(?:import|export)\b[^;'"]*?from\s*['"]([^'"]+)['"]/gms), ...text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)];
  return found.map((m) => m[1]!);
}

/** The cycles of the import graph, each once, as file lists (Tarjan's strongly connected components). */
function cycles(files: string[]): string[][] {
  const edges = new Map(files.map((f) => [f, imports(f)]));
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let next = 0;
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of edges.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) === index.get(v)) {
      const component: string[] = [];
      let w: string;
      do {
        w = stack.pop()!;
        onStack.delete(w);
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || (edges.get(v) ?? []).includes(v)) found.push(component.map((f) => relative(SERVICES, f)).sort());
    }
  };
  for (const f of files) if (!index.has(f)) visit(f);
  return found;
}

test('services/ has no import cycles, type imports included', () => {
  const files = sources(SERVICES);
  assert.ok(files.length > 50, `read ${files.length} files`);
  assert.deepEqual(cycles(files), []);
});

test('the API package does not depend on the agent package', () => {
  const manifest = JSON.parse(readFileSync(join(SERVICES, 'api/package.json'), 'utf8')) as { dependencies?: Record<string, string> };
  assert.equal(manifest.dependencies?.['@niclab/agent'], undefined, 'services/api/package.json lists @niclab/agent');
  const tsconfig = readFileSync(join(SERVICES, 'api/tsconfig.json'), 'utf8');
  assert.doesNotMatch(tsconfig, /\.\.\/agent/, 'services/api/tsconfig.json references ../agent');
  const offenders = sources(join(SERVICES, 'api')).filter((file) => /['"]@niclab\/agent\//.test(readFileSync(file, 'utf8')));
  assert.deepEqual(offenders.map((f) => relative(SERVICES, f)), []);
});

test('plotting stays in the API: shared builds chart specs as data, only services/api imports vega', () => {
  const offenders = sources(SERVICES).filter((file) => !relative(SERVICES, file).startsWith('api/') && specifiers(file).some((s) => /^vega(-|$)/.test(s)));
  assert.deepEqual(offenders.map((f) => relative(SERVICES, f)), []);
  // Every Node package of services/ but the API's (services/python is a Python file, no package).
  for (const pkg of readdirSync(SERVICES).filter((p) => p !== 'api' && existsSync(join(SERVICES, p, 'package.json')))) {
    const manifest = JSON.parse(readFileSync(join(SERVICES, pkg, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
    assert.deepEqual(Object.keys(manifest.dependencies ?? {}).filter((d) => d.startsWith('vega')), [], `services/${pkg}/package.json`);
  }
  assert.ok(specifiers(join(SERVICES, 'api/src/render-svg.ts')).includes('vega'), 'the guard reads the renderer\'s imports');
});

/** Keys members that name BullMQ queues (BullMQ keeps its own keys under them), not Redis keys of ours. */
const QUEUE_NAMES = new Set(['bull', 'jobsQueue', 'agentQueue']);

test('Redis keys are built and used only in services/shared (the stores and protocols); elsewhere only queue names', () => {
  const members = Object.getOwnPropertyNames(Keys.prototype).filter((m) => m !== 'constructor');
  members.push('prefix', 'jobsQueue');
  const offenders: string[] = [];
  for (const file of sources(SERVICES)) {
    const name = relative(SERVICES, file);
    if (name.startsWith('shared/')) continue;
    const text = readFileSync(file, 'utf8');
    for (const [, member] of text.matchAll(/\bkeys\.([A-Za-z]+)\b/g)) {
      if (members.includes(member!) && !QUEUE_NAMES.has(member!)) offenders.push(`${name}: keys.${member}`);
    }
    // A key spelled out by hand (`${prefix}:...`) would dodge the Keys class.
    if (/\$\{[^}]*prefix\}:/.test(text)) offenders.push(`${name}: a key built from the prefix`);
  }
  assert.deepEqual(offenders, []);
});

test('each test kind is branched on by name only in its own module (services/shared/src/domain/test-kinds/)', () => {
  const names = Object.keys(TEST_KINDS).join('|');
  const branch = new RegExp(String.raw`(?:[!=]==\s*['"](?:${names})['"])|(?:['"](?:${names})['"]\s*[!=]==)|(?:case\s+['"](?:${names})['"])|(?:\.test\s*[!=]==)`);
  const offenders = sources(SERVICES)
    .filter((file) => !relative(SERVICES, file).startsWith('shared/src/domain/test-kinds/') && !file.includes('/generated/'))
    .filter((file) => branch.test(readFileSync(file, 'utf8')))
    .map((file) => relative(SERVICES, file));
  assert.deepEqual(offenders, []);
});

test('services/shared/src/domain is pure: no I/O, no Redis, no process plumbing (node:net for address parsing only)', () => {
  const impure = /from '(?:node:(?!net')[\w/]+|ioredis|bullmq|(?:\.\.\/)+(?:runtime|stores)\/[^']*)'/;
  const offenders = sources(join(SERVICES, 'shared/src/domain'))
    .filter((file) => impure.test(readFileSync(file, 'utf8')))
    .map((file) => relative(SERVICES, file));
  assert.deepEqual(offenders, [], 'a domain module that reads files, talks to Redis or runs processes belongs in runtime/ or stores/');
});

/**
 * Branching on a kind by the presence of its own fields (`params.rr ? ...`, `'probe' in x`,
 * `result.rr || result.probe`) is branching on the kind by another name. The places that still
 * do it are listed here, each to go when its code moves into the kind's folder (issue 27); a
 * new one fails, and so does an entry no longer needed.
 */
const PRESENCE_BRANCHES: Record<string, number> = {
  // The /metrics families and the link values behind them read the probe's figures of a flow's result (FlowResult.probe).
  'api/src/metric-families.ts': 1,
  'shared/src/stores/metric-store.ts': 1,
  // The CLI's flags name the kind a user asks for (--rr, --probe) and what may not go with it.
  'cli/src/client/spec.ts': 4,
};

/**
 * Per file of services/ outside `ownFolder` (and the generated types), how often one of
 * `fields` is tested for presence: `x.field ?`, `x.field &&`, `'field' in x`, `if (x.field)`.
 */
function presenceBranches(fields: string[], ownFolder: string): Record<string, number> {
  const names = fields.join('|');
  const presence = new RegExp(String.raw`(?:\.(?:${names})\s*(?:\?(?![.?])|&&|\|\||\)\s*(?:\{|\?|&&|\|\|)))|(?:['"](?:${names})['"]\s+in\b)|(?:if\s*\(\s*!?[\w.?]+\.(?:${names})\s*\))`, 'g');
  const found: Record<string, number> = {};
  for (const file of sources(SERVICES)) {
    const name = relative(SERVICES, file);
    if (name.startsWith(ownFolder) || file.includes('/generated/')) continue;
    const count = (readFileSync(file, 'utf8').match(presence) ?? []).length;
    if (count > 0) found[name] = count;
  }
  return found;
}

test("no new branching on a test kind by the presence of its fields, outside the kind's folder", () => {
  // The kinds' own fields (a stream has none of its own; udp is a protocol's), and the probe's far end's.
  const fields = [...Object.keys(TEST_KINDS).filter((name) => name !== 'stream'), 'reflector'];
  assert.deepEqual(presenceBranches(fields, 'shared/src/domain/test-kinds/'), PRESENCE_BRANCHES, 'a file branches on a kind by its fields more (or less) than listed: move the branch into the kind, or shorten the list');
});

/**
 * The same for campaigns: a spec's campaign field (`search`, `group`, `factorial`) tested for presence
 * outside campaigns/ is a campaign's branch living elsewhere. The places left are listed, each
 * with why it stays; a new one fails, and so does an entry no longer needed.
 */
const CAMPAIGN_BRANCHES: Record<string, number> = {
  // A group's own rule, where it is expanded against the inventory: it has no search.
  'shared/src/domain/groups.ts': 1,
  // The web page's one-line description of a job names its group's shape.
  'api/ui/src/pages/job.ts': 1,
  // The CLI's --factorial flag sets the campaign's field (a campaign's flags live in the CLI).
  'cli/src/client/spec.ts': 1,
};

test("no new branching on a campaign by its spec field, outside services/shared/src/domain/campaigns/", () => {
  assert.deepEqual(presenceBranches(['search', 'group', 'factorial'], 'shared/src/domain/campaigns/'), CAMPAIGN_BRANCHES, 'a file branches on a campaign by its spec field more (or less) than listed: move the branch into the campaign, or shorten the list');
});

test('every run error code is in one table (RUN_ERRORS), and openapi.yaml lists exactly those', () => {
  const schemas = loadOpenApi().doc.components.schemas as Record<string, { enum?: string[] }>;
  assert.deepEqual([...(schemas.RunErrorCode?.enum ?? [])].sort(), Object.keys(RUN_ERRORS).sort());
});

test('the README lists every run error code with its meaning', () => {
  const readme = readFileSync(join(SERVICES, '../README.md'), 'utf8');
  const missing = Object.entries(RUN_ERRORS).filter(([code, kind]) => !readme.includes(`| \`${code}\` | ${kind.meaning} |`)).map(([code]) => code);
  assert.deepEqual(missing, []);
});
