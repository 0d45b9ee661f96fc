import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

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
  const text = readFileSync(file, 'utf8');
  const found = [...text.matchAll(/^\s*(?:import|export)\b[^;'"]*?from\s*['"]([^'"]+)['"]/gms), ...text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)];
  return found.map((m) => target(file, m[1]!)).filter((t): t is string => t !== null);
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
