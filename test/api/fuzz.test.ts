import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import fc from 'fast-check';
import { newToken } from '@niclab/api/policy';
import { HTTP_METHODS, loadOpenApi, type OperationObject } from '@niclab/shared/openapi';
import { assertResponse } from '../helpers/contract.js';
import { INJECTION } from '../helpers/injection.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { startStack, testConfig, type Stack } from '../helpers/stack.js';

/** At least this many generated requests, spread over every operation of openapi.yaml. */
const REQUESTS = 10_000;
const AGENT = 'fz';

const admin = newToken();
const reader = newToken();
let redis: TestRedis;
let stack: Stack;
let server: Server;
let base: string;
let knownJob: string;

before(async () => {
  redis = await startTestRedis();
  const dir = mkdtempSync(join(tmpdir(), 'niclab-fuzz-'));
  const policy = join(dir, 'policy.yaml');
  writeFileSync(policy, `requestsPerMinute: 100000000\ntokens:\n  - { name: admin, sha256: "${admin.sha256}", scopes: [admin] }\n  - { name: reader, sha256: "${reader.sha256}", scopes: [read] }\n`);
  // No coordinator: an accepted job stays queued, so every job in Redis can be traced to a 202.
  stack = await startStack(testConfig(redis.url, { policyFile: policy }), { agents: [AGENT] });
  server = stack.app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;
  const created = await fetch(`${base}/v1/jobs`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${admin.token}` }, body: JSON.stringify(validSpec()) });
  assert.equal(created.status, 202);
  knownJob = ((await created.json()) as { id: string }).id;
});
after(async () => {
  server?.closeAllConnections();
  server?.close();
  await stack?.close();
  await redis?.stop();
});

const lo = { agent: AGENT, interface: 'lo' };
const validSpec = (): Record<string, unknown> => ({ engine: 'builtin', duration: 1, flows: [{ from: { ...lo }, to: { ...lo } }] });
const validSchedule = () => ({ name: 'nightly', everySeconds: 3600, spec: validSpec() });

interface Operation {
  operationId: string;
  method: string;
  path: string;
  queryNames: string[];
}

const operations: Operation[] = Object.entries(loadOpenApi().doc.paths).flatMap(([path, item]) =>
  HTTP_METHODS.filter((m) => item[m]).map((m) => {
    const op = item[m] as OperationObject;
    return { operationId: op.operationId, method: m.toUpperCase(), path, queryNames: (op.parameters ?? []).filter((p) => 'in' in p && p.in === 'query').map((p) => (p as { name: string }).name) };
  }),
);

/** Field paths of a job spec where a mutation lands (nested and absent ones included). */
const SPEC_FIELDS = [
  ['engine'], ['test'], ['protocol'], ['duration'], ['bufferLength'], ['socketBuffer'], ['streams'], ['noDelay'], ['direction'], ['interval'], ['repeat'],
  ['flows'], ['flows', 0], ['flows', 0, 'from'], ['flows', 0, 'from', 'interface'], ['flows', 0, 'from', 'agent'], ['flows', 0, 'to', 'interface'], ['flows', 1],
  ['udp'], ['udp', 'packetSize'], ['udp', 'rate'], ['udp', 'rate', 'packetsPerSecond'], ['rr'], ['rr', 'requestSize'],
  ['sweep'], ['sweep', 'streams'], ['sweep', 'bufferLength', 0], ['sweep', 'rate'], ['labels'], ['labels', 'x'], ['tuning'], ['tuning', 'mtu'], ['tuning', 'sysctl'],
  ['__proto__'], ['constructor'],
] as const;

const nasty = fc.oneof(
  fc.constantFrom(...INJECTION),
  fc.jsonValue({ maxDepth: 3 }),
  fc.double(),
  fc.integer(),
  fc.constantFrom(-1, 0, 1e308, 2 ** 53, -(2 ** 31), 4294967296, '1', 'true', null, [], {}),
  fc.string({ maxLength: 300 }),
);

function setPath(target: Record<string, unknown>, path: readonly (string | number)[], value: unknown, remove: boolean): void {
  let node: any = target;
  for (const key of path.slice(0, -1)) {
    if (node[key] === null || typeof node[key] !== 'object') node[key] = typeof key === 'number' ? [] : {};
    node = node[key];
  }
  const last = path.at(-1)!;
  if (remove) delete node[last];
  // A copy: the generators hand out shared constants ({} and []), and one mutation writing into
  // a constant another one placed would make the spec circular (and change the constant).
  else node[last] = structuredClone(value);
}

const mutatedSpec = fc.array(fc.tuple(fc.constantFrom(...SPEC_FIELDS), nasty, fc.boolean()), { minLength: 0, maxLength: 4 }).map((mutations) => {
  const spec = validSpec();
  for (const [path, value, remove] of mutations) setPath(spec, path, value, remove && Math.random() < 0.2);
  return spec;
});

const body = fc.oneof(
  { weight: 5, arbitrary: mutatedSpec.map((spec) => JSON.stringify(spec)) },
  { weight: 2, arbitrary: fc.constant(JSON.stringify(validSpec())) },
  { weight: 2, arbitrary: mutatedSpec.map((spec) => JSON.stringify({ ...validSchedule(), spec })) },
  { weight: 2, arbitrary: fc.tuple(fc.constantFrom('name', 'everySeconds', 'cron', 'timezone', 'spec'), nasty).map(([k, v]) => JSON.stringify({ ...validSchedule(), [k]: v })) },
  { weight: 2, arbitrary: fc.jsonValue().map((v) => JSON.stringify(v)) },
  { weight: 1, arbitrary: fc.oneof(fc.string(), fc.constantFrom('{', '[1,', '{"flows":', '\u0000', 'null', '{"a":1}{"b":2}', '{"__proto__":{"admin":true}}')) },
  { weight: 1, arbitrary: fc.constant(undefined) },
);

const segment = fc.oneof(
  fc.uuid(),
  fc.constantFrom(...INJECTION, '0', '1', '-1', 'sender', 'receiver', 'nightly', AGENT, '%', '..', '%2e%2e'),
  fc.string({ maxLength: 40 }),
  fc.constant('known'),
);

const request = fc.record({
  operation: fc.constantFrom(...operations),
  method: fc.oneof({ weight: 8, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE') }),
  segments: fc.array(segment, { minLength: 4, maxLength: 4 }),
  query: fc.array(fc.tuple(fc.oneof(fc.constantFrom('limit', 'status', 'cursor', 'format', 'agent', 'interface', 'from', 'to', 'baseline', 'candidate', 'minChangePercent', 'label', 'schedule'), fc.string({ maxLength: 12 })), fc.oneof(nasty.map((v) => (typeof v === 'string' ? v : (JSON.stringify(v) ?? ''))), fc.uuid())), { maxLength: 4 }),
  body,
  contentType: fc.oneof({ weight: 6, arbitrary: fc.constant('application/json') }, { weight: 1, arbitrary: fc.constantFrom('application/json; charset=utf-8', 'text/plain', 'application/problem+json', 'application/x-www-form-urlencoded', null) }),
  auth: fc.oneof({ weight: 8, arbitrary: fc.constant(`Bearer ${admin.token}`) }, { weight: 1, arbitrary: fc.constant(`Bearer ${reader.token}`) }, { weight: 1, arbitrary: fc.oneof(fc.constant(null), fc.string({ maxLength: 80 }).map((s) => `Bearer ${s}`), fc.constantFrom(...INJECTION)) }),
  idempotencyKey: fc.option(fc.oneof(fc.constantFrom(...INJECTION), fc.string({ maxLength: 30 })), { freq: 5 }),
});

function headerSafe(value: string): string | null {
  return /^[\t\x20-\x7e]*$/.test(value) ? value : null;
}

test(`${REQUESTS} generated and mutated requests to every endpoint: no 5xx, every error problem+json, every job traceable to a 202`, { timeout: 600_000 }, async () => {
  const accepted = new Set<string>([knownJob]);
  const statuses = new Map<number, number>();
  const seenOps = new Set<string>();
  await fc.assert(
    fc.asyncProperty(request, async (r) => {
      let i = 0;
      const path = r.operation.path.replace(/\{(\w+)\}/g, () => {
        const value = r.segments[i++ % r.segments.length]!;
        return encodeURIComponent(value === 'known' ? knownJob : value);
      });
      const query = new URLSearchParams(r.query.map(([k, v]): [string, string] => [k, v])).toString();
      const method = r.method ?? r.operation.method;
      const headers: Record<string, string> = {};
      if (r.contentType && r.body !== undefined) headers['content-type'] = r.contentType;
      const auth = r.auth === null ? null : headerSafe(r.auth);
      if (auth) headers.authorization = auth;
      const key = r.idempotencyKey === null ? null : headerSafe(r.idempotencyKey);
      if (key) headers['idempotency-key'] = key;
      const response = await fetch(`${base}${path}${query ? `?${query}` : ''}`, {
        method,
        headers,
        body: method === 'GET' || r.body === undefined ? undefined : r.body,
        signal: AbortSignal.timeout(10_000),
      });
      statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
      const type = response.headers.get('content-type') ?? '';
      if (type.startsWith('text/event-stream')) {
        await response.body?.cancel();
        return;
      }
      const text = await response.text();
      assert.ok(response.status < 500, `${method} ${path}: ${response.status} ${text}`);
      if (response.status >= 400) {
        assert.match(type, /^application\/problem\+json/, `${method} ${path} ${response.status}: ${type}`);
        const problem = JSON.parse(text);
        assert.equal(problem.status, response.status);
        assert.equal(typeof problem.title, 'string');
      }
      if (method === r.operation.method && response.status !== 404 && response.status !== 405) {
        seenOps.add(r.operation.operationId);
        const parsed = type.includes('json') && text ? JSON.parse(text) : text;
        assertResponse(r.operation.operationId, { status: response.status, headers: Object.fromEntries(response.headers), body: parsed });
      }
      // Any operation's path with POST may be createJob's (listJobs shares /v1/jobs).
      if (path === '/v1/jobs' && method === 'POST' && response.status === 202) accepted.add(JSON.parse(text).id);
    }),
    { numRuns: REQUESTS, endOnFailure: true, includeErrorInReport: true },
  );
  const total = [...statuses.values()].reduce((a, b) => a + b, 0);
  console.log(`fuzz: ${total} requests, statuses ${JSON.stringify(Object.fromEntries([...statuses].sort()))}, operations answered ${seenOps.size}/${operations.length}`);
  assert.ok(total >= REQUESTS);
  // Every operation saw requests it answered as itself (not 404/405), and both outcomes happened.
  assert.equal(seenOps.size, operations.length, `not reached: ${operations.map((o) => o.operationId).filter((id) => !seenOps.has(id)).join(', ')}`);
  assert.ok((statuses.get(422) ?? 0) > 1000 && (statuses.get(202) ?? 0) >= 5, 'both refusals and acceptances were exercised');

  // Nothing but accepted requests became jobs, or entered the queue agents' work comes from.
  const stored = new Set<string>();
  let cursor: string | undefined;
  do {
    const page = await stack.services.store.list({ limit: 200, cursor });
    for (const job of page!.items) stored.add(job.id);
    cursor = page!.nextCursor ?? undefined;
  } while (cursor);
  assert.deepEqual([...stored].sort(), [...accepted].sort());
  const queued = (await Promise.all([...stored].map((id) => stack.services.store.status(id)))).filter((s) => s === 'queued').length;
  const counts = await stack.services.jobsQueue.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
  assert.equal(Object.values(counts).reduce((a, b) => a + b, 0), queued);
});
