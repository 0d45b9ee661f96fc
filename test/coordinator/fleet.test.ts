/**
 * What a large fleet needs of one Redis (issue 31, bench/fleet.ts measures it at 1,000 agents):
 * agents gone for NICLAB_AGENT_PRUNE_HOURS are pruned with their series and task queues; an
 * agent reports only the interfaces NICLAB_AGENT_INTERFACES lets through; a submission reads
 * the agents its flows name, not the fleet; an agent's task queue keeps a bounded event
 * stream; the Redis memory the retention settings imply is in /metrics and warned about at
 * start when above maxmemory.
 */
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { test } from 'node:test';
import pino from 'pino';
import request from 'supertest';
import { AgentService } from '@niclab/agent/agent';
import { createApp } from '@niclab/api/app';
import { createApiServices } from '@niclab/api/services';
import { Coordinator } from '@niclab/coordinator/coordinator';
import type { AgentInterface } from '@niclab/shared/domain/contract';
import { keepsInterface, parseInterfaceFilter } from '@niclab/shared/domain/interface-filter';
import { ConfigError, loadConfig } from '@niclab/shared/runtime/config';
import { AGENT_QUEUE_EVENTS, Keys } from '@niclab/shared/stores/keys';
import { AgentRegistry } from '@niclab/shared/stores/agent-registry';
import type { Logger } from '@niclab/shared/runtime/logger';
import { estimateRetention } from '@niclab/shared/stores/retention-estimate';
import { waitFor } from '../helpers/processes.js';
import { uniquePrefix } from '../helpers/redis.js';
import { silentLog, stackPerFile, type Stack } from '../helpers/stack.js';

let stack: Stack;
const HOUR = 3600_000;
stackPerFile({ config: { heartbeatSeconds: 3, agentPruneSeconds: 3600, retentionDays: 30, retentionJobs: 10_000, resultsRetentionDays: 365 }, agents: ['stays', 'goes'], coordinator: true }, (s) => (stack = s));

const nic = (name: string, address: string | null): AgentInterface => ({
  name, mac: '02:00:00:00:00:01', mtu: 1500, speedBitsPerSecond: 10e9, operstate: 'up', driver: 'veth',
  addresses: address ? [{ family: 'IPv4', address, prefixLength: 32 }] : [],
});

test('NICLAB_AGENT_INTERFACES: globs, "!" excludes; an agent reports only what it lets through', async () => {
  const filter = parseInterfaceFilter('eth*, ens?f0, !eth9');
  assert.deepEqual(['eth1', 'eth9', 'ens1f0', 'ens10f0', 'veth1a2b', 'lo'].filter((n) => keepsInterface(filter, n)), ['eth1', 'ens1f0']);
  const pods = parseInterfaceFilter('!veth*,!cali*');
  assert.deepEqual(['eth1', 'lo', 'veth1a2b', 'cali0f3e'].filter((n) => keepsInterface(pods, n)), ['eth1', 'lo']);
  assert.throws(() => loadConfig({ NICLAB_AGENT_INTERFACES: 'eth1,e/th2' }), (e: Error) => e instanceof ConfigError && /NICLAB_AGENT_INTERFACES/.test(e.message));
  const agent = new AgentService({ ...stack.config, agentId: 'node1', agentInterfaces: pods }, silentLog, {
    hostname: () => 'node1',
    readInterfaces: async () => [nic('eth1', '198.18.0.1'), nic('veth1a2b', null), nic('cali0f3e', null), nic('lo', '127.0.0.1')],
  });
  await agent.start();
  try {
    const res = await request(stack.app).get('/v1/agents/node1');
    assert.deepEqual(res.body.interfaces.map((i: { name: string }) => i.name), ['eth1', 'lo']);
    const metrics = (await request(stack.app).get('/metrics')).text;
    assert.match(metrics, /niclab_interface_mtu_bytes\{agent="node1",interface="eth1"\}/);
    assert.doesNotMatch(metrics, /agent="node1",interface="(veth|cali)/);
  } finally {
    await agent.stop();
  }
});

test('an agent whose record changes between scrapes: the list, the agent and /metrics show the new record (records are parsed and rendered again only when they change)', async () => {
  const registry = new AgentRegistry(stack.services.redis, stack.services.keys);
  const record = (mtu: number, stopped = false) => ({
    id: 'changing', hostname: 'changing', labels: {}, startedAt: new Date().toISOString(), version: 'test', kernel: 'test', heartbeatSeconds: 3, engines: {},
    interfaces: [{ ...nic('eth1', '198.18.0.9'), mtu }], ...(stopped ? { stopped } : {}),
  });
  const mtuLine = async () => /niclab_interface_mtu_bytes\{agent="changing",interface="eth1"\} (\d+)/.exec((await request(stack.app).get('/metrics')).text)?.[1];
  const upLine = async () => /niclab_agent_up\{agent="changing"\} (\d)/.exec((await request(stack.app).get('/metrics')).text)?.[1];
  await registry.heartbeat(record(1500) as never);
  assert.equal(await mtuLine(), '1500');
  assert.equal(await mtuLine(), '1500', 'the same record, scraped again');
  await registry.heartbeat(record(9000) as never);
  assert.equal(await mtuLine(), '9000');
  assert.equal((await request(stack.app).get('/v1/agents/changing')).body.interfaces[0].mtu, 9000);
  assert.equal((await request(stack.app).get('/v1/agents')).body.items.find((a: { id: string }) => a.id === 'changing').interfaces[0].mtu, 9000);
  assert.equal(await upLine(), '1');
  await registry.deregister(record(9000) as never);
  assert.equal(await upLine(), '0', 'a stopped agent is offline at once');
  // Gone from the fleet (as prune's script removes it: the others here still heartbeat): gone
  // from the scrape, though its lines were kept.
  await stack.services.redis.multi().zrem(stack.services.keys.agents, 'changing').del(stack.services.keys.agent('changing')).exec();
  assert.equal(await mtuLine(), undefined);
});

test("a heartbeat writes an agent's record only when it changed; a list over an unchanged fleet reads no record, and one after a change or a new agent reads them again", async () => {
  // A registry of its own (its own key prefix), on its own connection, whose MGETs are counted.
  const redis = stack.services.redis.duplicate();
  let mgets = 0;
  const mget = redis.mget.bind(redis) as (...args: unknown[]) => unknown;
  (redis as unknown as { mget: (...args: unknown[]) => unknown }).mget = (...args: unknown[]) => (mgets++, mget(...args));
  const keys = new Keys(uniquePrefix());
  const lostKeys = new Keys(uniquePrefix());
  const registry = new AgentRegistry(redis, keys);
  try {
    const record = (id: string, mtu: number) => ({ id, hostname: id, labels: {}, startedAt: '2026-12-07T00:00:00.000Z', version: 'test', kernel: 'test', heartbeatSeconds: 5, engines: {}, interfaces: [{ ...nic('eth1', '198.18.0.9'), mtu }] }) as never;
    const revision = () => redis.get(keys.agentsRevision);
    await registry.heartbeat(record('a', 1500), 1000);
    await registry.heartbeat(record('b', 1500), 1000);
    const first = await revision();
    assert.deepEqual((await registry.list(2000)).map((a) => a.interfaces[0]!.mtu), [1500, 1500]);
    assert.equal(mgets, 1);
    await registry.heartbeat(record('a', 1500), 6000);
    assert.equal(await revision(), first, 'the same record again: not written, the revision stays');
    const listed = await registry.list(7000);
    assert.equal(mgets, 1, 'nothing changed: no record read');
    assert.equal(listed[0]!.lastSeen, new Date(6000).toISOString(), 'the last-seen time is read every time');
    await registry.heartbeat(record('b', 9000), 8000);
    assert.notEqual(await revision(), first);
    assert.deepEqual((await registry.list(9000)).map((a) => a.interfaces[0]!.mtu), [1500, 9000], 'a changed record is read again');
    assert.equal(mgets, 2);
    await registry.list(9000);
    assert.equal(mgets, 2);
    // An agent whose record was stored without the heartbeat's script (not the product's way) is new to the list: read.
    await redis.multi().set(keys.agent('c'), JSON.stringify(record('c', 1280))).zadd(keys.agents, 9000, 'c').exec();
    assert.deepEqual((await registry.list(9500)).map((a) => a.interfaces[0]!.mtu), [1500, 9000, 1280]);
    assert.equal(mgets, 3);
    assert.deepEqual(await registry.prune(7000), ['a'], 'a, last seen at 6000, pruned; b (8000) and c (9000) stay');
    assert.deepEqual((await registry.list(9500)).map((a) => a.id), ['b', 'c']);
    // Redis loses everything (restarted empty, or a failover to a replica far behind) and x comes
    // back changed, as many writes as before: a counter would be where the cache saw it, the
    // records not. The revision is a value never used before.
    const lost = new AgentRegistry(redis, lostKeys);
    await lost.heartbeat(record('x', 1500), 10_000);
    assert.deepEqual((await lost.list(10_500)).map((a) => a.interfaces[0]!.mtu), [1500]);
    await redis.del(lostKeys.agents, lostKeys.agentsRevision, lostKeys.agent('x'));
    await lost.heartbeat(record('x', 4000), 11_000);
    assert.deepEqual((await lost.list(11_500)).map((a) => a.interfaces[0]!.mtu), [4000], "x's record as it is now");
  } finally {
    await redis.del(lostKeys.agents, lostKeys.agentsRevision, lostKeys.agent('x'));
    const leftover = await redis.keys(`${keys.agents}*`);
    await redis.del(...leftover, keys.agent('a'), keys.agent('b'), keys.agent('c'));
    redis.disconnect();
  }
});

test("a submission reads the agents its flows name, not the fleet's (one unreadable record elsewhere does not matter)", async () => {
  // An agent record no reader can parse: a submission that read every agent would fail on it.
  await stack.services.redis.multi().set(stack.services.keys.agent('broken'), '{not json').zadd(stack.services.keys.agents, Date.now(), 'broken').exec();
  try {
    const lo = { agent: 'stays', interface: 'lo' };
    const res = await request(stack.app).post('/v1/jobs').send({ duration: 0.5, interval: 0.5, flows: [{ from: lo, to: lo }] });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    await waitFor('the job', async () => (await request(stack.app).get(`/v1/jobs/${res.body.id}`)).body.status === 'succeeded', 30_000);
    // The agent's task queue keeps AGENT_QUEUE_EVENTS events, not BullMQ's 10,000 (~9 MiB a queue).
    const bull = `${stack.services.keys.bull}:${stack.services.keys.agentQueue('stays')}`;
    assert.equal(await stack.services.redis.hget(`${bull}:meta`, 'opts.maxLenEvents'), String(AGENT_QUEUE_EVENTS));
  } finally {
    await stack.services.redis.multi().del(stack.services.keys.agent('broken')).zrem(stack.services.keys.agents, 'broken').exec();
  }
});

test('an agent gone past NICLAB_AGENT_PRUNE_HOURS is pruned with its series and task queue; one still heartbeating stays', async () => {
  const { redis, keys } = stack.services;
  // A measured link from each agent: the gone one's series must go with it.
  const link = (src: string) => JSON.stringify({ src_agent: src, src_interface: 'lo', dst_agent: 'stays', dst_interface: 'lo', engine: 'builtin', protocol: 'tcp', test: 'stream', direction: 'forward', schedule: '' });
  const values = JSON.stringify({ bitsPerSecond: 1e9, endedAt: Date.now() / 1000, pathVerified: 1, retransmits: 0, udpLossRatio: null, jitterSeconds: null, senderCpuSecondsPerBit: null, receiverCpuSecondsPerBit: null, rttSeconds: null });
  await redis.hset(keys.links, link('goes'), values, link('stays'), values);
  const goes = stack.agents.find((a) => a.id === 'goes')!;
  await goes.stop();
  await redis.xadd(`${keys.bull}:${keys.agentQueue('goes')}:events`, '*', 'event', 'planted');
  assert.deepEqual(await stack.coordinator!.pruneAgents(), [], 'stopped a moment ago: kept');
  // Last seen two hours ago, past the hour it may be gone.
  await redis.zadd(keys.agents, Date.now() - 2 * HOUR, 'goes');
  const before = (await request(stack.app).get('/metrics')).text;
  assert.match(before, /agent="goes"/);
  assert.match(before, /src_agent="goes"/);
  assert.deepEqual(await stack.coordinator!.pruneAgents(), ['goes']);
  assert.equal((await request(stack.app).get('/v1/agents/goes')).status, 404);
  assert.equal((await request(stack.app).get('/v1/agents/stays')).body.online, true);
  const after = (await request(stack.app).get('/metrics')).text;
  assert.doesNotMatch(after, /agent="goes"/, 'no series of the pruned agent, neither its interfaces nor its links');
  assert.match(after, /src_agent="stays"/);
  assert.match(after, /niclab_agent_up\{agent="stays"\} 1/);
  assert.deepEqual(await redis.keys(`${keys.bull}:${keys.agentQueue('goes')}:*`), [], 'its task queue is gone');
});

test('the retention settings\' implied Redis memory: in /metrics, and warned about at start when above maxmemory', async () => {
  const { redis, keys } = stack.services;
  // 48 runs in the last day, 48 more the day before: 48 a day, and the runs of the tests before.
  const now = Date.now();
  const perDay = 48 + (await redis.zcard(keys.history));
  const multi = redis.multi();
  for (let i = 0; i < 96; i++) {
    const id = `planted-${i}`;
    multi.zadd(keys.history, now - i * 1800_000 - 1000, id).hset(keys.historyData, id, JSON.stringify({ runId: id, padding: 'x'.repeat(400) }));
  }
  await multi.exec();
  const estimate = await estimateRetention(redis, keys, stack.config, AGENT_QUEUE_EVENTS, now);
  assert.equal(estimate.runsPerDay, perDay);
  const usage = async (key: string) => Number(await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0'));
  const perSummary = ((await usage(keys.history)) + (await usage(keys.historyData))) / (await redis.zcard(keys.history));
  assert.equal(estimate.parts.history, Math.round(perDay * 365 * perSummary));
  assert.ok(estimate.parts.jobs > 0, 'the finished job of the test before costs bytes a run');
  assert.ok(estimate.parts.agents > 0);
  assert.equal(estimate.bytes, estimate.parts.jobs + estimate.parts.history + estimate.parts.agents);

  // /metrics shows what a coordinator stored (once a minute, and at its start): a second API
  // replica scrapes the same figures, whenever it scrapes. Two replicas estimating each at its
  // own time showed two figures for one Redis.
  const stored = await stack.coordinator!.estimateRetention(now);
  assert.equal(stored.parts.history, estimate.parts.history);
  const replica = createApiServices(stack.config, silentLog);
  try {
    const [metrics, other] = await Promise.all([request(stack.app).get('/metrics'), request(createApp(replica)).get('/metrics')]);
    const retentionLines = (text: string) => text.split('\n').filter((line) => /^niclab_redis_(retention|maxmemory)/.test(line));
    assert.deepEqual(retentionLines(metrics.text), [
      ...['jobs', 'history', 'agents'].map((part) => `niclab_redis_retention_implied_bytes{part="${part}"} ${stored.parts[part as keyof typeof stored.parts]}`),
      `niclab_redis_retention_runs_per_day ${perDay}`,
      'niclab_redis_maxmemory_bytes 0',
    ]);
    assert.deepEqual(retentionLines(other.text), retentionLines(metrics.text));
  } finally {
    await replica.close();
  }

  // maxmemory below the estimate (and above what Redis holds now): a coordinator starting warns.
  const used = Number(/used_memory:(\d+)/.exec(await redis.info('memory'))![1]);
  const limit = Math.max(used * 2, 8 * 2 ** 20);
  assert.ok(estimate.bytes > limit, `the planted rate implies ${estimate.bytes} B, above ${limit}`);
  let logged = '';
  const log = pino({ level: 'warn' }, new Writable({ write: (chunk: Buffer, _e, done) => ((logged += chunk.toString()), done()) })) as unknown as Logger;
  await redis.config('SET', 'maxmemory', String(limit));
  const second = new Coordinator({ ...stack.config, agentPruneSeconds: 0 }, log);
  try {
    await second.start();
    assert.match(logged, new RegExp(`the retention settings imply \\d+ MiB of Redis at ${perDay} runs a day, more than its maxmemory`));
    logged = '';
    await redis.config('SET', 'maxmemory', String(estimate.bytes * 2));
    await second.warnRetention();
    assert.equal(logged, '', 'no warning once maxmemory holds it');
  } finally {
    await second.stop();
    await redis.config('SET', 'maxmemory', '0');
  }
});
