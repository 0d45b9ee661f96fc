/**
 * Groups at fleet size: a mesh of 40 and of 100 simulated agents (one eth1 each, labelled
 * rack=a; a tenth offline). The time to expand the group and plan its rounds (what a
 * submission and each schedule firing do), median and max of 20; the campaign's plan built
 * from the stored spec (what a coordinator does when it takes the job); and the job's size
 * in Redis as the job store writes it (MEMORY USAGE of its hash), before any run.
 */
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { strategyFor } from '@niclab/shared/domain/campaigns/index';
import type { Agent, JobRequest } from '@niclab/shared/domain/contract';
import { expandSpec } from '@niclab/shared/domain/groups';
import { maxDegree } from '@niclab/shared/domain/rounds';
import { JobStore } from '@niclab/shared/stores/job-store';
import { Keys } from '@niclab/shared/stores/keys';
import { startTestRedis, uniquePrefix } from '../test/helpers/redis.js';
import { median, round, writeResult } from './lib.js';

const REPEATS = 20;

function agents(n: number): Agent[] {
  return Array.from({ length: n }, (_, i) => ({
    id: `host${String(i).padStart(3, '0')}`, hostname: `host${i}`, labels: { rack: 'a' }, online: i % 10 !== 9,
    lastSeen: new Date().toISOString(), startedAt: new Date().toISOString(), version: 'bench', kernel: 'bench', heartbeatSeconds: 5, engines: {},
    interfaces: [{ name: 'eth1', mac: null, mtu: 1500, speedBitsPerSecond: 10e9, operstate: 'up', driver: 'veth', addresses: [{ family: 'IPv4', address: `198.18.${i >> 8}.${i & 255}`, prefixLength: 16 }] }],
  }));
}

const request = { engine: 'builtin', test: 'stream', protocol: 'tcp', duration: 10, direction: 'forward', repeat: 1, retries: 0, bufferLength: 131072, streams: 1, noDelay: false, interval: 1, flows: { shape: 'mesh', members: { labels: { rack: 'a' }, interface: 'eth1' } } } as JobRequest;

const redis = await startTestRedis();
const connection = new Redis(redis.url);
const keys = new Keys(uniquePrefix());
const store = new JobStore(connection, keys);
const sizes: Record<string, unknown>[] = [];
try {
  for (const n of [40, 100]) {
    const inventory = agents(n);
    const expandMs: number[] = [];
    let expanded = expandSpec(request, inventory);
    for (let i = 0; i < REPEATS; i++) {
      const t0 = performance.now();
      expanded = expandSpec(request, inventory);
      expandMs.push(performance.now() - t0);
    }
    const planMs: number[] = [];
    for (let i = 0; i < REPEATS; i++) {
      const t0 = performance.now();
      strategyFor(expanded.spec).nextRound!(new Map());
      planMs.push(performance.now() - t0);
    }
    const { spec, expansion } = expanded;
    const id = `00000000-0000-4000-8000-${String(n).padStart(12, '0')}`;
    await store.createWithin(id, spec, { runsTotal: spec.flows.length, owner: 'bench', expansion });
    const jobBytes = Number(await connection.call('MEMORY', 'USAGE', keys.job(id)));
    const members = inventory.filter((a) => a.online).length;
    sizes.push({
      agents: n, online: members, pairs: spec.flows.length, rounds: expansion!.rounds.length, lowerBound: maxDegree(spec.flows),
      expandAndPlanMs: { median: round(median(expandMs), 2), max: round(Math.max(...expandMs), 2) },
      campaignPlanMs: { median: round(median(planMs), 2), max: round(Math.max(...planMs), 2) },
      jobBytesInRedis: jobBytes,
      specJsonBytes: JSON.stringify(spec).length, expansionJsonBytes: JSON.stringify(expansion).length,
    });
    console.log(JSON.stringify(sizes.at(-1)));
  }
} finally {
  connection.disconnect();
  await redis.stop();
}
console.log(`written ${await writeResult('mesh', { repeats: REPEATS, sizes })}`);
