import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtempSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import fc from 'fast-check';
import { newToken } from '@niclab/api/policy';
import { Coordinator } from '@niclab/coordinator/coordinator';
import { HTTP_METHODS, loadOpenApi, type OperationObject } from '@niclab/shared/runtime/openapi';
import { assertProblem, assertResponse } from '../helpers/contract.js';
import { syntheticSchedule } from '../helpers/changes.js';
import { INJECTION } from '../helpers/injection.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { silentLog, startStack, testConfig, type Stack } from '../helpers/stack.js';

/**
 * Generated requests, drawn evenly over the 22 operations of openapi.yaml (about 240 each):
 * enough that an operation whose valid requests are one in fifteen (getRawOutput, which needs
 * four path values right) answers 2xx in all but one run in ten million.
 */
const REQUESTS = 5_000;
/** NICLAB_FUZZ_SEED replays a run: the requests and their order are the seed's alone. */
const SEED = Number(process.env.NICLAB_FUZZ_SEED ?? Date.now() % 2 ** 31);
const AGENT = 'fz';
const SCHEDULE = 'nightly';
const JOB_STATUSES = ['queued', 'running', 'succeeded', 'failed', 'canceled'];
const TERMINAL = ['succeeded', 'failed', 'canceled'];

const admin = newToken();
const reader = newToken();
let redis: TestRedis;
let stack: Stack;
let server: Server;
let base: string;
/** Jobs made before the fuzzing: a builtin and an iperf3 one that ran (runs, results, raw output), one still queued. */
const seeded: string[] = [];
/** A real change point, so acknowledgeChange has one to answer 200 for, and the jobs its synthetic series made (no 202 made them). */
const changes: string[] = [];
const synthetic = new Set<string>();
/** Every job the API accepted (seeds and 202s): the pool path and query ids are drawn from. */
const accepted: string[] = [];

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
  const response = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${admin.token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  return { status: response.status, body: await response.json() };
}

async function finished(id: string): Promise<any> {
  // A 1 s run with 10 s setup, up to three attempts, on a loaded 2-core machine.
  for (const deadline = Date.now() + 60_000; Date.now() < deadline; await sleep(100)) {
    const { body } = await call('GET', `/v1/jobs/${id}`);
    if (TERMINAL.includes(body.status)) return body;
  }
  throw new Error(`seed job ${id} did not finish within 60 s`);
}

before(async () => {
  redis = await startTestRedis();
  const dir = mkdtempSync(join(tmpdir(), 'niclab-fuzz-'));
  const policy = join(dir, 'policy.yaml');
  writeFileSync(policy, `requestsPerMinute: 100000000\ntokens:\n  - { name: admin, sha256: "${admin.sha256}", scopes: [admin] }\n  - { name: reader, sha256: "${reader.sha256}", scopes: [read] }\n`);
  // The product's setup allowance (NICLAB_SETUP_SECONDS' default), for the seed runs on a loaded machine.
  const config = testConfig(redis.url, { policyFile: policy, setupSeconds: 10 });
  stack = await startStack(config, { agents: [AGENT] });
  server = stack.app.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`;

  // Jobs that ran, so runs, reports, comparisons, results and raw output have something to answer
  // with. The coordinator stops before the fuzzing: from then on an accepted job stays queued,
  // so every job in Redis can be traced to a 202.
  const coordinator = new Coordinator(config, silentLog);
  await coordinator.start();
  try {
    for (const engine of ['builtin', 'iperf3']) {
      const created = await call('POST', '/v1/jobs', { ...validSpec(), engine, retries: 2 });
      assert.equal(created.status, 202, JSON.stringify(created.body));
      const job = await finished(created.body.id);
      assert.equal(job.status, 'succeeded', `seed ${engine} job: ${JSON.stringify(job.error ?? job.runs)}`);
      seeded.push(job.id);
    }
  } finally {
    await coordinator.stop();
  }
  const queued = await call('POST', '/v1/jobs', validSpec());
  assert.equal(queued.status, 202, JSON.stringify(queued.body));
  seeded.push(queued.body.id);
  accepted.push(...seeded);
  const schedule = await call('POST', '/v1/schedules', validSchedule(SCHEDULE));
  assert.equal(schedule.status, 201, JSON.stringify(schedule.body));
  const fire = syntheticSchedule(stack.services.store, 'fuzz-step');
  for (const mbit of [...Array<number>(12).fill(100), ...Array<number>(6).fill(90)]) await fire(mbit, mbit * 125_000);
  const found = await call('GET', '/v1/changes');
  assert.equal(found.body.items.length, 1, 'the synthetic 10% step makes one change point');
  changes.push(found.body.items[0].id);
  for (const id of await storedJobs()) if (!accepted.includes(id)) synthetic.add(id);
});

async function storedJobs(): Promise<Set<string>> {
  const stored = new Set<string>();
  let cursor: string | undefined;
  do {
    const page = await stack.services.store.list({ limit: 200, cursor });
    for (const job of page!.items) stored.add(job.id);
    cursor = page!.nextCursor ?? undefined;
  } while (cursor);
  return stored;
}
after(async () => {
  server?.closeAllConnections();
  server?.close();
  await stack?.close();
  await redis?.stop();
});

const lo = { agent: AGENT, interface: 'lo' };
const validSpec = (): Record<string, unknown> => ({ engine: 'builtin', duration: 1, flows: [{ from: { ...lo }, to: { ...lo } }] });
const validSchedule = (name: string) => ({ name, everySeconds: 3600, spec: validSpec() });

interface Operation {
  operationId: string;
  method: string;
  path: string;
  pathNames: string[];
  query: { name: string; required: boolean }[];
}

const { doc } = loadOpenApi();
const operations: Operation[] = Object.entries(doc.paths).flatMap(([path, item]) =>
  HTTP_METHODS.filter((m) => item[m]).map((m) => {
    const op = item[m] as OperationObject;
    const query = (op.parameters ?? []).filter((p) => 'in' in p && p.in === 'query').map((p) => ({ name: p.name, required: p.required ?? false }));
    return { operationId: op.operationId, method: m.toUpperCase(), path, pathNames: [...path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!), query };
  }),
);

/** Which operation of openapi.yaml a request reached: by its path as sent (after URL normalization) and method. */
function route(method: string, pathname: string): { operation?: Operation; pathKnown: boolean } {
  const matching = operations.filter((op) => new RegExp(`^${op.path.replace(/\{\w+\}/g, '[^/]+')}$`, 'i').test(pathname));
  return { operation: matching.find((op) => op.method === method), pathKnown: matching.length > 0 };
}

/**
 * A value the fuzzer names before the server exists: a job (one of the seeds, or any accepted
 * job), resolved when the request is sent. Everything else is a plain string.
 */
type Value = string | { job: 'seed' | 'any' | 'change'; n: number };

function resolve(value: Value): string {
  if (typeof value === 'string') return value;
  const pool = value.job === 'seed' ? seeded : value.job === 'change' ? changes : accepted;
  return pool[value.n % pool.length]!;
}

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
const nastyText = nasty.map((v) => (typeof v === 'string' ? v : (JSON.stringify(v) ?? '')));

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

// One mutation in ten removes its field instead of setting it.
const mutatedSpec = fc.array(fc.tuple(fc.constantFrom(...SPEC_FIELDS), nasty, fc.nat(9)), { minLength: 0, maxLength: 4 }).map((mutations) => {
  const spec = validSpec();
  for (const [path, value, roll] of mutations) setPath(spec, path, value, roll === 0);
  return spec;
});

const scheduleName = fc.oneof({ weight: 4, arbitrary: fc.constant(SCHEDULE) }, { weight: 1, arbitrary: fc.constantFrom('weekly', 'a', 'x.y_z-1') });
const garbage = fc.oneof(fc.string(), fc.constantFrom('{', '[1,', '{"flows":', '\u0000', 'null', '{"a":1}{"b":2}', '{"__proto__":{"admin":true}}'));
const json = (v: unknown) => JSON.stringify(v);

/** A body for the operation: mostly what it takes (valid or mutated), sometimes anything. */
function bodyFor(op: Operation): fc.Arbitrary<string | undefined> {
  const anything = [
    { weight: 1, arbitrary: fc.jsonValue().map(json) },
    { weight: 1, arbitrary: garbage },
    { weight: 1, arbitrary: fc.constant(undefined) },
  ];
  if (op.operationId === 'createJob') {
    return fc.oneof(
      { weight: 4, arbitrary: fc.constant(json(validSpec())) },
      { weight: 4, arbitrary: mutatedSpec.map(json) },
      ...anything,
    );
  }
  if (op.operationId === 'createSchedule') {
    return fc.oneof(
      { weight: 4, arbitrary: scheduleName.map((name) => json(validSchedule(name))) },
      { weight: 2, arbitrary: fc.tuple(scheduleName, mutatedSpec).map(([name, spec]) => json({ ...validSchedule(name), spec })) },
      { weight: 2, arbitrary: fc.tuple(fc.constantFrom('name', 'everySeconds', 'cron', 'timezone', 'spec'), nasty).map(([k, v]) => json({ ...validSchedule(SCHEDULE), [k]: v })) },
      ...anything,
    );
  }
  if (op.operationId === 'previewGroup') {
    const members = fc.record({ labels: fc.constantFrom({}, { rack: 'a' }), interface: fc.constantFrom('lo', 'eth1') });
    return fc.oneof(
      { weight: 4, arbitrary: fc.tuple(fc.constantFrom('mesh', 'star'), members, members).map(([shape, m, c]) => json(shape === 'mesh' ? { shape, members: m } : { shape, members: m, center: c })) },
      { weight: 2, arbitrary: fc.tuple(fc.constantFrom('shape', 'members', 'a', 'center', 'starDirection'), nasty).map(([k, v]) => json({ shape: 'mesh', members: { labels: {}, interface: 'lo' }, [k]: v })) },
      ...anything,
    );
  }
  if (op.operationId === 'acknowledgeChange') {
    return fc.oneof(
      { weight: 4, arbitrary: fc.record({ as: fc.constantFrom('expected', 'known-regression'), note: fc.string({ maxLength: 40 }) }, { requiredKeys: ['as'] }).map(json) },
      { weight: 2, arbitrary: fc.tuple(fc.constantFrom('as', 'note', 'by', 'x'), nasty).map(([k, v]) => json({ as: 'expected', [k]: v })) },
      ...anything,
    );
  }
  // Operations without a body ignore one, as HTTP allows.
  return fc.oneof({ weight: 6, arbitrary: fc.constant(undefined) }, ...anything);
}

const jobRef: fc.Arbitrary<Value> = fc.oneof(
  { weight: 3, arbitrary: fc.nat().map((n) => ({ job: 'seed' as const, n })) },
  { weight: 1, arbitrary: fc.nat().map((n) => ({ job: 'any' as const, n })) },
);

/** Values a path parameter takes when it is right; the fuzzer picks them four times in five. */
function validPathValue(op: Operation, name: string): fc.Arbitrary<Value> {
  if (name === 'id' && op.path.startsWith('/v1/agents')) return fc.constant(AGENT);
  if (name === 'id' && op.path.startsWith('/v1/changes')) return fc.constant({ job: 'change' as const, n: 0 });
  if (name === 'id') return jobRef;
  if (name === 'name') return scheduleName;
  if (name === 'end') return fc.constantFrom('sender', 'receiver');
  return fc.constant('0'); // index, flow: each seed job has one run of one flow
}

const segment: fc.Arbitrary<Value> = fc.oneof(
  fc.uuid(),
  fc.constantFrom(...INJECTION, '0', '1', '-1', 'sender', 'receiver', SCHEDULE, AGENT, '%', '..', '%2e%2e', ''),
  fc.string({ maxLength: 40 }),
  jobRef,
);

const HOUR = 3600_000;
const instant = fc.integer({ min: -48, max: 48 }).map((hours) => ({ at: hours }));

/** Values a query parameter takes when it is right. */
function validQueryValue(name: string): fc.Arbitrary<Value | { at: number }> {
  switch (name) {
    case 'limit': return fc.integer({ min: 1, max: 200 }).map(String);
    case 'status': return fc.constantFrom(...JOB_STATUSES);
    case 'format': return fc.constantFrom('json', 'csv', 'table');
    case 'agent': return fc.constant(AGENT);
    case 'interface': return fc.constant('lo');
    case 'schedule': return scheduleName;
    case 'label': return fc.constantFrom('schedule=nightly', 'n=1', 'x=');
    case 'from': case 'to': return instant;
    case 'baseline': case 'candidate': return jobRef;
    case 'minChangePercent': return fc.constantFrom('0', '1', '2.5', '100');
    default: return nastyText;
  }
}

const OTHER_QUERY_NAMES = ['limit', 'status', 'cursor', 'format', 'agent', 'interface', 'from', 'to', 'baseline', 'candidate', 'minChangePercent', 'label', 'schedule'];

/** The declared query parameters (required ones nearly always), each right or nasty, and now and then one it does not declare. */
function queryFor(op: Operation) {
  const declared = op.query.map(({ name, required }) =>
    fc.option(fc.oneof({ weight: 4, arbitrary: validQueryValue(name) }, { weight: 1, arbitrary: nastyText }).map((value) => [name, value] as const), { freq: required ? 20 : 2 }),
  );
  const undeclared = fc.array(fc.tuple(fc.oneof(fc.constantFrom(...OTHER_QUERY_NAMES), fc.string({ maxLength: 12 })), fc.oneof(nastyText, fc.uuid())), { maxLength: 3 });
  return fc.tuple(fc.tuple(...declared), fc.oneof({ weight: 4, arbitrary: fc.constant([]) }, { weight: 1, arbitrary: undeclared })).map(([named, extra]) => [
    ...named.filter((pair) => pair !== null),
    ...extra,
  ]);
}

function resolveQuery(value: Value | { at: number }): string {
  return typeof value === 'object' && 'at' in value ? new Date(Date.now() + value.at * HOUR).toISOString() : resolve(value);
}

const requests = fc.constantFrom(...operations).chain((op) =>
  fc.record({
    operation: fc.constant(op),
    method: fc.oneof({ weight: 8, arbitrary: fc.constant(op.method) }, { weight: 1, arbitrary: fc.constantFrom('GET', 'POST', 'PUT', 'PATCH', 'DELETE') }),
    params: fc.tuple(...op.pathNames.map((name) => fc.oneof({ weight: 4, arbitrary: validPathValue(op, name) }, { weight: 1, arbitrary: segment }))),
    query: queryFor(op),
    body: bodyFor(op),
    contentType: fc.oneof({ weight: 6, arbitrary: fc.constant('application/json') }, { weight: 1, arbitrary: fc.constantFrom('application/json; charset=utf-8', 'text/plain', 'application/problem+json', 'application/x-www-form-urlencoded', null) }),
    auth: fc.oneof({ weight: 8, arbitrary: fc.constant(`Bearer ${admin.token}`) }, { weight: 1, arbitrary: fc.constant(`Bearer ${reader.token}`) }, { weight: 1, arbitrary: fc.oneof(fc.constant(null), fc.string({ maxLength: 80 }).map((s) => `Bearer ${s}`), fc.constantFrom(...INJECTION)) }),
    idempotencyKey: fc.option(fc.oneof(fc.uuid(), fc.constantFrom(...INJECTION), fc.string({ maxLength: 30 })), { freq: 2 }),
  }),
);

function headerSafe(value: string): string | null {
  return /^[\t\x20-\x7e]*$/.test(value) ? value : null;
}

const EVENT_TYPES = ['status', 'progress', 'run', 'interval'];

/**
 * Reads a job's event stream: the whole of it when its first status is final (the stream ends
 * after it), else its first event. Returns the text read; asserts each event's shape.
 */
async function readEvents(response: Response, label: string): Promise<string> {
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = '';
  let ended = false;
  let first: { status?: string } | undefined;
  const events = () => text.split('\n\n').slice(0, -1).filter((block) => !block.startsWith(':'));
  while (!ended) {
    const { value, done } = await reader.read();
    if (done) ended = true;
    else text += value;
    if (!first && events().length > 0) first = JSON.parse(events()[0]!.split('\n').find((l) => l.startsWith('data: '))!.slice('data: '.length));
    if (first && !TERMINAL.includes(first.status ?? '')) break;
  }
  await reader.cancel().catch(() => undefined);
  const parsed = events().map((block) => {
    const lines = block.split('\n');
    // Its id, for a reconnect (Last-Event-ID): absent only before the job's first event.
    if (lines[0]?.startsWith('id: ')) assert.match(lines.shift()!, /^id: \d+-\d+$/, `${label}: an event's id`);
    const [event, data, ...rest] = lines;
    assert.match(event ?? '', /^event: \w+$/, `${label}: an event block starts with its name: ${JSON.stringify(block)}`);
    assert.match(data ?? '', /^data: /, `${label}: then its data: ${JSON.stringify(block)}`);
    assert.deepEqual(rest, [], `${label}: one data line per event`);
    const type = event!.slice('event: '.length);
    const payload = JSON.parse(data!.slice('data: '.length)) as { type: string; status?: string };
    assert.ok(EVENT_TYPES.includes(type), `${label}: event type ${type}`);
    assert.equal(payload.type, type, `${label}: the data's type is the event's name`);
    return payload;
  });
  assert.ok(parsed.length > 0, `${label}: the stream ${ended ? 'ended' : 'stopped'} before its first event: ${JSON.stringify(text)}`);
  assert.equal(parsed[0]!.type, 'status', `${label}: the first event is the job's current status`);
  assert.ok(JOB_STATUSES.includes(parsed[0]!.status ?? ''), `${label}: status ${parsed[0]!.status}`);
  if (ended) {
    assert.ok(TERMINAL.includes(parsed.at(-1)!.status ?? ''), `${label}: the stream ends only after the job's final status, got ${JSON.stringify(parsed.at(-1))}`);
    assert.equal(text.endsWith('\n\n') ? '' : text.split('\n\n').at(-1), '', `${label}: the stream ended mid-event`);
  }
  return text;
}

test(`${REQUESTS} generated and mutated requests, every operation answering 2xx: no 5xx, every body as openapi.yaml says, every job traceable to a 202`, { timeout: 900_000 }, async () => {
  console.log(`fuzz seed ${SEED} (NICLAB_FUZZ_SEED=${SEED} replays it)`);
  const statuses = new Map<number, number>();
  /** Operations that answered 2xx with a body checked against openapi.yaml. */
  const answered = new Map<string, number>();
  // The server's own count of the requests it took, beside what the property saw answered.
  let served = 0;
  const count = () => (served += 1);
  server.on('request', count);
  await fc.assert(
    fc.asyncProperty(requests, async (r) => {
      const values = r.params.map((value) => encodeURIComponent(resolve(value)));
      let i = 0;
      const path = r.operation.path.replace(/\{\w+\}/g, () => values[i++]!);
      const query = new URLSearchParams(r.query.map(([k, v]): [string, string] => [k, resolveQuery(v)])).toString();
      const url = new URL(`${base}${path}${query ? `?${query}` : ''}`);
      const method = r.method;
      const headers: Record<string, string> = {};
      if (r.contentType && r.body !== undefined) headers['content-type'] = r.contentType;
      const auth = r.auth === null ? null : headerSafe(r.auth);
      if (auth) headers.authorization = auth;
      const key = r.idempotencyKey === null ? null : headerSafe(r.idempotencyKey);
      if (key) headers['idempotency-key'] = key;
      const response = await fetch(url, {
        method,
        headers,
        body: method === 'GET' || r.body === undefined ? undefined : r.body,
        signal: AbortSignal.timeout(10_000),
      });
      const label = `${method} ${url.pathname}${url.search} ${response.status}`;
      statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
      const type = response.headers.get('content-type') ?? '';
      // Before anything else, event streams included.
      if (response.status >= 500) assert.fail(`${label}: ${await response.text()}`);
      const text = type.startsWith('text/event-stream') ? await readEvents(response, label) : await response.text();
      const body = /json/.test(type) && text ? JSON.parse(text) : text;
      const checked = { status: response.status, headers: Object.fromEntries(response.headers), body, text };
      if (response.status >= 400) {
        assert.match(type, /^application\/problem\+json/, `${label}: ${type}`);
        assert.equal(body.status, response.status, `${label}: the problem's status`);
      }
      // The operation the request reached answers as openapi.yaml says, errors included; a path
      // or method that none serves answers the contract's problem.
      const { operation } = route(method, url.pathname);
      if (operation) assertResponse(operation.operationId, checked);
      else assertProblem(checked);
      if (operation && response.status < 300) answered.set(operation.operationId, (answered.get(operation.operationId) ?? 0) + 1);
      if (operation?.operationId === 'createJob' && response.status === 202) accepted.push(body.id);
    }),
    { numRuns: REQUESTS, seed: SEED, endOnFailure: true, includeErrorInReport: true },
  );
  server.off('request', count);
  const total = [...statuses.values()].reduce((a, b) => a + b, 0);
  console.log(`fuzz seed ${SEED}: ${total} requests, statuses ${JSON.stringify(Object.fromEntries([...statuses].sort()))}, 2xx per operation ${JSON.stringify(Object.fromEntries([...answered].sort()))}`);
  // Every drawn request reached the server and was answered (a property that returned before
  // sending would still be counted by fast-check): the server took exactly as many as were drawn.
  assert.equal(served, REQUESTS, `the server took ${served} requests; fast-check drew ${REQUESTS}, and ${total} were answered`);
  assert.equal(total, served);
  const unanswered = operations.map((o) => o.operationId).filter((id) => !answered.has(id));
  assert.deepEqual(unanswered, [], `fuzz seed ${SEED}: operations that never answered a schema-checked 2xx: ${unanswered.join(', ')}`);
  assert.ok((statuses.get(422) ?? 0) > 1000 && (statuses.get(202) ?? 0) >= 5, `fuzz seed ${SEED}: both refusals and acceptances were exercised`);

  // Nothing but accepted requests became jobs, or entered the queue agents' work comes from.
  const stored = new Set([...(await storedJobs())].filter((id) => !synthetic.has(id)));
  assert.deepEqual([...stored].sort(), [...new Set(accepted)].sort(), `fuzz seed ${SEED}: every job traceable to a 202`);
  const queued = (await Promise.all([...stored].map((id) => stack.services.store.status(id)))).filter((s) => s === 'queued').length;
  const counts = await stack.services.jobsQueue.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
  assert.equal(Object.values(counts).reduce((a, b) => a + b, 0), queued);
});
