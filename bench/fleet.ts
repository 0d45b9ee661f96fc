/**
 * A fleet on one Redis: 100 and then 1,000 simulated agents, side by side in one run, each the
 * product's own AgentService (registration, a heartbeat every 5 s, its BullMQ worker on its own
 * queue with the stalled-job checks, its cancel subscription) in FLEET_PER_PROCESS agents per
 * process (bench/fleet/agents.ts), against one private redis-server, one `niclab api` (pinned
 * to core 1, no coordinator inside) and one `niclab coordinator`, started as the product starts
 * them. Each simulated host has four NICs and FLEET_VETHS pod veths; agents report them through
 * NICLAB_AGENT_INTERFACES (BENCH_FLEET_FILTER, `!veth*` unless set).
 *
 * Over BENCH_FLEET_MINUTES (10, as issue 31 asks; 1 for a quick run) the fleet heartbeats while
 * a trickle of jobs (BENCH_FLEET_JOBS_PER_MINUTE) goes through the coordinator to the agents'
 * queues; then, with the fleet still up:
 * - Redis CPU over the window, from /proc/<redis pid>/stat (and the API's, the coordinator's and
 *   the agents' processes' beside it), Redis memory (INFO memory) and its growth per agent;
 * - heartbeat misses: an agent alive but shown offline (the registry's own rule, 3 missed
 *   heartbeats), polled every second through the window;
 * - BullMQ's event streams per agent queue: MEMORY USAGE and XLEN of every agent queue's
 *   events key, bytes per entry, and what the configured maxLen implies per queue;
 * - the /metrics scrape's p50, p99 and largest (200 scrapes, gzip, as Prometheus asks: the p99 of
 *   30 was their largest) and its series;
 * - series growth as agents come and go: a tenth of the agents stop and as many new ones
 *   start; the series then, and once the pruning (NICLAB_AGENT_PRUNE_HOURS, 1 minute here)
 *   has dropped the gone ones;
 * - POST /v1/jobs per second per API core with the N-agent inventory (autocannon, the
 *   coordinator SIGSTOPped meanwhile so the API is measured alone; its CPU from /proc).
 */
import { fork, type ChildProcess } from 'node:child_process';
import { loadavg } from 'node:os';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import autocannon from 'autocannon';
import type { JobSpec } from '@niclab/shared/domain/contract';
import { createRedis } from '@niclab/shared/runtime/redis';
import { AgentRegistry } from '@niclab/shared/stores/agent-registry';
import { Keys } from '@niclab/shared/stores/keys';
import { spawnNiclab, waitFor } from '../test/helpers/processes.js';
import { startTestRedis, uniquePrefix } from '../test/helpers/redis.js';
import { median, round, startPinnedApi, writeResult } from './lib.js';
import { processCpuSeconds } from '../test/helpers/udp-loopback.js';

const MINUTES = Number(process.env.BENCH_FLEET_MINUTES ?? 10);
const SIZES = (process.env.BENCH_FLEET_SIZES ?? '100,1000').split(',').map(Number);
const PER_PROCESS = Number(process.env.FLEET_PER_PROCESS ?? 250);
const VETHS = Number(process.env.FLEET_VETHS ?? 8);
const FILTER = process.env.BENCH_FLEET_FILTER ?? '!veth*';
const JOBS_PER_MINUTE = Number(process.env.BENCH_FLEET_JOBS_PER_MINUTE ?? 30);
const POST_SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const POST_ROUNDS = 3;
const SCRAPES = 200;
/** Pruning in the bench: agents gone for a minute go (the default is a week). */
const PRUNE_HOURS = 1 / 60;
const AGENTS_SCRIPT = fileURLToPath(new URL('./fleet/agents.ts', import.meta.url));

/** A live process's user + system CPU seconds (the test helpers' reader of /proc/<pid>/stat). */
const cpuSeconds = (pid: number) => processCpuSeconds(pid) ?? 0;
const p99 = (values: number[]) => [...values].sort((a, b) => a - b)[Math.ceil(values.length * 0.99) - 1]!;
const idOf = (n: number) => `h${String(n).padStart(5, '0')}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A process of simulated agents, driven over IPC. */
function agentProcess(env: Record<string, string>) {
  const child: ChildProcess = fork(AGENTS_SCRIPT, [], { execArgv: ['--import', 'tsx', '--conditions=niclab-source'], env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const replies: ((m: Record<string, unknown>) => void)[] = [];
  child.on('message', (m: Record<string, unknown>) => replies.shift()?.(m));
  const ask = (message: object) => new Promise<Record<string, unknown>>((resolve, reject) => {
    replies.push((m) => (m.error ? reject(new Error(String(m.error))) : resolve(m)));
    child.send(message);
  });
  const ready = new Promise<Record<string, unknown>>((resolve) => replies.push(resolve));
  const exited = new Promise((r) => child.once('exit', r));
  return {
    pid: child.pid!, ready, ask, ids: new Set<string>(),
    async stop() {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Everything one fleet's phases share. */
interface Fleet {
  agents: number;
  keys: Keys;
  probe: ReturnType<typeof createRedis>;
  registry: AgentRegistry;
  redisPid: number;
  api: Awaited<ReturnType<typeof startPinnedApi>>;
  coordinator: ReturnType<typeof spawnNiclab>;
  processes: ReturnType<typeof agentProcess>[];
  env: Record<string, string>;
  alive: Set<string>;
  next: number;
}

const usedMemory = async (f: Fleet) => Number(/used_memory:(\d+)/.exec(await f.probe.info('memory'))![1]);
const spec = (from: string, to: string): JobSpec => ({ engine: 'builtin', test: 'stream', protocol: 'tcp', duration: 1, retries: 0, flows: [{ from: { agent: from, interface: 'eth1' }, to: { agent: to, interface: 'eth1' } }] } as JobSpec);

/** Starts `count` new agents, PER_PROCESS to a process (new processes as needed). */
async function startAgents(f: Fleet, count: number): Promise<string[]> {
  const ids = Array.from({ length: count }, () => idOf(f.next++));
  const byProcess = new Map<ReturnType<typeof agentProcess>, string[]>();
  for (const id of ids) {
    let home = f.processes.find((p) => p.ids.size < PER_PROCESS);
    if (!home) {
      home = agentProcess(f.env);
      f.processes.push(home);
      await home.ready;
    }
    home.ids.add(id);
    byProcess.set(home, [...(byProcess.get(home) ?? []), id]);
  }
  await Promise.all([...byProcess].map(([p, list]) => p.ask({ start: list })));
  for (const id of ids) f.alive.add(id);
  return ids;
}

async function stopAgents(f: Fleet, ids: string[]): Promise<void> {
  for (const id of ids) f.alive.delete(id);
  await Promise.all(f.processes.map((p) => {
    const mine = ids.filter((id) => p.ids.has(id));
    for (const id of mine) p.ids.delete(id);
    return mine.length ? p.ask({ stop: mine }) : null;
  }));
}

/** The window: heartbeats, a trickle of jobs through the coordinator, a watch for agents shown offline; CPU shares over it. */
async function window(f: Fleet) {
  const missed = new Set<string>();
  let missEvents = 0;
  let polls = 0;
  let stopWindow = false;
  const watch = (async () => {
    while (!stopWindow) {
      for (const agent of await f.registry.list()) {
        if (f.alive.has(agent.id) && !agent.online) {
          missEvents++;
          missed.add(agent.id);
        }
      }
      polls++;
      await sleep(1000);
    }
  })();
  const submitted: string[] = [];
  const trickle = (async () => {
    for (let k = 0; !stopWindow && JOBS_PER_MINUTE > 0; k++) {
      const res = await fetch(`${f.api.base}/v1/jobs`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(spec(idOf((2 * k) % f.agents), idOf((2 * k + 1) % f.agents))) });
      if (res.status === 202) submitted.push(((await res.json()) as { id: string }).id);
      else console.log(`trickle POST ${res.status}: ${await res.text()}`);
      await sleep(60_000 / JOBS_PER_MINUTE);
    }
  })();
  const agentCpu = () => f.processes.reduce((sum, p) => sum + cpuSeconds(p.pid), 0);
  const cpu0 = { redis: cpuSeconds(f.redisPid), api: f.api.cpuMs() / 1000, coordinator: cpuSeconds(f.coordinator.pid), agents: agentCpu() };
  const load0 = loadavg()[0]!;
  const w0 = performance.now();
  await sleep(MINUTES * 60_000);
  const wall = (performance.now() - w0) / 1000;
  const share = (now: number, before: number) => round((now - before) / wall, 4);
  const cpu = {
    redis: share(cpuSeconds(f.redisPid), cpu0.redis), api: share(f.api.cpuMs() / 1000, cpu0.api), coordinator: share(cpuSeconds(f.coordinator.pid), cpu0.coordinator),
    agentsPerAgent: round((agentCpu() - cpu0.agents) / wall / f.agents, 6),
  };
  stopWindow = true;
  await Promise.all([watch, trickle]);
  const statuses: Record<string, number> = {};
  for (const id of submitted) {
    const job = (await (await fetch(`${f.api.base}/v1/jobs/${id}`)).json()) as { status: string };
    statuses[job.status] = (statuses[job.status] ?? 0) + 1;
  }
  return { wall, cpu, misses: { events: missEvents, agents: missed.size, polls }, trickleJobs: { submitted: submitted.length, statuses }, loadAverage: { atStart: round(load0, 2), atEnd: round(loadavg()[0]!, 2) } };
}

/** BullMQ's event streams, one per agent queue: bytes, entries, and what the configured maxLen implies. */
async function eventStreams(f: Fleet) {
  const streams: { bytes: number; entries: number }[] = [];
  let maxLen = 0;
  for (const id of f.alive) {
    const key = `${f.keys.bull}:${f.keys.agentQueue(id)}:events`;
    const [bytes, entries] = await Promise.all([f.probe.call('MEMORY', 'USAGE', key, 'SAMPLES', '0') as Promise<number | null>, f.probe.xlen(key)]);
    if (!bytes) continue;
    streams.push({ bytes, entries });
    // What the queue's producer (the coordinator) set; a queue never given a task has BullMQ's default.
    maxLen = Math.max(maxLen, Number((await f.probe.hget(`${f.keys.bull}:${f.keys.agentQueue(id)}:meta`, 'opts.maxLenEvents')) ?? 0));
  }
  const entries = streams.reduce((sum, x) => sum + x.entries, 0);
  const totalBytes = streams.reduce((sum, x) => sum + x.bytes, 0);
  const bytesPerEntry = entries > 0 ? totalBytes / entries : 0;
  return {
    queuesWithStream: streams.length, totalBytes, meanBytesPerQueue: streams.length ? round(totalBytes / streams.length, 0) : 0,
    maxBytesPerQueue: Math.max(0, ...streams.map((x) => x.bytes)), entries, maxEntriesPerQueue: Math.max(0, ...streams.map((x) => x.entries)), bytesPerEntry: round(bytesPerEntry, 1), configuredMaxLen: maxLen,
    impliedBytesPerQueueAtMaxLen: round(bytesPerEntry * maxLen, 0), impliedBytesForFleetAtMaxLen: round(bytesPerEntry * maxLen * f.agents, 0),
    impliedBytesForFleetAtBullmqDefault: round(bytesPerEntry * 10_000 * f.agents, 0),
  };
}

/** /metrics as Prometheus asks for it (gzip): times, series, the API's CPU per scrape. */
async function scrape(f: Fleet, count: number) {
  const times: number[] = [];
  let series = 0;
  const c0 = f.api.cpuMs();
  for (let i = 0; i < count; i++) {
    const t0 = performance.now();
    const text = await (await fetch(`${f.api.base}/metrics`, { headers: { 'accept-encoding': 'gzip' } })).text();
    times.push(performance.now() - t0);
    series = text.split('\n').filter((l) => l && !l.startsWith('#')).length;
  }
  return { times, series, cpuMsPerScrape: (f.api.cpuMs() - c0) / count };
}

/** A tenth of the agents stop and as many new ones start: the series then, and once the gone ones are pruned. */
async function churn(f: Fleet, before: number) {
  const count = Math.max(1, Math.round(f.agents / 10));
  await stopAgents(f, [...f.alive].slice(-count));
  await startAgents(f, count);
  await sleep(6000);
  const afterChurn = (await scrape(f, 1)).series;
  const t0 = performance.now();
  const afterPrune = await waitFor('the gone agents pruned', async () => ((await f.registry.list()).length <= f.agents ? (await scrape(f, 1)).series : null), PRUNE_HOURS * 3600_000 + 120_000, 2000).catch(() => null);
  return { before, afterChurn, afterPrune, pruneSeconds: afterPrune === null ? null : round((performance.now() - t0) / 1000, 0), churned: count };
}

/** POST /v1/jobs with the N-agent inventory, the API alone on its core (the coordinator paused). */
async function post(f: Fleet) {
  const ids = [...f.alive];
  const body = JSON.stringify(spec(ids[0]!, ids[1]!));
  const load = async () => {
    const c0 = f.api.cpuMs();
    const result = await autocannon({ url: `${f.api.base}/v1/jobs`, method: 'POST', headers: { 'content-type': 'application/json' }, body, connections: 10, duration: POST_SECONDS });
    const cpuS = (f.api.cpuMs() - c0) / 1000;
    if (result.non2xx > 0 || result.errors > 0) throw new Error(`POST /v1/jobs: ${result.non2xx} non-2xx, ${result.errors} errors`);
    return { requestsPerSecond: round(result.requests.average, 0), perApiCoreSecond: round(result.requests.total / cpuS, 0), apiCoreBusy: round(cpuS / POST_SECONDS, 2), p99Ms: result.latency.p99 };
  };
  f.coordinator.child.kill('SIGSTOP');
  try {
    await load(); // warm-up
    const rounds: Awaited<ReturnType<typeof load>>[] = [];
    for (let i = 0; i < POST_ROUNDS; i++) rounds.push(await load());
    const pick = (key: 'requestsPerSecond' | 'perApiCoreSecond' | 'apiCoreBusy' | 'p99Ms') => median(rounds.map((r) => r[key]));
    return { requestsPerSecond: pick('requestsPerSecond'), perApiCoreSecond: pick('perApiCoreSecond'), apiCoreBusy: pick('apiCoreBusy'), p99Ms: pick('p99Ms'), rounds };
  } finally {
    f.coordinator.child.kill('SIGCONT');
  }
}

async function fleet(agents: number) {
  const redis = await startTestRedis();
  const prefix = uniquePrefix();
  const keys = new Keys(prefix);
  const env = { REDIS_URL: redis.url, NICLAB_PREFIX: prefix, NICLAB_LOG_LEVEL: 'warn', NICLAB_AGENT_PRUNE_HOURS: String(PRUNE_HOURS), NICLAB_AGENT_INTERFACES: FILTER, FLEET_VETHS: String(VETHS) };
  const probe = createRedis(redis.url, { name: 'bench-fleet' });
  const api = await startPinnedApi(env);
  const f: Fleet = { agents, keys, probe, registry: new AgentRegistry(probe, keys), redisPid: redis.pid, api, coordinator: spawnNiclab(['coordinator'], env), processes: [], env, alive: new Set(), next: 0 };
  try {
    await sleep(2000);
    const baseMemory = await usedMemory(f);
    const t0 = performance.now();
    await startAgents(f, agents);
    const startSeconds = round((performance.now() - t0) / 1000, 1);
    console.log(`${agents} agents: started in ${startSeconds} s by ${f.processes.length} processes`);
    await waitFor('the fleet online', async () => (await f.registry.list()).filter((a) => a.online).length >= agents, 60_000, 500);

    const w = await window(f);
    const memory = await usedMemory(f);
    const info = await probe.info('memory');
    const redisMemory = { usedBytes: memory, baselineBytes: baseMemory, bytesPerAgent: round((memory - baseMemory) / agents, 0), fragmentationRatio: Number(/mem_fragmentation_ratio:([\d.]+)/.exec(info)?.[1] ?? 0) };
    console.log(`${agents} agents, ${round(w.wall / 60, 2)} min (load average ${w.loadAverage.atStart} -> ${w.loadAverage.atEnd}): Redis CPU ${(w.cpu.redis * 100).toFixed(2)}% of a core, API ${(w.cpu.api * 100).toFixed(2)}%, coordinator ${(w.cpu.coordinator * 100).toFixed(2)}%, agents ${(w.cpu.agentsPerAgent * 100).toFixed(4)}% each; misses ${w.misses.events} (${w.misses.agents} agents) in ${w.misses.polls} polls; Redis memory ${(memory / 2 ** 20).toFixed(1)} MiB, ${(redisMemory.bytesPerAgent / 1024).toFixed(1)} KiB per agent; trickle jobs ${JSON.stringify(w.trickleJobs.statuses)}`);
    const streams = await eventStreams(f);
    console.log(`${agents} agents: event streams ${streams.queuesWithStream} queues, ${(streams.totalBytes / 1024).toFixed(0)} KiB in all, ${streams.bytesPerEntry} B an entry; at maxLen ${streams.configuredMaxLen} a queue holds ${(streams.impliedBytesPerQueueAtMaxLen / 1024).toFixed(0)} KiB, the fleet ${(streams.impliedBytesForFleetAtMaxLen / 2 ** 20).toFixed(1)} MiB (at BullMQ's default 10,000: ${(streams.impliedBytesForFleetAtBullmqDefault / 2 ** 20).toFixed(0)} MiB)`);
    await scrape(f, 3); // warm-up
    const scraped = await scrape(f, SCRAPES);
    const scrapeFigures = { p50Ms: round(median(scraped.times), 1), p99Ms: round(p99(scraped.times), 1), maxMs: round(Math.max(...scraped.times), 1), scrapes: SCRAPES, series: scraped.series, apiCpuMsPerScrape: round(scraped.cpuMsPerScrape, 1) };
    console.log(`${agents} agents: scrape p50 ${scrapeFigures.p50Ms} ms, p99 ${scrapeFigures.p99Ms} ms, largest ${scrapeFigures.maxMs} ms of ${SCRAPES}, API CPU ${scrapeFigures.apiCpuMsPerScrape} ms a scrape, ${scraped.series} series`);
    const series = await churn(f, scraped.series);
    console.log(`${agents} agents: series ${series.before}; ${series.churned} gone and ${series.churned} new: ${series.afterChurn}; after pruning (${PRUNE_HOURS * 60} min): ${series.afterPrune ?? 'not pruned'}`);
    const postFigures = await post(f);
    console.log(`${agents} agents: POST /v1/jobs ${postFigures.requestsPerSecond}/s (the API's core ${postFigures.apiCoreBusy * 100}% busy), ${postFigures.perApiCoreSecond} per API CPU second, p99 ${postFigures.p99Ms} ms`);
    return {
      agents, processes: f.processes.length, startSeconds, windowMinutes: round(w.wall / 60, 2), loadAverage: w.loadAverage,
      cpuShareOfACore: w.cpu, heartbeatMisses: w.misses, redisMemory, trickleJobs: w.trickleJobs, eventStreams: streams, scrape: scrapeFigures, series, post: postFigures,
    };
  } finally {
    f.coordinator.child.kill('SIGCONT');
    await Promise.all(f.processes.map((p) => p.stop()));
    await f.coordinator.stop();
    await api.stop();
    probe.disconnect();
    await redis.stop();
  }
}

const results = [];
for (const size of SIZES) results.push(await fleet(size));
const [small, large] = [results[0]!, results.at(-1)!];
const growth = {
  agents: large.agents / small.agents,
  redisCpu: round(large.cpuShareOfACore.redis / small.cpuShareOfACore.redis, 2),
  redisMemoryPerAgent: round(large.redisMemory.bytesPerAgent / small.redisMemory.bytesPerAgent, 2),
  scrapeP99: round(large.scrape.p99Ms / small.scrape.p99Ms, 2),
  postPerApiCore: round(large.post.perApiCoreSecond / small.post.perApiCoreSecond, 2),
};
console.log(`growth x${growth.agents} agents: Redis CPU x${growth.redisCpu}, Redis memory per agent x${growth.redisMemoryPerAgent}, scrape p99 x${growth.scrapeP99}, POST per API core x${growth.postPerApiCore}`);
const targets = {
  heartbeatMisses: large.heartbeatMisses.events === 0,
  postPerApiCoreAtLeast1000: large.post.perApiCoreSecond >= 1000,
  scrapeP99AtMost100Ms: large.scrape.p99Ms <= 100,
  redisCpuAtMost25Percent: large.cpuShareOfACore.redis <= 0.25,
};
console.log(`targets at ${large.agents} agents: ${JSON.stringify(targets)}`);
console.log(`written ${await writeResult('fleet', { minutes: MINUTES, perProcess: PER_PROCESS, vethsPerHost: VETHS, interfaceFilter: FILTER, jobsPerMinute: JOBS_PER_MINUTE, sizes: results, growth, targets })}`);
