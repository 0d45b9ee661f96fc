import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { labAddHost } from '@niclab/cli/lab/lab';
import { NOT_ROOT, startTestLab, type TestLab } from '../helpers/lab.js';
import { waitFor } from '../helpers/processes.js';
import { DEPLOY, startPrometheus } from '../helpers/prometheus.js';

/**
 * Groups on a real lab: 6 hosts in two racks (`niclab lab up --labels`), each agent on its own
 * eth1 in its own namespace. A mesh over rack a (3 hosts, 6 pairs) and a disjoint a × b (9
 * pairs): every pair measured once, no two runs on one interface at the same time (from the
 * runs' own start and end), the job within 1.3 × rounds × the mean run's time plus setup. A
 * member stopped before a submission is skipped and the rest run. A schedule over rack a: a
 * 7th host added with the label between two firings (`niclab lab add`) is in the second, a
 * member stopped before the third is skipped there, and the fleet dashboard's matrix query,
 * on a real Prometheus scraping the API, has a cell for every pair measured.
 */

const SETUP_SECONDS = 5;
type Run = { index: number; startedAt: string; finishedAt: string; status: string; flows: { from: { agent: string; interface: string }; to: { agent: string; interface: string }; bitsPerSecond: number }[] };
const ends = (r: Run) => r.flows.flatMap((f) => [`${f.from.agent}:${f.from.interface}`, `${f.to.agent}:${f.to.interface}`]);
const span = (r: Run) => [Date.parse(r.startedAt), Date.parse(r.finishedAt)] as const;

/** Every pair once, no interface in two runs at once, and the job's wall time within the bound. */
function checkJob(job: { startedAt: string; finishedAt: string; runs: Run[]; expansion: { rounds: number[][] } }, pairs: number): string {
  const runs = job.runs;
  assert.equal(runs.length, pairs);
  assert.equal(new Set(runs.map((r) => `${r.flows[0]!.from.agent}>${r.flows[0]!.to.agent}`)).size, pairs, 'every pair once');
  assert.ok(runs.every((r) => r.status === 'succeeded' && r.flows[0]!.bitsPerSecond > 0));
  for (const [i, x] of runs.entries()) {
    for (const y of runs.slice(i + 1)) {
      const [xs, xe] = span(x);
      const [ys, ye] = span(y);
      if (xs < ye && ys < xe) assert.deepEqual(ends(x).filter((e) => ends(y).includes(e)), [], `runs ${x.index} and ${y.index} overlap on an interface`);
    }
  }
  const runSeconds = runs.reduce((sum, r) => sum + (span(r)[1] - span(r)[0]) / 1000, 0) / runs.length;
  const jobSeconds = (Date.parse(job.finishedAt) - Date.parse(job.startedAt)) / 1000;
  const rounds = job.expansion.rounds.length;
  const bound = 1.3 * rounds * runSeconds + SETUP_SECONDS;
  assert.ok(jobSeconds <= bound, `job took ${jobSeconds.toFixed(1)} s; bound 1.3 × ${rounds} rounds × ${runSeconds.toFixed(2)} s + ${SETUP_SECONDS} s = ${bound.toFixed(1)} s`);
  return `${pairs} pairs in ${rounds} rounds, run ${runSeconds.toFixed(2)} s, job ${jobSeconds.toFixed(1)} s (bound ${bound.toFixed(1)} s)`;
}

/** The fleet dashboard's source × destination throughput query, as the dashboard has it, for every engine. */
function fleetMatrixQuery(): string {
  const dashboard = JSON.parse(readFileSync(join(DEPLOY, 'grafana/dashboards/fleet-overview.json'), 'utf8')) as { panels: { title: string; targets?: { expr: string }[] }[] };
  const panel = dashboard.panels.find((p) => /source \(rows\) x destination/.test(p.title));
  assert.ok(panel?.targets?.[0], 'the fleet dashboard has its matrix panel');
  return panel.targets[0].expr.replace(/\$engine/g, '.*');
}

/**
 * One lab of two racks for both tests, in order: the schedule's test adds G to rack a and stops
 * C; the mesh's test then finds rack a as A, B and G.
 */
describe('groups on a lab of two racks', { skip: NOT_ROOT }, () => {
  let t: TestLab;
  before(async () => {
    t = await startTestLab(6, '100mbit', 'A,B,C:rack=a;D,E,F:rack=b');
  });
  after(async () => {
    await t?.close();
  });

  test('a host added with the label between two firings is in the second; a member stopped before a firing is skipped there; Prometheus has every measured pair', async (ctx) => {
    const prometheus = await startPrometheus(t.env.NICLAB_PORT!);
    try {
      // A firing's job (12 pairs in 6 rounds) takes about 16 s: each firing ends before the next.
      const EVERY = 20;
      const created = await t.client.call('createSchedule', 'POST', '/v1/schedules', { name: 'fleet', everySeconds: EVERY, spec: { engine: 'builtin', protocol: 'tcp', duration: 1, flows: { shape: 'mesh', members: { labels: { rack: 'a' }, interface: 'eth1' } } } });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const firing = async (n: number) => {
        let id: string | undefined;
        await waitFor(`firing ${n + 1}`, async () => {
          const { body } = await t.client.call('listJobs', 'GET', '/v1/jobs?limit=20');
          id = (body.items as { id: string; spec: { labels?: Record<string, string> } }[]).filter((j) => j.spec.labels?.schedule === 'fleet').reverse()[n]?.id;
          return id !== undefined;
        }, (n + 2) * EVERY * 1000);
        const { job } = await t.client.finish(id!, 120_000);
        return job;
      };
      const agentsOf = (job: { spec: { flows: { from: { agent: string } }[] } }) => [...new Set(job.spec.flows.map((f) => f.from.agent))].sort();

      const first = await firing(0);
      assert.deepEqual(agentsOf(first), ['A', 'B', 'C']);
      ctx.diagnostic(`firing 1: ${checkJob(first, 6)}`);

      const g = await labAddHost(t.dataDir, t.lab.name, { rate: '100mbit', labels: 'rack=a', heartbeatSeconds: 1, logLevel: 'warn' });
      assert.equal(g.name, 'G', 'the 7th host');
      t.lab.hosts.push(g); // for the test after this one, which stops it
      await waitFor('agent G online', async () => (await t.client.call('getAgent', 'GET', '/v1/agents/G')).body.online === true, 20_000);
      const joinedAt = Date.now();
      const second = await firing(1);
      assert.ok(Date.parse(second.createdAt) > joinedAt, 'the second firing came after G joined');
      assert.deepEqual(agentsOf(second), ['A', 'B', 'C', 'G']);
      assert.equal(second.expansion.rounds.length, 6, 'a mesh of 4: 2(N-1) rounds');
      ctx.diagnostic(`firing 2 (G joined): ${checkJob(second, 12)}`);

      const c = t.lab.hosts.find((h) => h.name === 'C')!;
      process.kill(c.agentPid!, 'SIGTERM');
      await waitFor('agent C offline', async () => !(await t.client.call('getAgent', 'GET', '/v1/agents/C')).body.online, 10_000);
      const stoppedAt = Date.now();
      const third = await firing(2);
      // No fourth firing: the next test times its jobs, which must not wait for a lease.
      assert.equal((await t.client.call('deleteSchedule', 'DELETE', '/v1/schedules/fleet')).status, 204);
      assert.ok(Date.parse(third.createdAt) > stoppedAt, 'the third firing came after C stopped');
      assert.deepEqual(third.expansion.skipped.map((s: { agent: string; reason: string }) => `${s.agent} ${s.reason}`), ['C offline']);
      assert.deepEqual(agentsOf(third), ['A', 'B', 'G']);
      ctx.diagnostic(`firing 3 (C stopped): ${checkJob(third, 6)}`);

      // Every pair measured in the three firings (A, B, C, G's mesh: 12) is a cell of the dashboard's matrix.
      const measured = new Set([first, second, third].flatMap((job) => job.runs.map((r: Run) => `${r.flows[0]!.from.agent}:eth1 ${r.flows[0]!.to.agent}:eth1`)));
      assert.equal(measured.size, 12);
      // Each cell is to be the pair's latest figure: the last firing that measured it.
      const latest = new Map<string, number>();
      for (const job of [first, second, third]) for (const r of job.runs as Run[]) latest.set(`${r.flows[0]!.from.agent}:eth1 ${r.flows[0]!.to.agent}:eth1`, r.flows[0]!.bitsPerSecond);
      const expr = fleetMatrixQuery();
      let cells = new Map<string, number>();
      // Scraped every second: the third firing's figures arrive at the next scrape.
      await waitFor('every measured pair in the fleet matrix at its latest figure', async () => {
        const reply = await prometheus.query(expr);
        assert.equal(reply.status, 'success', reply.error);
        cells = new Map((reply.data!.result as { metric: { src: string; dst: string }; value: [number, string] }[]).map((r) => [`${r.metric.src} ${r.metric.dst}`, Number(r.value[1])]));
        return [...latest].every(([pair, value]) => cells.get(pair) === value);
      }, 30_000).catch(() => undefined);
      assert.deepEqual([...cells.keys()].sort(), [...measured].sort(), 'a cell for each measured pair, and no other');
      for (const [pair, value] of latest) assert.equal(cells.get(pair), value, pair);
      ctx.diagnostic(`prometheus fleet matrix: ${cells.size} cells for ${measured.size} measured pairs`);
    } finally {
      await t.client.call('deleteSchedule', 'DELETE', '/v1/schedules/fleet').catch(() => undefined);
      await prometheus.stop();
    }
  });

  test('mesh over rack a, disjoint a × b, then a member stopped is skipped and the rest run', async (ctx) => {
    // After the schedule's test: rack a is A, B and G, and C is offline (skipped, as that test showed).
    const base = { engine: 'builtin', protocol: 'tcp', duration: 1 };
    const rackA = { labels: { rack: 'a' }, interface: 'eth1' };
    const skipped = (job: { expansion: { skipped: { agent: string; reason: string }[] } }) => job.expansion.skipped.map((s) => `${s.agent} ${s.reason}`);
    await waitFor('no job of the schedule still at work', async () => {
      const { body } = await t.client.call('listJobs', 'GET', '/v1/jobs?limit=50');
      return (body.items as { status: string }[]).every((j) => !['queued', 'running'].includes(j.status));
    }, 60_000);
    const mesh = await t.client.succeed({ ...base, flows: { shape: 'mesh', members: rackA } }, 90_000);
    assert.equal(mesh.expansion.rounds.length, 6, 'a mesh of 3: 2N rounds');
    assert.deepEqual(skipped(mesh), ['C offline']);
    ctx.diagnostic(`mesh: ${checkJob(mesh, 6)}`);
    const disjoint = await t.client.succeed({ ...base, flows: { shape: 'disjoint', a: rackA, b: { labels: { rack: 'b' }, interface: 'eth1' } } }, 90_000);
    assert.equal(disjoint.expansion.rounds.length, 3, 'a × b, 3 × 3: 3 rounds of 3 runs');
    ctx.diagnostic(`disjoint: ${checkJob(disjoint, 9)}`);
    const report = await t.client.call('getReport', 'GET', `/v1/jobs/${disjoint.id}/report`);
    assert.ok(report.body.matrix[0].cells.flat().every((c: { verdict: string } | null) => c?.verdict === 'measured'), 'every cell measured, path verified');

    const g = t.lab.hosts.find((h) => h.name === 'G')!;
    process.kill(g.agentPid!, 'SIGTERM');
    await waitFor('agent G offline', async () => !(await t.client.call('getAgent', 'GET', '/v1/agents/G')).body.online, 10_000);
    const after = await t.client.succeed({ ...base, flows: { shape: 'mesh', members: rackA } }, 60_000);
    assert.deepEqual(skipped(after), ['C offline', 'G offline']);
    ctx.diagnostic(`after G stopped: ${checkJob(after, 2)}`);
  });
});
