/**
 * /ui is served by the API itself: the page, its stylesheet and every module its bundle
 * imports, with their content types and caching, no address beyond this API, and small.
 */
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import request from 'supertest';
import { loadOpenApi } from '@niclab/shared/runtime/openapi';
import { stackPerFile, type Stack } from '../helpers/stack.js';

let stack: Stack;
stackPerFile({}, (s) => (stack = s));

/** The bundle's budget: every module the page loads, before compression (52 KiB since it acts: the new-job form). */
const BUNDLE_BUDGET_BYTES = 64 * 1024;

test('GET /ui is the page: HTML, revalidated, a CSP that keeps it to this API', async () => {
  const res = await request(stack.app).get('/ui').expect(200);
  assert.equal(res.headers['content-type'], 'text/html; charset=utf-8');
  assert.equal(res.headers['cache-control'], 'no-cache');
  assert.match(String(res.headers['content-security-policy']), /default-src 'none'; script-src 'self'; connect-src 'self'/);
  assert.match(res.text, /<script type="module" src="\/ui\/js\/main\.js"><\/script>/);
  assert.match(res.text, /<link rel="stylesheet" href="\/ui\/assets\/style\.css">/);
});

test('the page needs no token, though the API it reads does: /ui is not an operation', async () => {
  const res = await request(stack.app).get('/ui/assets/style.css').expect(200);
  assert.equal(res.headers['content-type'], 'text/css; charset=utf-8');
  assert.equal(res.headers['cache-control'], 'no-cache');
  assert.ok(res.headers['etag'] || res.headers['last-modified'], 'a revalidation validator');
});

test('every module the page imports is served as JavaScript, none from elsewhere, and the bundle is small', async () => {
  const seen = new Map<string, number>();
  const queue = ['/ui/js/main.js'];
  while (queue.length > 0) {
    const path = queue.shift()!;
    if (seen.has(path)) continue;
    const res = await request(stack.app).get(path);
    assert.equal(res.status, 200, `${path} is served`);
    assert.equal(res.headers['content-type'], 'text/javascript; charset=utf-8', path);
    const text = res.text;
    seen.set(path, Buffer.byteLength(text));
    assert.doesNotMatch(text, /\bhttps?:\/\/(?!www\.w3\.org\/2000\/svg)/, `${path} names no other origin`);
    for (const m of text.matchAll(/^\s*import\b[^;'"]*?['"]([^'"]+)['"]/gm)) {
      const specifier = m[1]!;
      assert.match(specifier, /^\.{1,2}\/.*\.js$/, `${path} imports ${specifier}: a browser resolves relative .js paths only`);
      queue.push(new URL(specifier, `http://x${path}`).pathname);
    }
  }
  assert.ok(seen.size >= 7, `the page's modules: ${[...seen.keys()].join(', ')}`);
  const total = [...seen.values()].reduce((a, b) => a + b, 0);
  assert.ok(total < BUNDLE_BUDGET_BYTES, `the bundle is ${total} bytes, over ${BUNDLE_BUDGET_BYTES}`);
  const page = await request(stack.app).get('/ui');
  assert.doesNotMatch(page.text, /\bhttps?:\/\//, 'the page names no other origin');
});

test('a file the page does not have is a problem+json 404, and nothing outside its folders is served', async () => {
  for (const path of ['/ui/js/nope.js', '/ui/assets/nope.css', '/ui/js/../../src/app.ts', '/ui/js/%2e%2e/%2e%2e/package.json']) {
    const res = await request(stack.app).get(path);
    assert.equal(res.status, 404, path);
    assert.equal(res.headers['content-type'], 'application/problem+json; charset=utf-8', path);
  }
});

test('the page uses only the public API: every path in its source is an operation of openapi.yaml, each write one with that method', () => {
  const root = fileURLToPath(new URL('../../services/api/ui/src/', import.meta.url));
  const files = readdirSync(root, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts'));
  const source = files.map((f) => readFileSync(join(root, f), 'utf8')).join('\n');
  const template = (path: string) => path.replace(/\$\{[^}]*\}/g, 'X');
  const paths = [...source.matchAll(/['`](\/v1\/[^'`?]*)/g)].map((m) => template(m[1]!));
  assert.ok(paths.length >= 6, paths.join(' '));
  const doc = loadOpenApi().doc as unknown as { paths: Record<string, Record<string, unknown>> };
  const operations = Object.entries(doc.paths).map(([t, item]) => ({ re: new RegExp(`^${t.replace(/\{[^}]+\}/g, '[^/]+')}$`), methods: Object.keys(item) }));
  const has = (method: string, path: string) => operations.some((o) => o.re.test(path) && o.methods.includes(method));
  for (const path of paths) assert.ok(has('get', path) || has('post', path) || has('delete', path), `${path} is not an operation of openapi.yaml`);
  // Every change goes through sendJson(METHOD, path); the page has no other way to send one.
  const writes = [...source.matchAll(/sendJson(?:<[^>]*>)?\('(POST|DELETE)', [`'](\/v1\/[^`'?]*)/g)].map((m) => [m[1]!.toLowerCase(), template(m[2]!)] as const);
  assert.deepEqual(new Set(writes.map(([m]) => m)), new Set(['post', 'delete']), writes.join(' '));
  for (const [method, path] of writes) assert.ok(has(method, path), `${method.toUpperCase()} ${path} is not an operation of openapi.yaml`);
  assert.equal([...source.matchAll(/method:\s*['"](POST|PUT|PATCH|DELETE)/gi)].length, 0, 'no request method but sendJson\'s');
});
