import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { summarize, welch } from '@niclab/shared/domain/statistics';
import { flow, NOT_ROOT, startTestLab, type TestLab } from '../helpers/lab.js';

// A and B behind 100 Mbit/s, C and D behind 200 Mbit/s: the same test on a slow and a fast link.
describe('A/B comparison on the lab', { skip: NOT_ROOT }, () => {
  let t: TestLab;
  const jobs: Record<string, string> = {};
  let turns = '';
  before(async () => {
    t = await startTestLab(4, 'A=100mbit,B=100mbit,C=200mbit,D=200mbit');
    const spec = (from: string, to: string) => ({ duration: 2, interval: 1, repeat: 3, flows: [flow(from, to)] });
    jobs.fast = (await t.client.succeed(spec('C', 'D'), 120_000)).id;
    // The same link twice, submitted together: they take turns run by run (A B A B), so a
    // drift of this shared machine over the minute falls on both alike.
    const [slow, slowAgain] = await Promise.all([t.client.succeed(spec('A', 'B'), 120_000), t.client.succeed(spec('A', 'B'), 120_000)]);
    jobs.slow = slow.id;
    jobs.slowAgain = slowAgain.id;
    turns = [...slow.runs, ...slowAgain.runs].sort((x, y) => Date.parse(x.startedAt) - Date.parse(y.startedAt)).map((r) => (r.jobId === slow.id ? 'A' : 'B')).join('');
  });
  after(async () => {
    await t?.close();
  });

  const compare = async (baseline: string, candidate: string) => (await t.client.call('compareJobs', 'GET', `/v1/compare?baseline=${baseline}&candidate=${candidate}`)).body;

  test('100 Mbit/s -> 200 Mbit/s: better, about +100%', async (ctx) => {
    const c = await compare(jobs.slow!, jobs.fast!);
    const [p] = c.points;
    ctx.diagnostic(`${(p.baseline.mean / 1e6).toFixed(2)} -> ${(p.candidate.mean / 1e6).toFixed(2)} Mbit/s: ${p.changePercent.toFixed(2)}% [${p.changePercentInterval.map((v: number) => v.toFixed(2)).join(', ')}], p ${p.pValue}`);
    assert.equal(p.verdict, 'better');
    assert.ok(Math.abs(p.changePercent - 100) <= 5, `change ${p.changePercent}%`);
    // The comparison's means and interval are Welch's over the runs' own figures, fetched from the
    // jobs apart (the statistics themselves are checked against scipy in test/api/report.test.ts).
    const figures = async (id: string) => (await t.client.call('listRuns', 'GET', `/v1/jobs/${id}/runs`)).body.items.map((r: any) => r.flows[0].bitsPerSecond as number);
    const [slow, fast] = [summarize(await figures(jobs.slow!)), summarize(await figures(jobs.fast!))];
    const w = welch(slow, fast);
    assert.ok(Math.abs(p.baseline.mean - slow.mean) < 1e-6 && Math.abs(p.candidate.mean - fast.mean) < 1e-6, `means ${p.baseline.mean}, ${p.candidate.mean} against the runs' ${slow.mean}, ${fast.mean}`);
    assert.ok(p.changePercentInterval.every((v: number, i: number) => Math.abs(v - (w.differenceInterval[i]! / slow.mean) * 100) < 1e-6), `interval ${p.changePercentInterval} against Welch's over the runs ${w.differenceInterval.map((d) => (d / slow.mean) * 100)}`);
    assert.deepEqual(c.variedByUser, ['flows'], 'the user changed the flows, nothing else');
    assert.deepEqual(c.environmentDifferences, [], 'veth on one kernel: nothing differs underneath');
    const table = await (await fetch(`${t.client.base}/v1/compare?baseline=${jobs.slow}&candidate=${jobs.fast}&format=table`)).text();
    assert.match(table, /all\s+:\s+\d+\.\d{2}\s+\d+\.\d{2}\s+\d+\.\d{2}\s+\[[\d., -]+\]\s+p=\S+\s+adj=\S+\s+better/);
    assert.match(table, /Average : \d+\.\d{2}%/);
  });

  test('two jobs on the same link submitted together take turns run by run', () => {
    assert.ok(turns === 'ABABAB' || turns === 'BABABA', `runs in start order: ${turns}`);
  });

  test('the same link twice: within 5% (its verdict is noise\'s to decide, and not asserted)', async (ctx) => {
    const [p] = (await compare(jobs.slow!, jobs.slowAgain!)).points;
    ctx.diagnostic(`${(p.baseline.mean / 1e6).toFixed(3)} -> ${(p.candidate.mean / 1e6).toFixed(3)} Mbit/s: ${p.changePercent.toFixed(3)}%, p ${p.pValue}, ${p.verdict}`);
    // Steady shapers agree within a fraction of a percent on a quiet host; a loaded one drifts a few.
    assert.ok(Math.abs(p.changePercent) < 5, `change ${p.changePercent}%`);
  });
});
