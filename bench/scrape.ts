/**
 * Scrape cost: /metrics with 100 and 1,000 simulated agents × 4 interfaces (registered and
 * heartbeating as real agents do) and one measured link per interface. Time and size of a
 * scrape, median and p99 of 30, and how they grow from the smaller fleet to the larger. The
 * headline is `niclab api` as its own process on its own core, scraped from this process on
 * the other, as Prometheus would (asking for gzip), beside the same scrapes in plain text, and
 * the API's CPU time per scrape (steadier than wall time on a shared machine); the same API in
 * this process and its render alone show where the time goes.
 */
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { createApp } from '@niclab/api/app';
import { createApiServices } from '@niclab/api/services';
import { AgentRegistry } from '@niclab/shared/stores/agent-registry';
import { Keys } from '@niclab/shared/stores/keys';
import type { LinkLabels, LinkValues } from '@niclab/shared/stores/metric-store';
import { startTestRedis, uniquePrefix } from '../test/helpers/redis.js';
import { silentLog, testConfig } from '../test/helpers/stack.js';
import { median, round, startPinnedApi, writeResult } from './lib.js';

const INTERFACES = ['eth1', 'eth2', 'eth3', 'eth4'];
const SCRAPES = 30;


async function fleet(agents: number) {
  const redis = await startTestRedis();
  const config = testConfig(redis.url, { prefix: uniquePrefix() });
  const services = createApiServices(config, silentLog);
  const registry = new AgentRegistry(services.redis, new Keys(config.prefix));
  try {
    const ids = Array.from({ length: agents }, (_, i) => `host${String(i).padStart(4, '0')}`);
    const now = new Date().toISOString();
    for (const [i, id] of ids.entries()) {
      await registry.heartbeat({
        id, hostname: id, labels: { rack: `r${i % 10}` }, startedAt: now, version: 'bench', kernel: '6.1', heartbeatSeconds: 5,
        engines: { builtin: { available: true, version: 'bench' }, iperf3: { available: true, version: 'iperf 3.12' } },
        interfaces: INTERFACES.map((name, n) => ({ name, mac: `02:00:00:00:${(i % 256).toString(16).padStart(2, '0')}:0${n}`, mtu: 9000, speedBitsPerSecond: 25e9, operstate: 'up', driver: 'mlx5_core', addresses: [] })),
      });
      // One measured link per interface: this host's ethN to the next host's ethN.
      const pipeline = services.redis.pipeline();
      for (const iface of INTERFACES) {
        const labels: LinkLabels = { src_agent: id, src_interface: iface, dst_agent: ids[(i + 1) % agents]!, dst_interface: iface, engine: 'builtin', protocol: 'tcp', test: 'stream', direction: 'forward', schedule: 'nightly' };
        const values: LinkValues = { bitsPerSecond: 23.5e9, endedAt: Date.now() / 1000, pathVerified: 1, retransmits: 12, udpLossRatio: null, jitterSeconds: null, senderCpuSecondsPerBit: 4e-11, receiverCpuSecondsPerBit: 5e-11, rttSeconds: null };
        pipeline.hset(new Keys(config.prefix).links, JSON.stringify(labels), JSON.stringify(values));
      }
      await pipeline.exec();
    }
    // Prometheus sends `Accept-Encoding: gzip` (so does fetch); `identity` asks for plain text.
    const scrape = async (url: string, encoding: 'gzip' | 'identity', cpuMs?: () => number) => {
      const times: number[] = [];
      let bytes = 0;
      let sent = 0;
      let series = 0;
      let cpu = 0;
      for (let i = 0; i < SCRAPES + 3; i++) {
        if (i === 3) cpu = cpuMs?.() ?? 0;
        const t0 = performance.now();
        const res = await fetch(url, { headers: { 'accept-encoding': encoding } });
        const text = await res.text();
        if (i >= 3) times.push(performance.now() - t0); // the first scrapes warm up the JIT
        sent = Number(res.headers.get('content-length'));
        bytes = Buffer.byteLength(text);
        series = text.split('\n').filter((l) => l && !l.startsWith('#')).length;
      }
      return { times: times.sort((a, b) => a - b), bytes, sent, series, cpuMsPerScrape: cpuMs ? (cpuMs() - cpu) / SCRAPES : NaN };
    };
    // As Prometheus sees it: `niclab api` as a process of its own, on its own core (taskset),
    // scraped from this process on the other.
    const api = await startPinnedApi({ REDIS_URL: redis.url, NICLAB_PREFIX: config.prefix });
    let separate: Awaited<ReturnType<typeof scrape>>;
    let plain: Awaited<ReturnType<typeof scrape>>;
    try {
      separate = await scrape(`${api.base}/metrics`, 'gzip', api.cpuMs);
      plain = await scrape(`${api.base}/metrics`, 'identity', api.cpuMs);
    } finally {
      await api.stop();
    }
    // The same API in this process: client and server then share one event loop.
    const server = createApp(services).listen(0, '127.0.0.1');
    await new Promise((r) => server.once('listening', r));
    const inProcess = await scrape(`http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`, 'gzip');
    server.close();
    // The same scrape without HTTP, and its Redis read alone: where the time goes.
    const render: number[] = [];
    for (let i = 0; i < 10; i++) {
      const t0 = performance.now();
      await services.metrics.render();
      render.push(performance.now() - t0);
    }
    const reads: number[] = [];
    for (let i = 0; i < 10; i++) {
      const t0 = performance.now();
      await Promise.all([services.metricStore.rawLinks(), services.agents.list()]);
      reads.push(performance.now() - t0);
    }
    const { times, bytes, series } = separate;
    const p99 = (sorted: number[]) => round(sorted[Math.ceil(sorted.length * 0.99) - 1]!, 2);
    return {
      agents, interfaces: agents * INTERFACES.length, links: agents * INTERFACES.length, series, bytes, bytesSent: separate.sent,
      medianMs: round(median(times), 2), p99Ms: p99(times), apiCpuMsPerScrape: round(separate.cpuMsPerScrape, 1),
      plain: { medianMs: round(median(plain.times), 2), p99Ms: p99(plain.times), bytesSent: plain.sent, apiCpuMsPerScrape: round(plain.cpuMsPerScrape, 1) },
      inProcessMedianMs: round(median(inProcess.times), 2), renderMedianMs: round(median(render), 2), redisReadMedianMs: round(median(reads), 2),
    };
  } finally {
    await services.close();
    await redis.stop();
  }
}

const small = await fleet(100);
const line = (f: typeof small) => `scrape median ${f.medianMs} ms, p99 ${f.p99Ms} ms, API CPU ${f.apiCpuMsPerScrape} ms a scrape, ${f.series} series, ${(f.bytes / 1024).toFixed(0)} KiB (${(f.bytesSent / 1024).toFixed(0)} KiB sent); plain text: median ${f.plain.medianMs} ms, p99 ${f.plain.p99Ms} ms, API CPU ${f.plain.apiCpuMsPerScrape} ms, ${(f.plain.bytesSent / 1024).toFixed(0)} KiB sent`;
console.log(`100 agents: ${line(small)}`);
const large = await fleet(1000);
console.log(`1000 agents: ${line(large)}; scraping an API in the scraper's own process ${large.inProcessMedianMs} ms; render alone ${large.renderMedianMs} ms, of which reading links and agents ${large.redisReadMedianMs} ms`);
const growth = { medianPerAgentRatio: round(large.medianMs / large.agents / (small.medianMs / small.agents)), bytesPerAgentRatio: round(large.bytes / large.agents / (small.bytes / small.agents)) };
console.log(`growth 10x: median time per agent x${growth.medianPerAgentRatio}, bytes per agent x${growth.bytesPerAgentRatio}`);
console.log(`written ${await writeResult('scrape', { scrapes: SCRAPES, small, large, growth })}`);
