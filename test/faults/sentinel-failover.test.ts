import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { ApiClient } from '../helpers/api-client.js';
import { assertResponse } from '../helpers/contract.js';
import { isAlive, spawnNiclab, waitFor, waitForApi, type NiclabProcess } from '../helpers/processes.js';
import { freePort, uniquePrefix } from '../helpers/redis.js';
import { ask, startSentinelSet, type SentinelSet } from '../helpers/sentinel.js';

/**
 * Redis Sentinel failover under a running niclab (issue 31). The set is deploy/'s own: a master
 * and a replica with AOF and three sentinels, each started by deploy/redis's scripts as
 * deploy/compose.sentinel.yaml starts them. Two APIs, each with its coordinator, and six agents
 * know only the sentinels (NICLAB_REDIS_SENTINELS, NICLAB_REDIS_MASTER) and acknowledge a write
 * only once the replica has it (NICLAB_REDIS_WAIT_REPLICAS=1).
 *
 * NICLAB_FAILOVER_JOBS jobs are submitted and the master is SIGKILLed the moment the last is
 * acknowledged; the sentinels promote the replica, and the old master, started again by its
 * script, rejoins as its replica. Then the new master is frozen 5 s (SIGSTOP, SIGCONT) after
 * NICLAB_FAILOVER_FREEZE_JOBS more: the sentinels promote the other again and the frozen one,
 * woken, is made a replica. NICLAB_FAILOVER_WAIT=0 runs it without WAIT (the planted bug:
 * acknowledged jobs are lost).
 *
 * In `npm test` 36 and 12 jobs: six per agent, so that the kill finds jobs finished, running and
 * queued on every agent, and what a failover loses is the stream's last milliseconds, whatever
 * came before. `npm run test:failover` runs the issue's 200 and 60.
 */
const JOBS = Number(process.env.NICLAB_FAILOVER_JOBS ?? 36);
const FREEZE_JOBS = Number(process.env.NICLAB_FAILOVER_FREEZE_JOBS ?? 12);
const WAIT = process.env.NICLAB_FAILOVER_WAIT !== '0';
const AGENTS = ['f1', 'f2', 'f3', 'f4', 'f5', 'f6'];
/** The sentinels' down-after-milliseconds (deploy/ runs 5000: detection is the larger part of the refusal). */
// 2 s, not 1: in two fresh-clone runs at load 12 the sentinels named a replica master on their
// own, redis-0 too starved to answer them for 1 s; the refusal bound of 10 s still holds with a
// second more of detection (4.4-7.2 s measured at 1 s).
const DOWN_AFTER_MS = Number(process.env.NICLAB_FAILOVER_DOWN_AFTER_MS ?? 2000);
const IN_FLIGHT = 6;
/**
 * How late the replica gets the master's stream (NICLAB_FAILOVER_LAG_MS, 20): a replica on
 * another host, or a busy one. On one machine, with none, a SIGKILL loses nothing even without
 * WAIT: the kernel delivers what the dead master had sent (README, "what a 202 promises").
 */
const LAG_MS = Number(process.env.NICLAB_FAILOVER_LAG_MS ?? 20);

let set: SentinelSet;
let apis: ApiClient[] = [];
const processes: NiclabProcess[] = [];
const startedAt = new Date().toISOString();

const isTerminal = (status: string | undefined) => status === 'succeeded' || status === 'failed' || status === 'canceled';

const spec = (agent: string, variant: string, n: number) => ({
  // Short, light runs (UDP at 100 packets/s): what is tested is the queue, not the measurement.
  engine: 'builtin', protocol: 'udp', udp: { packetSize: 200, rate: { packetsPerSecond: 100 } }, duration: 0.5, interval: 0.5,
  labels: { failover: variant, n: String(n) },
  flows: [{ from: { agent, interface: 'lo' }, to: { agent, interface: 'lo' } }],
});

/** POST /v1/jobs with an Idempotency-Key, as a careful client sends it: the status, the job's id on a 202, the problem otherwise. */
async function submit(api: ApiClient, body: unknown, key = randomUUID()): Promise<{ status: number; id?: string; detail?: string }> {
  try {
    const res = await fetch(`${api.base}/v1/jobs`, { method: 'POST', headers: { 'content-type': 'application/json', 'idempotency-key': key }, body: JSON.stringify(body), signal: AbortSignal.timeout(15_000) });
    const parsed = (await res.json()) as { id: string; slug?: string; title?: string; detail?: string };
    const headers = Object.fromEntries(res.headers);
    assertResponse('createJob', { status: res.status, headers, body: parsed });
    if (res.status === 503) assert.ok(headers['retry-after'], `a 503 says when to try again: ${JSON.stringify(parsed)}`);
    return res.status === 202 ? { status: 202, id: parsed.id } : { status: res.status, detail: `${parsed.slug ?? parsed.title}: ${parsed.detail}` };
  } catch (error) {
    return { status: 0, detail: (error as Error).message };
  }
}

before(async () => {
  set = await startSentinelSet({ downAfterMs: DOWN_AFTER_MS, replicationLagMs: LAG_MS, link: true });
  // The API's settings as deploy/compose.sentinel.yaml gives them (the sentinels, the master's name, the password, WAIT 1).
  const from = (name: string) => set.apiEnv[name]!;
  const env = {
    ...Object.fromEntries(['NICLAB_REDIS_SENTINELS', 'NICLAB_REDIS_MASTER', 'REDIS_URL', 'NICLAB_REDIS_WAIT_REPLICAS', 'NICLAB_REDIS_WAIT_MS'].map((name) => [name, from(name)])),
    ...(WAIT ? {} : { NICLAB_REDIS_WAIT_REPLICAS: '0' }),
    NICLAB_PREFIX: uniquePrefix(), NICLAB_SETUP_SECONDS: '20', NICLAB_LOG_LEVEL: 'info',
  };
  const ports = [await freePort(), await freePort()];
  for (const port of ports) processes.push(spawnNiclab(['api'], { ...env, NICLAB_PORT: String(port) }));
  for (const id of AGENTS) processes.push(spawnNiclab(['agent', '--id', id], env));
  apis = ports.map((port) => new ApiClient(`http://127.0.0.1:${port}`));
  // Starting is not what is tested: eight processes starting at once on 2 cores take a while.
  for (const api of apis) await waitForApi(api.base, api.base, 90_000);
  for (const id of AGENTS) await waitFor(`agent ${id}`, async () => (await apis[0]!.call('getAgent', 'GET', `/v1/agents/${id}`)).body.online, 60_000);
});

after(async () => {
  // Each process's log and each server's, for a failure's reading (NICLAB_FAILOVER_LOGS=DIR).
  const logs = process.env.NICLAB_FAILOVER_LOGS;
  if (logs) {
    mkdirSync(logs, { recursive: true });
    processes.forEach((p, i) => writeFileSync(join(logs, `${i < 2 ? `api-${i}` : (AGENTS[i - 2] ?? 'cli')}.log`), p.output()));
    for (const node of set?.nodes.values() ?? []) writeFileSync(join(logs, `${node.name}.log`), node.output());
  }
  for (const p of processes) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill('SIGCONT');
  await Promise.all(processes.map((p) => p.stop()));
  await set?.stop();
});

/** Submits `count` jobs, IN_FLIGHT at a time over both APIs; a 503 (a replica slow to confirm) is sent again with the same key. The acknowledged ids, in order. */
async function burst(variant: string, count: number): Promise<string[]> {
  const ids: string[] = new Array(count);
  let next = 0;
  const lane = async () => {
    for (let n = next++; n < count; n = next++) {
      const key = randomUUID();
      for (let tries = 0; ; tries++) {
        const res = await submit(apis[n % 2]!, spec(AGENTS[n % AGENTS.length]!, variant, n), key);
        if (res.status === 202) {
          ids[n] = res.id!;
          break;
        }
        assert.ok(res.status === 503 && tries < 20, `job ${n} refused before any fault: ${res.status} ${res.detail}`);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
    }
  };
  await Promise.all(Array.from({ length: IN_FLIGHT }, lane));
  return ids;
}

/**
 * Submits on through the fault, one job per agent and API in turn, until every agent has had a
 * job acknowledged on each API: what each API answered, and when it first took one again.
 */
async function submitThrough(variant: string, since: number, onTick: () => Promise<void>): Promise<{ ids: string[]; refusals: Map<string, number>; refusedMs: number[] }> {
  const ids: string[] = [];
  const refusals = new Map<string, number>();
  const refusedMs = apis.map(() => NaN);
  const owed = new Set(apis.flatMap((_, a) => AGENTS.map((agent) => `${a}/${agent}`)));
  // Each job is sent again with its key until it is taken: a 503'd write that was kept is the same job.
  const slots = [...owed];
  const keys = new Map(slots.map((slot) => [slot, randomUUID()]));
  while (owed.size > 0) {
    assert.ok(Date.now() - since < 60_000, `not every API took a job for every agent within 60 s of the fault: ${[...owed].join(' ')} owed; refusals ${JSON.stringify([...refusals])}`);
    await onTick();
    const [a, agent] = [...owed][0]!.split('/') as [string, string];
    const api = Number(a);
    const slot = `${api}/${agent}`;
    const res = await submit(apis[api]!, spec(agent, `${variant}-after`, slots.indexOf(slot)), keys.get(slot));
    if (res.status === 202) {
      ids.push(res.id!);
      owed.delete(slot);
      if (Number.isNaN(refusedMs[api])) refusedMs[api] = Date.now() - since;
    } else {
      const why = `${res.status} ${res.detail?.replace(/[0-9a-f-]{36}/g, 'ID').slice(0, 140)}`;
      refusals.set(why, (refusals.get(why) ?? 0) + 1);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  return { ids, refusals, refusedMs };
}

/** Every job in `ids` finishes; the list names each once; each succeeded with its one run, and the history has each run once. Returns how many runs were made more than once. */
async function checkEveryJob(label: string, ids: string[]): Promise<{ remade: number }> {
  const api = apis[0]!;
  const listed = new Map<string, number>();
  let cursor: string | null = null;
  do {
    const page: { status: number; body: any } = await api.call('listJobs', 'GET', `/v1/jobs?limit=200${cursor ? `&cursor=${cursor}` : ''}`);
    assert.equal(page.status, 200);
    for (const job of page.body.items) listed.set(job.id, (listed.get(job.id) ?? 0) + 1);
    cursor = page.body.nextCursor;
  } while (cursor);
  const missing = ids.filter((id) => !listed.has(id));
  // A job kept without its queue entry (the stream's tail lost) stays queued: lost as surely.
  // The list is read once a second (each job's own stream would be 200 streams) until every one has ended.
  const statuses = new Map<string, string>();
  const deadline = Date.now() + 90_000;
  for (;;) {
    let next: string | null = null;
    do {
      const page: { body: any } = await api.call('listJobs', 'GET', `/v1/jobs?limit=200${next ? `&cursor=${next}` : ''}`);
      for (const job of page.body.items) statuses.set(job.id, job.status);
      next = page.body.nextCursor;
    } while (next);
    if (ids.every((id) => !listed.has(id) || isTerminal(statuses.get(id))) || Date.now() > deadline) break;
    await new Promise((resolve) => setTimeout(resolve, 1000));
  }
  const stuck = ids.filter((id) => listed.has(id) && !isTerminal(statuses.get(id)));
  // The figure the planted run (NICLAB_FAILOVER_WAIT=0) is about.
  console.log(`${label}: ${ids.length} acknowledged, ${missing.length + stuck.length} lost (${missing.length} gone, ${stuck.length} never run)${missing.length + stuck.length ? `: ${[...missing, ...stuck].slice(0, 5).join(' ')}` : ''}`);
  assert.deepEqual([...missing, ...stuck], [], `${label}: acknowledged jobs lost (gone, or never run within 90 s)`);
  assert.deepEqual(ids.filter((id) => listed.get(id) !== 1), [], `${label}: each listed once`);
  const jobs = [];
  for (const id of ids) jobs.push((await api.job(id)).body);
  const failed = jobs.filter((job) => job.status !== 'succeeded').map((job) => `${job.id} ${job.status} ${job.error?.code}: ${job.error?.message}`);
  assert.deepEqual(failed, [], `${label}: every acknowledged job succeeds`);
  let remade = 0;
  for (const job of jobs) {
    assert.equal(job.runs.length, 1, `${job.id}: one run`);
    assert.equal(job.runs[0].status, 'succeeded');
    remade += job.runs[0].earlierAttempts?.length ? 1 : 0;
  }
  const history = await api.call('listResults', 'GET', `/v1/results?label=${encodeURIComponent(`failover=${label}`)}&from=${encodeURIComponent(startedAt)}&limit=10000`);
  assert.equal(history.status, 200);
  // Each acknowledged job's run once (a job answered 503 may have been kept and run too: the API said it may).
  const inHistory = new Map<string, number>();
  for (const summary of history.body.items as { runId: string }[]) inHistory.set(summary.runId, (inHistory.get(summary.runId) ?? 0) + 1);
  assert.deepEqual(jobs.map((job) => job.runs[0].id).filter((id) => inHistory.get(id) !== 1), [], `${label}: every run in the history once`);
  assert.deepEqual([...inHistory].filter(([, count]) => count > 1), [], `${label}: no run twice in the history`);
  return { remade };
}

test(`SIGKILL of the master the moment the last of ${JOBS} jobs is acknowledged: every acknowledged job runs once, both APIs and every agent take jobs after the failover, the API refuses for at most 10 s`, { timeout: 400_000 }, async () => {
  const acknowledged = await burst('kill', JOBS);
  // Nothing between the last 202 and the kill: the replica is LAG_MS behind, no more.
  const killedAt = Date.now();
  // The master's host is lost: the server, and what its network still held for the replica.
  set.signal('redis-0', 'SIGKILL');
  set.link!.cut();
  // The CLI submits through the failover, sending again with its own Idempotency-Key while the API answers 503.
  const cli = spawnNiclab(['run', '--from', 'f1:lo', '--to', 'f1:lo', '-t', '0.5', '--label', 'cli=retried', '--json'], { NICLAB_API: apis[0]!.base });
  processes.push(cli);
  let promotedMs = NaN;
  let restarted = false;
  const through = await submitThrough('kill', killedAt, async () => {
    if (restarted) return;
    if ((await set.master().catch(() => 0)) !== set.port('redis-1')) return;
    promotedMs = Date.now() - killedAt;
    // Its container comes back: its script asks the sentinels and starts it as the new master's replica.
    set.start('redis-0');
    set.link!.restore();
    restarted = true;
  });
  const afterIds = through.ids;
  console.log(`kill: the sentinels named redis-1 master after ${promotedMs} ms; the APIs took a job again after ${through.refusedMs.join(' and ')} ms; refusals: ${JSON.stringify([...through.refusals])}`);
  // A machine too busy to answer the sentinels for down-after-milliseconds has them fail over by
  // themselves: a replica named master sooner than that after the kill was named before it.
  assert.ok(promotedMs >= DOWN_AFTER_MS, `the sentinels had failed over before the kill (redis-1 named master ${promotedMs} ms after it)`);
  const [killed, later] = [await checkEveryJob('kill', acknowledged), await checkEveryJob('kill-after', afterIds)];
  console.log(`kill: runs made again ${killed.remade} of ${JOBS}, after ${later.remade}`);
  assert.ok([...through.refusals.keys()].every((why) => why.startsWith('503 ')), `every refusal is a 503: ${JSON.stringify([...through.refusals])}`);
  assert.ok(Math.max(...through.refusedMs) <= 10_000, `the APIs refused for ${through.refusedMs.join(' and ')} ms`);
  await waitFor('redis-0 back as the replica', async () => /role:slave[\s\S]*master_link_status:up/.test(await ask<string>(set.port('redis-0'), 'info', 'replication')), 20_000, 200);
  assert.equal(await cli.exited, 0, cli.output());
  const cliJobs = (await apis[0]!.call('listJobs', 'GET', '/v1/jobs?limit=200')).body.items.filter((j: { spec: { labels?: Record<string, string> } }) => j.spec.labels?.cli === 'retried');
  assert.deepEqual(cliJobs.map((j: { id: string; status: string }) => [j.id, j.status]), [[JSON.parse(cli.output().slice(cli.output().indexOf('{'))).id, 'succeeded']], 'the CLI made one job, and it ran');
  assert.ok(processes.filter((p) => p !== cli).every((p) => isAlive(p.pid)), 'no niclab process restarted');
  // Each coordinator's BullMQ worker took jobs after the promotion, not only reconnected.
  const promotedAt = killedAt + promotedMs;
  const started = processes.slice(0, 2).map((p) => p.output().split('\n').filter((line) => line.includes('"msg":"job started"') && JSON.parse(line).time > promotedAt).length);
  console.log(`kill: jobs started by each coordinator after the promotion: ${started.join(' and ')}`);
  assert.ok(started.every((n) => n > 0), `both coordinators start jobs after the failover: ${started.join(', ')}`);
  for (const id of AGENTS) {
    const agent = (await apis[1]!.call('getAgent', 'GET', `/v1/agents/${id}`)).body;
    assert.ok(agent.online && Date.parse(agent.lastSeen) > killedAt + promotedMs, `agent ${id} heartbeats on the new master: ${agent.lastSeen}`);
  }
});

test(`the master frozen 5 s (SIGSTOP, SIGCONT) the moment the last of ${FREEZE_JOBS} jobs is acknowledged: nothing acknowledged is lost, and the frozen master rejoins as a replica`, { timeout: 300_000 }, async () => {
  const master = (await set.master()) === set.port('redis-1') ? 'redis-1' : 'redis-0';
  const other = master === 'redis-1' ? 'redis-0' : 'redis-1';
  const acknowledged = await burst('freeze', FREEZE_JOBS);
  const frozenAt = Date.now();
  set.signal(master, 'SIGSTOP');
  let woken = false;
  const through = await submitThrough('freeze', frozenAt, async () => {
    if (!woken && Date.now() - frozenAt >= 5000) {
      set.signal(master, 'SIGCONT');
      woken = true;
    }
  });
  if (!woken) {
    await new Promise((resolve) => setTimeout(resolve, 5000 - (Date.now() - frozenAt)));
    set.signal(master, 'SIGCONT');
  }
  console.log(`freeze: the APIs took a job again after ${through.refusedMs.join(' and ')} ms; refusals: ${JSON.stringify([...through.refusals])}`);
  const promoted = await waitFor(`${other} named master`, async () => (await set.master()) === set.port(other), 30_000, 200);
  assert.ok(promoted);
  await waitFor(`${master} back as the replica`, async () => /role:slave[\s\S]*master_link_status:up/.test(await ask<string>(set.port(master), 'info', 'replication')), 40_000, 200);
  await checkEveryJob('freeze', acknowledged);
  await checkEveryJob('freeze-after', through.ids);
  assert.ok(processes.slice(0, 2 + AGENTS.length).every((p) => isAlive(p.pid)), 'no niclab process restarted');
});
