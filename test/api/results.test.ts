import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { test } from 'node:test';
import request from 'supertest';
import type { RunSummary } from '@niclab/shared/stores/results';
import { stackPerFile, type Stack } from '../helpers/stack.js';

/**
 * The history taken away (GET /v1/results): pages by cursor that join to the whole, with no
 * summary twice or missed where several ended in one millisecond, and the same summaries as
 * CSV (a row per flow) and JSON lines. The summaries are written straight into the store, so
 * the expected order and every figure are known here, not read back from niclab.
 */
const exec = promisify(execFile);
let stack: Stack;
stackPerFile({}, (s) => (stack = s));

const START = Date.parse('2026-11-20T00:00:00Z');
const end = (agent: string) => ({ agent, interface: 'eth1' });

/** 40 summaries, four to a millisecond, agents A and B in turn; one without flows, one with two, one label that CSV must quote. */
function summaries(): RunSummary[] {
  return Array.from({ length: 40 }, (_, i): RunSummary => {
    const agent = i % 2 ? 'B' : 'A';
    const flow = (flowIndex: number) => ({
      flowIndex, direction: 'forward' as const, src: end(agent), dst: end('C'), bitsPerSecond: 1e6 * (i + 1) + flowIndex, retransmits: i, udpLossRatio: null,
      jitterSeconds: null, transactionsPerSecond: null, rttP50Seconds: null, pathVerified: true,
    });
    return {
      runId: randomUUID(), jobId: randomUUID(), index: 0, finishedAt: new Date(START + Math.floor(i / 4) * 1000).toISOString(), status: i === 7 ? 'failed' : 'succeeded',
      engine: 'builtin', protocol: 'tcp', test: 'stream', labels: i === 5 ? { note: 'a "quoted", comma' } : { kernel: 'stock' }, point: i % 3 ? {} : { bufferLength: 8192 },
      error: i === 7 ? 'engine_failed' : null, flows: i === 7 ? [] : i === 9 ? [flow(0), flow(1)] : [flow(0)],
    };
  });
}

/** RFC 4180 as a reader parses it: quoted cells, doubled quotes. */
function parseCsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let cell = '';
  let quoted = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') (cell += '"'), i++;
      else if (c === '"') quoted = false;
      else cell += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') row.push(cell), (cell = '');
    else if (c === '\n') row.push(cell), rows.push(row), (row = []), (cell = '');
    else cell += c;
  }
  return rows;
}

const RANGE = `from=${new Date(START - 1000).toISOString()}&to=${new Date(START + 60_000).toISOString()}`;

test('paged by cursor, the pages join to the whole history, in end-time then run-id order, none twice or missed within a millisecond', async () => {
  const written = summaries();
  await stack.services.results.addSummaries(written);
  // Redis orders one millisecond's members by their bytes.
  const byBytes = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  const expected = [...written].sort((a, b) => byBytes(a.finishedAt, b.finishedAt) || byBytes(a.runId, b.runId)).map((s) => s.runId);
  const whole = await request(stack.app).get(`/v1/results?${RANGE}&limit=10000`);
  assert.equal(whole.status, 200);
  assert.deepEqual(whole.body.items.map((s: RunSummary) => s.runId), expected);
  assert.deepEqual([whole.body.truncated, whole.body.next], [false, null]);

  for (const [filter, limit] of [['', 7], ['&agent=B', 3], ['&agent=A', 4]] as const) {
    const seen: string[] = [];
    let pages = 0;
    for (let cursor: string | null = null; ; pages++) {
      const res = await request(stack.app).get(`/v1/results?${RANGE}${filter}&limit=${limit}${cursor ? `&cursor=${cursor}` : ''}`);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      seen.push(...res.body.items.map((s: RunSummary) => s.runId));
      cursor = res.body.next;
      if (!cursor) break;
      assert.equal(res.body.items.length, limit);
      assert.equal(res.headers['x-next-cursor'], cursor);
      assert.match(res.headers.link!, new RegExp(`^</v1/results\\?.*cursor=${cursor}.*>; rel="next"$`));
    }
    const want = written.filter((s) => !filter || s.flows.some((f) => f.src.agent === filter.slice(-1))).map((s) => s.runId);
    assert.deepEqual(seen, expected.filter((id) => want.includes(id)), `agent${filter || ' any'}, ${limit} a page`);
    assert.equal(pages + 1, Math.ceil(want.length / limit), `pages of ${filter || 'all'}`);
  }

  const gone = await request(stack.app).get(`/v1/results?${RANGE}&cursor=${randomUUID()}`);
  assert.equal(gone.status, 404);
  assert.match(gone.headers['content-type']!, /^application\/problem\+json/);
  assert.match(gone.body.detail, /cursor/);
});

test('as CSV a row per flow of each summary, quoted where it must be; as JSON lines one summary a line; both with the next cursor', async () => {
  const all = (await request(stack.app).get(`/v1/results?${RANGE}&limit=10000`)).body.items as RunSummary[];
  const csv = await request(stack.app).get(`/v1/results?${RANGE}&limit=10000&format=csv`);
  assert.equal(csv.status, 200);
  assert.match(csv.headers['content-type']!, /^text\/csv/);
  const [header, ...rows] = parseCsv(csv.text);
  assert.deepEqual(header!.slice(0, 3), ['finishedAt', 'jobId', 'runId']);
  const col = (name: string) => header!.indexOf(name);
  const expected = all.flatMap((s) => (s.flows.length ? s.flows.map((f) => [s.runId, String(f.flowIndex), String(f.bitsPerSecond), `${f.src.agent}:eth1`]) : [[s.runId, '', '', '']]));
  assert.deepEqual(rows.map((r) => [r[col('runId')], r[col('flowIndex')], r[col('bitsPerSecond')], r[col('from')]]), expected);
  assert.equal(rows.length, 41, '38 summaries of one flow, one of two, one without (a row of its own)');
  assert.ok(rows.every((r) => r.length === header!.length), 'every row as wide as the header');
  assert.ok(rows.some((r) => r[col('labels')] === 'note=a "quoted", comma'));
  assert.ok(rows.some((r) => r[col('point')] === 'bufferLength=8192'));
  assert.equal(rows.find((r) => r[col('flowIndex')] === '')![col('error')], 'engine_failed');

  const jsonl = await request(stack.app).get(`/v1/results?${RANGE}&limit=10&format=jsonl`).buffer(true).parse((res, done) => {
    let text = '';
    res.on('data', (c: Buffer) => (text += c.toString()));
    res.on('end', () => done(null, text));
  });
  assert.match(jsonl.headers['content-type']!, /^application\/x-ndjson/);
  const lines = (jsonl.body as string).trimEnd().split('\n');
  assert.deepEqual(lines.map((l) => JSON.parse(l)), all.slice(0, 10));
  assert.equal(jsonl.headers['x-next-cursor'], all[9]!.runId);
});

test('as OpenMetrics a Prometheus TSDB takes it: promtool makes blocks of it, and dumps back every figure of every flow at its run\'s end', async () => {
  const all = (await request(stack.app).get(`/v1/results?${RANGE}&limit=10000`)).body.items as RunSummary[];
  const om = await request(stack.app).get(`/v1/results?${RANGE}&limit=10000&format=openmetrics`).buffer(true).parse((res, done) => {
    let text = '';
    res.on('data', (c: Buffer) => (text += c.toString()));
    res.on('end', () => done(null, text));
  });
  assert.equal(om.status, 200);
  assert.match(om.headers['content-type']!, /^application\/openmetrics-text; version=1\.0\.0/);
  const dir = mkdtempSync(join(tmpdir(), 'niclab-om-'));
  try {
    writeFileSync(join(dir, 'history.om'), om.body as string);
    await exec('promtool', ['tsdb', 'create-blocks-from', 'openmetrics', join(dir, 'history.om'), join(dir, 'data')]);
    // promtool 2.42's dump reads a WAL before the blocks, and create-blocks makes none.
    mkdirSync(join(dir, 'data', 'wal'));
    const { stdout } = await exec('promtool', ['tsdb', 'dump', '--match={__name__=~"niclab_history_(throughput_bits_per_second|retransmits)"}', join(dir, 'data')], { maxBuffer: 16 << 20 });
    // `{__name__="...", label="value", ...} value timestamp-ms`, one line per sample.
    const dumped = stdout.trim().split('\n').map((line) => {
      const [, labels, value, at] = /^\{(.*)\} (\S+) (\d+)$/.exec(line)!;
      const l = Object.fromEntries([...labels!.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((m) => [m[1], m[2]]));
      return `${l.__name__} ${l.src_agent} ${l.flow} ${l.point} ${Number(value)} ${at}`;
    }).sort();
    const expected = all.flatMap((s) => s.flows.flatMap((f) => [
      `niclab_history_throughput_bits_per_second ${f.src.agent} ${f.flowIndex} ${Object.keys(s.point).length ? 'bufferLength=8192' : '-'} ${f.bitsPerSecond} ${Date.parse(s.finishedAt)}`,
      `niclab_history_retransmits ${f.src.agent} ${f.flowIndex} ${Object.keys(s.point).length ? 'bufferLength=8192' : '-'} ${f.retransmits} ${Date.parse(s.finishedAt)}`,
    ])).sort();
    // Four summaries to a millisecond, but each on a series of its own only when link, point and flow differ.
    const distinct = new Set(expected.map((e) => e.split(' ').filter((_, i) => i !== 4).join(' ')));
    assert.equal(dumped.length, distinct.size, 'one sample per series and millisecond');
    assert.ok(dumped.every((d) => expected.includes(d)), `every sample is a figure of a flow at its run's end: ${dumped.filter((d) => !expected.includes(d)).slice(0, 3).join('; ')}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
