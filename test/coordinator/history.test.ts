import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Redis } from 'ioredis';
import { Keys } from '@niclab/shared/stores/keys';
import { Results, type ResultQuery, type RunSummary } from '@niclab/shared/stores/results';
import { redisPerFile, uniquePrefix } from '../helpers/redis.js';

let redis: Redis;

redisPerFile((client) => (redis = client));

const T0 = Date.parse('2026-11-01T00:00:00Z');
const AGENTS = ['a', 'b', 'c', 'd'];
const INTERFACES = ['eth1', 'eth2'];

/** A deterministic mix: one to three flows, agents and interfaces reused, some scheduled, some labelled. */
function summaries(count: number): RunSummary[] {
  let seed = 7;
  const next = (n: number) => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed % n;
  };
  return Array.from({ length: count }, (_, i) => {
    const end = () => ({ agent: AGENTS[next(AGENTS.length)]!, interface: INTERFACES[next(INTERFACES.length)]! });
    const schedule = ['nightly', 'hourly', ''][next(3)]!;
    const hex = i.toString(16).padStart(12, '0');
    return {
      runId: `00000000-0000-4000-8000-${hex}`,
      jobId: `00000000-0000-4000-9000-${hex}`,
      index: 0,
      // Some share an end time, so ties are ordered too.
      finishedAt: new Date(T0 + Math.floor(i / 3) * 60_000).toISOString(),
      status: 'succeeded',
      engine: 'builtin',
      protocol: 'tcp',
      test: 'stream',
      labels: { ...(schedule ? { schedule } : {}), ...(next(2) ? { kernel: ['stock', 'patched'][next(2)]! } : {}) },
      point: {},
      error: null,
      flows: Array.from({ length: 1 + next(3) }, (_, f) => ({
        flowIndex: f, direction: 'forward' as const, src: end(), dst: end(), bitsPerSecond: 1e9, retransmits: 0,
        udpLossRatio: null, jitterSeconds: null, transactionsPerSecond: null, rttP50Seconds: null, pathVerified: true,
      })),
    };
  });
}

/** What a query must answer, worked out by reading every summary. */
function expected(all: RunSummary[], q: ResultQuery): { items: RunSummary[]; truncated: boolean; next: string | null } {
  const [key, value] = q.label ? q.label.split('=') : [];
  const found = all
    .filter((s) => {
      const at = Date.parse(s.finishedAt);
      return at >= q.from && at <= q.to &&
        (!q.schedule || s.labels.schedule === q.schedule) &&
        (!key || s.labels[key] === value) &&
        (!q.agent && !q.interface || s.flows.some((f) => [f.src, f.dst].some((e) => (!q.agent || e.agent === q.agent) && (!q.interface || e.interface === q.interface))));
    })
    .sort((x, y) => Date.parse(x.finishedAt) - Date.parse(y.finishedAt) || (x.runId < y.runId ? -1 : 1));
  const items = found.slice(0, q.limit);
  return { items, truncated: found.length > q.limit, next: found.length > q.limit ? items.at(-1)!.runId : null };
}

const QUERIES: Omit<ResultQuery, 'from' | 'to' | 'limit'>[] = [
  {}, { agent: 'a' }, { agent: 'b', interface: 'eth2' }, { interface: 'eth1' }, { schedule: 'nightly' }, { schedule: 'hourly' }, { schedule: 'hourly', agent: 'c' },
  { label: 'kernel=patched' }, { agent: 'd', label: 'kernel=stock' }, { agent: 'nobody' }, { schedule: 'weekly' },
];

test('every filter answers exactly what reading the whole history would, in order, with truncation, over any range', async () => {
  const results = new Results(redis, new Keys(uniquePrefix()));
  const all = summaries(2500); // more than a page of ids, so paging is exercised
  await results.addSummaries(all);
  const last = T0 + Math.floor(2499 / 3) * 60_000;
  const ranges = [[T0, last], [T0 + 60_000 * 100, T0 + 60_000 * 400], [last, last], [last + 1, last + 10]];
  for (const filter of QUERIES) {
    for (const [from, to] of ranges) {
      for (const limit of [10_000, 7]) {
        const q = { ...filter, from: from!, to: to!, limit };
        assert.deepEqual(await results.query(q), expected(all, q), JSON.stringify(q));
      }
    }
    // Page by page (97 a page, three summaries to a millisecond, over the store's 1,000-id reads): the whole, in order.
    const whole = { ...filter, from: T0, to: last, limit: 10_000 };
    const paged: string[] = [];
    for (let after: string | undefined; ; ) {
      const page = (await results.query({ ...whole, limit: 97, after }))!;
      paged.push(...page.items.map((s) => s.runId));
      if (!page.next) break;
      after = page.next;
    }
    assert.deepEqual(paged, expected(all, whole).items.map((s) => s.runId), `paged: ${JSON.stringify(filter)}`);
  }
});

test('a cursor past the first 1,000 summaries of its millisecond: the next page starts right after it', async () => {
  const results = new Results(redis, new Keys(uniquePrefix()));
  // 1,300 runs that ended in one millisecond: the third page's cursor lies beyond the store's first read of 1,000 ids.
  const all = summaries(1300).map((s) => ({ ...s, finishedAt: new Date(T0).toISOString() }));
  await results.addSummaries(all);
  const whole = { from: T0, to: T0, limit: 10_000 };
  const pages: string[][] = [];
  for (let after: string | undefined; ; ) {
    const page = (await results.query({ ...whole, limit: 600, after }))!;
    pages.push(page.items.map((s) => s.runId));
    if (!page.next) break;
    after = page.next;
  }
  assert.deepEqual(pages.map((p) => p.length), [600, 600, 100]);
  assert.deepEqual(pages.flat(), expected(all, whole).items.map((s) => s.runId));
});

test('retention drops summaries and their index entries, and forgets indexes left empty', async () => {
  const keys = new Keys(uniquePrefix());
  const results = new Results(redis, keys);
  const all = summaries(600);
  await results.addSummaries(all);
  const cutoff = T0 + 100 * 60_000;
  const dropped = all.filter((s) => Date.parse(s.finishedAt) < cutoff);
  assert.equal(await results.expire(cutoff), dropped.length);
  const kept = all.filter((s) => Date.parse(s.finishedAt) >= cutoff);
  for (const filter of QUERIES) {
    const q = { ...filter, from: 0, to: T0 + 86400_000, limit: 10_000 };
    assert.deepEqual(await results.query(q), expected(kept, q), JSON.stringify(q));
  }
  // No index keeps an id of a dropped summary.
  const gone = new Set(dropped.map((s) => s.runId));
  for (const key of await redis.smembers(keys.historyIndexes)) {
    for (const id of await redis.zrange(key, 0, -1)) assert.ok(!gone.has(id), `${key} still has ${id}`);
  }
  assert.equal(await redis.hlen(keys.historyData), kept.length);
  // Everything expires: nothing is left behind, not even the list of indexes.
  await results.expire(T0 + 86400_000);
  assert.deepEqual(await redis.keys(`${keys.prefix}:history:*`), []);
});

test('summaries stored in the layout before indexes are moved on first start, and answer as before', async () => {
  const keys = new Keys(uniquePrefix());
  const all = summaries(1200);
  const legacy = redis.pipeline();
  for (const s of all) legacy.zadd(keys.legacyResults, Date.parse(s.finishedAt), JSON.stringify(s));
  await legacy.exec();
  const results = new Results(redis, keys);
  assert.equal(await results.migrate(), all.length);
  assert.equal(await redis.exists(keys.legacyResults), 0);
  assert.equal(await results.migrate(), 0, 'a second start has nothing to move');
  for (const filter of QUERIES) {
    const q = { ...filter, from: 0, to: T0 + 86400_000, limit: 10_000 };
    assert.deepEqual(await results.query(q), expected(all, q), JSON.stringify(q));
  }
});
