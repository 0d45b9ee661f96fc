import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { NOT_ROOT, startTestLab } from '../helpers/lab.js';
import { waitFor } from '../helpers/processes.js';

/**
 * Groups on a real lab: 6 hosts in two racks (`niclab lab up --labels`), each agent on its own
 * eth1 in its own namespace. A mesh over rack a (3 hosts, 6 pairs) and a disjoint a × b (9
 * pairs): every pair measured once, no two runs on one interface at the same time (from the
 * runs' own start and end), the job within 1.3 × rounds × the mean run's time plus setup. A
 * member stopped before a submission is skipped and the rest run.
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

describe('groups on a lab of two racks', { skip: NOT_ROOT }, () => {
  test('mesh over rack a, disjoint a × b, then a member stopped is skipped and the rest run', async (ctx) => {
    const t = await startTestLab(6, '1gbit', 'A,B,C:rack=a;D,E,F:rack=b');
    try {
      const base = { engine: 'builtin', protocol: 'tcp', duration: 1 };
      const rackA = { labels: { rack: 'a' }, interface: 'eth1' };
      const mesh = await t.client.succeed({ ...base, flows: { shape: 'mesh', members: rackA } }, 90_000);
      assert.equal(mesh.expansion.rounds.length, 6, 'a mesh of 3: 2N rounds');
      ctx.diagnostic(`mesh: ${checkJob(mesh, 6)}`);
      const disjoint = await t.client.succeed({ ...base, flows: { shape: 'disjoint', a: rackA, b: { labels: { rack: 'b' }, interface: 'eth1' } } }, 90_000);
      assert.equal(disjoint.expansion.rounds.length, 3, 'a × b, 3 × 3: 3 rounds of 3 runs');
      ctx.diagnostic(`disjoint: ${checkJob(disjoint, 9)}`);
      const report = await t.client.call('getReport', 'GET', `/v1/jobs/${disjoint.id}/report`);
      assert.ok(report.body.matrix[0].cells.flat().every((c: { verdict: string } | null) => c?.verdict === 'measured'), 'every cell measured, path verified');

      const c = t.lab.hosts.find((h) => h.name === 'C')!;
      process.kill(c.agentPid!, 'SIGTERM');
      await waitFor('agent C offline', async () => !(await t.client.call('getAgent', 'GET', '/v1/agents/C')).body.online, 10_000);
      const after = await t.client.succeed({ ...base, flows: { shape: 'mesh', members: rackA } }, 60_000);
      assert.deepEqual(after.expansion.skipped.map((s: { agent: string; reason: string }) => `${s.agent} ${s.reason}`), ['C offline']);
      ctx.diagnostic(`after C stopped: ${checkJob(after, 2)}`);
    } finally {
      await t.close();
    }
  });
});
