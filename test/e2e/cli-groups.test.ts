import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { AgentRegistry, type AgentRecord } from '@niclab/shared/stores/agent-registry';
import { Keys } from '@niclab/shared/stores/keys';
import { createRedis } from '@niclab/shared/runtime/redis';
import { startNiclab, type TestNiclab } from '../helpers/niclab.js';
import { runNiclab, spawnNiclab, waitFor } from '../helpers/processes.js';

/**
 * `niclab run --mesh|--disjoint|--star` as a user runs them, against the built API and three
 * agent processes (labelled rack=a) on a real Redis; every agent's `lo` is the same kernel
 * interface here (the lab's test puts each on its own).
 */

let niclab: TestNiclab;

before(async () => {
  niclab = await startNiclab(['m1', 'm2', 'm3'], { NICLAB_AGENT_LABELS: 'rack=a', NICLAB_SETUP_SECONDS: '10' });
});

after(async () => {
  await niclab?.stop();
});

function niclabCli(...args: string[]) {
  return runNiclab(args, { NICLAB_API: niclab.client.base }, 180_000);
}

test('niclab run --mesh LABELS:IFACE -t N --wait: a progress line per pair, then the matrix, source rows by destination columns; exit 0', async () => {
  const { code, stdout, stderr } = await niclabCli('run', '--mesh', 'rack=a:lo', '-t', '0.5', '--wait');
  assert.equal(code, 0, `${stderr}\n${stdout}`);
  assert.match(stderr, /^job [0-9a-f-]{36}: 6 runs$/m);
  assert.equal((stderr.match(/^run \d\/6 succeeded: [\d.]+ Mbit\/s$/gm) ?? []).length, 6, stderr);
  assert.match(stdout, /^mesh matrix: 6 pairs in 6 rounds, rows from, columns to$/m);
  assert.match(stdout, /^Mbit\/s from \\ to\s+m1:lo\s+m2:lo\s+m3:lo$/m);
  const rows = ['m1', 'm2', 'm3'].map((from, i) => {
    const row = new RegExp(`^${from}:lo\\s+(.+)$`, 'm').exec(stdout);
    assert.ok(row, `a row for ${from}:\n${stdout}`);
    const cells = row[1]!.trim().split(/\s+(?=[\d-])/);
    assert.equal(cells.length, 3, `three cells in ${row[1]}`);
    assert.equal(cells[i], '-', 'no pair from a host to itself');
    return cells;
  });
  // Each measured cell is the pair's figure, the one the job's run for that pair reported.
  const id = /^job ([0-9a-f-]{36})/m.exec(stderr)![1]!;
  const job = (await niclab.client.job(id)).body;
  assert.equal(job.pairs.measured, 6);
  for (const run of job.runs) {
    const [from, to] = [run.flows[0].from.agent, run.flows[0].to.agent].map((a: string) => Number(a.slice(1)) - 1);
    const cell = rows[from!]![to!]!;
    assert.equal(cell.split(' ')[0], (run.flows[0].bitsPerSecond / 1e6).toFixed(2), `${run.flows[0].from.agent} -> ${run.flows[0].to.agent}`);
  }
  // The job list's line is the weakest pair: the lowest of the six runs' rates (one run per pair).
  const slowest = job.runs.reduce((a: any, r: any) => (r.flows[0].bitsPerSecond < a.flows[0].bitsPerSecond ? r : a));
  assert.equal(job.finding.from, 'pair');
  assert.equal(job.finding.value, slowest.flows[0].bitsPerSecond);
  assert.match(job.finding.reason, new RegExp(`^the weakest of 6 measured pairs: ${slowest.flows[0].from.agent}:lo -> ${slowest.flows[0].to.agent}:lo`));
});

test('niclab run --disjoint A --disjoint B and schedules create --star CENTER --star MEMBERS send those groups; usage errors exit 2', async () => {
  const disjoint = await niclabCli('run', '--disjoint', 'rack=a:lo', '--disjoint', 'rack=a:127.0.0.0/8', '-t', '0.5');
  assert.equal(disjoint.code, 0, disjoint.stderr);
  const id = disjoint.stdout.trim();
  const job = (await niclab.client.job(id)).body;
  assert.deepEqual(job.spec.group, { shape: 'disjoint', a: { labels: { rack: 'a' }, interface: 'lo' }, b: { labels: { rack: 'a' }, prefix: '127.0.0.0/8' } });
  assert.equal(job.spec.flows.length, 6, 'a × b without a host to itself');
  await niclab.client.call('cancelJob', 'DELETE', `/v1/jobs/${id}`);
  const created = await niclabCli('schedules', 'create', 'hub', '--every', '3600', '--star', 'rack=a:lo', '--star', 'rack=a:lo', '--star-direction', 'to', '-t', '1', '--json');
  assert.equal(created.code, 0, created.stderr);
  assert.deepEqual(JSON.parse(created.stdout).spec.flows, { shape: 'star', center: { labels: { rack: 'a' }, interface: 'lo' }, members: { labels: { rack: 'a' }, interface: 'lo' }, starDirection: 'to' });
  assert.equal((await niclabCli('schedules', 'delete', 'hub')).code, 0);
  const usage = await niclabCli('run', '--mesh', 'rack=a:lo', '--star', 'rack=a:lo', '--star', 'rack=a:lo');
  assert.equal(usage.code, 2);
  assert.match(usage.stderr, /--mesh and --star exclude each other/);
});

test('a star with one member that never answers: --wait prints the matrix with that pair FAILED and why, says how many pairs failed, exits 2', async () => {
  // The center: an agent of its own label. The failing member: registered and heartbeating, but nothing takes its tasks.
  const hub = spawnNiclab(['agent', '--id', 'hub'], { ...niclab.env, NICLAB_AGENT_LABELS: 'role=hub' });
  const redis = createRedis(niclab.redis.url, { name: 'test-ghost' });
  const registry = new AgentRegistry(redis, new Keys(niclab.env.NICLAB_PREFIX!));
  const { online: _online, lastSeen: _lastSeen, ...m1 } = (await registry.get('m1'))!;
  const ghost: AgentRecord = { ...m1, id: 'ghost' };
  const beat = () => void registry.heartbeat(ghost).catch(() => undefined);
  beat();
  const timer = setInterval(beat, 500);
  try {
    await waitFor('agent hub online', async () => (await niclab.client.call('getAgent', 'GET', '/v1/agents/hub')).body.online === true, 20_000);
    const { code, stdout, stderr } = await niclabCli('run', '--star', 'role=hub:lo', '--star', 'rack=a:lo', '--star-direction', 'to', '-t', '0.5', '--wait');
    assert.equal(code, 2, `${stderr}\n${stdout}`);
    assert.match(stdout, /^star matrix: 4 pairs in 4 rounds, rows from, columns to$/m);
    const failed = /^ghost:lo\s+(FAILED \S+)$/m.exec(stdout);
    assert.ok(failed, stdout);
    for (const member of ['m1', 'm2', 'm3']) assert.match(stdout, new RegExp(`^${member}:lo\\s+[\\d.]+`, 'm'));
    assert.match(stdout, /^pairs measured: 3 of 4; 1 failed$/m);
    assert.match(stdout, new RegExp(`^failed pair ghost:lo -> hub:lo: ${failed[1]!.split(' ')[1]}: `, 'm'));
    assert.match(stderr, /^job [0-9a-f]+: 1 of 4 pairs failed$/m);
  } finally {
    clearInterval(timer);
    await registry.deregister(ghost);
    redis.disconnect();
    await hub.stop();
  }
});
