/**
 * History at scale: 10,000 and 100,000 stored run summaries (1,000 per day, so a day's range
 * holds the same number either way), stored with their indexes as the job store stores them.
 * Redis memory per summary, and GET /v1/results through the real API, median and p99 of 20:
 * one day (all of it, and filtered by agent), one agent over the whole history, and the first
 * 100 of a schedule.
 */
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { createApp } from '@niclab/api/app';
import { createApiServices } from '@niclab/api/services';
import type { RunSummary } from '@niclab/shared/stores/results';
import { startTestRedis, uniquePrefix } from '../test/helpers/redis.js';
import { silentLog, testConfig } from '../test/helpers/stack.js';
import { median, round, writeResult } from './lib.js';

const PER_DAY = 1000;
const QUERIES = 20;
const DAY_MS = 24 * 3600 * 1000;
const quantile = (values: number[], q: number) => [...values].sort((a, b) => a - b)[Math.min(values.length - 1, Math.ceil(q * values.length) - 1)]!;

/** A summary as a nightly two-host TCP run leaves it: one flow, a schedule label, a sweep point. */
function summary(i: number, finishedAt: number): RunSummary {
  const host = (n: number) => `host${String(n % 1000).padStart(4, '0')}`;
  const hex = i.toString(16).padStart(12, '0');
  return {
    runId: `00000000-0000-4000-8000-${hex}`,
    jobId: `00000000-0000-4000-9000-${hex}`,
    index: i % 10,
    finishedAt: new Date(finishedAt).toISOString(),
    status: 'succeeded',
    engine: 'builtin',
    protocol: 'tcp',
    test: 'stream',
    labels: { schedule: 'nightly', scheduledFor: new Date(finishedAt - 12_000).toISOString() },
    point: { bufferLength: 131072 },
    error: null,
    flows: [{ flowIndex: 0, direction: 'forward', src: { agent: host(i), interface: 'eth1' }, dst: { agent: host(i + 1), interface: 'eth1' }, bitsPerSecond: 9.41e9 + (i % 97) * 1e6, retransmits: i % 13, udpLossRatio: null, jitterSeconds: null, transactionsPerSecond: null, rttP50Seconds: null, pathVerified: true }],
  };
}

async function history(count: number) {
  const redis = await startTestRedis();
  const config = testConfig(redis.url, { prefix: uniquePrefix() });
  const services = createApiServices(config, silentLog);
  try {
    const days = count / PER_DAY;
    const end = Date.now();
    const start = end - days * DAY_MS;
    const before = Number(/used_memory:(\d+)/.exec(await services.redis.info('memory'))![1]);
    let bytes = 0;
    for (let i = 0; i < count; i += 1000) {
      const batch: RunSummary[] = [];
      for (let j = i; j < Math.min(count, i + 1000); j++) batch.push(summary(j, start + (j + 0.5) * (DAY_MS / PER_DAY)));
      bytes += batch.reduce((sum, s) => sum + JSON.stringify(s).length, 0);
      // As the job store adds them: the summary and its indexes.
      await services.results.addSummaries(batch);
    }
    const after = Number(/used_memory:(\d+)/.exec(await services.redis.info('memory'))![1]);
    const server = createApp(services).listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/results`;
    // The middle day of the range, so both sizes query a day with neighbours on both sides.
    const from = new Date(start + Math.floor(days / 2) * DAY_MS).toISOString();
    const to = new Date(start + (Math.floor(days / 2) + 1) * DAY_MS).toISOString();
    const timed = async (query: string) => {
      const times: number[] = [];
      let items = 0;
      for (let i = 0; i < QUERIES + 2; i++) {
        const t0 = performance.now();
        const body = (await (await fetch(`${base}?${query}`)).json()) as { items: unknown[] };
        if (i >= 2) times.push(performance.now() - t0);
        items = body.items.length;
      }
      return { items, medianMs: round(median(times), 2), p99Ms: round(quantile(times, 0.99), 2) };
    };
    const day = await timed(new URLSearchParams({ from, to, limit: '10000' }).toString());
    const byAgent = await timed(new URLSearchParams({ from, to, agent: 'host0500', limit: '10000' }).toString());
    // One link's whole history, as a Grafana panel over the full retention asks for it.
    const whole = { from: new Date(start).toISOString(), to: new Date(end).toISOString(), limit: '10000' };
    const agentAllTime = await timed(new URLSearchParams({ ...whole, agent: 'host0500' }).toString());
    const scheduleAllTime = await timed(new URLSearchParams({ ...whole, schedule: 'nightly', limit: '100' }).toString());
    server.close();
    return { summaries: count, days, memoryPerSummaryBytes: Math.round((after - before) / count), jsonPerSummaryBytes: Math.round(bytes / count), day, byAgent, agentAllTime, scheduleAllTime };
  } finally {
    await services.close();
    await redis.stop();
  }
}

const small = await history(10_000);
const large = await history(100_000);
for (const h of [small, large]) {
  console.log(`${h.summaries} summaries: ${h.memoryPerSummaryBytes} B of Redis memory each (${h.jsonPerSummaryBytes} B of JSON); a day (${h.day.items}) in ${h.day.medianMs} ms median, ${h.day.p99Ms} ms p99; one agent's day (${h.byAgent.items}) in ${h.byAgent.medianMs} ms; one agent over all ${h.days} days (${h.agentAllTime.items}) in ${h.agentAllTime.medianMs} ms median, ${h.agentAllTime.p99Ms} ms p99; the first 100 of a schedule in ${h.scheduleAllTime.medianMs} ms`);
}
const growth = {
  dayQueryRatio: round(large.day.medianMs / small.day.medianMs),
  memoryPerSummaryRatio: round(large.memoryPerSummaryBytes / small.memoryPerSummaryBytes),
  // Ten times the summaries, ten times the matches: per match it should stay flat.
  agentAllTimePerMatchRatio: round(large.agentAllTime.medianMs / large.agentAllTime.items / (small.agentAllTime.medianMs / small.agentAllTime.items)),
};
console.log(`growth 10x: a day's query x${growth.dayQueryRatio}, memory per summary x${growth.memoryPerSummaryRatio}, one agent's whole history per match x${growth.agentAllTimePerMatchRatio}`);
console.log(`written ${await writeResult('history', { perDay: PER_DAY, queries: QUERIES, small, large, growth })}`);
