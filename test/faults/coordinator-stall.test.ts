import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { ApiClient } from '../helpers/api-client.js';
import { startFaultStack, type FaultStack } from '../helpers/fault-stack.js';
import { spawnNiclab, waitFor, type NiclabProcess } from '../helpers/processes.js';

/**
 * Issue 31: a coordinator whose event loop stalls for 20 s (SIGSTOP, then SIGCONT) mid-run.
 * Its hold on the job (the BullMQ lock, 15 s) lapses meanwhile and the other coordinator takes
 * the job over. Woken, the stalled one must keep nothing and start nothing: the job is run and
 * recorded once, by the one that holds it.
 */
const STALL_MS = 20_000;
let stack: FaultStack;
let env: Record<string, string>;
let client: ApiClient;

before(async () => {
  stack = await startFaultStack(['ss', 'sr']);
  ({ env, client } = stack);
});

after(async () => {
  await stack?.stop();
});

/** A process's log lines (JSON), as parsed. */
const lines = (p: NiclabProcess) => p.output().split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as { time: number; msg: string; jobId?: string; runId?: string });

test('a coordinator stalled 20 s mid-run: the other takes the job over; woken, it keeps nothing and starts nothing; each run once in the job and the history', async () => {
  const coordinators = [spawnNiclab(['coordinator'], env), spawnNiclab(['coordinator'], env)];
  stack.processes.push(...coordinators);
  // Paced UDP: two 6 s runs; the stall falls 2 s into the first.
  const submitted = await client.submit({ engine: 'builtin', protocol: 'udp', udp: { packetSize: 1000, rate: { packetsPerSecond: 500 } }, duration: 6, repeat: 2, flows: [{ from: { agent: 'ss', interface: 'lo' }, to: { agent: 'sr', interface: 'lo' } }] });
  assert.equal(submitted.status, 202, JSON.stringify(submitted.body));
  const id = submitted.body.id as string;
  const stalled = await waitFor('a coordinator to take the job', () => coordinators.find((c) => lines(c).some((l) => l.jobId === id && l.msg === 'job started')), 30_000);
  const other = coordinators.find((c) => c !== stalled)!;
  const [first] = (await waitFor('the first run running', async () => {
    const { items } = (await client.call('listRuns', 'GET', `/v1/jobs/${id}/runs`)).body;
    return items.some((r: { status: string }) => r.status === 'running') ? items : null;
  }, 30_000)) as { id: string }[];
  await new Promise((resolve) => setTimeout(resolve, 2000));
  process.kill(stalled.pid, 'SIGSTOP');
  await new Promise((resolve) => setTimeout(resolve, STALL_MS)); // the stall itself
  const wokenAt = Date.now();
  process.kill(stalled.pid, 'SIGCONT');

  const { job } = await client.finish(id, 120_000);
  assert.equal(job.status, 'succeeded', JSON.stringify(job.error));
  // Woken, the stalled one saw it had lost the job (its lock): wait for it to say so, then look.
  await waitFor('the stalled coordinator to let the job go', () => lines(stalled).some((l) => (l.jobId === id || l.msg === 'job queue error') && /lost its hold|not kept/.test(l.msg) && l.time >= wokenAt - 1000), 30_000);
  const after = lines(stalled).filter((l) => l.time >= wokenAt - 1000);
  assert.deepEqual(after.filter((l) => l.msg === 'run started' || l.msg === 'job finished').map((l) => `${l.msg} ${l.runId ?? ''}`), [], 'the stalled coordinator started no run and finished no job once woken');
  assert.equal(lines(other).filter((l) => l.jobId === id && l.msg === 'job finished').length, 1, 'the other finished it, once');
  // The job's record, read again now that the stalled one has had its say: two runs, each once.
  const { body: final } = await client.job(id);
  assert.deepEqual(final.runs.map((r: { index: number; status: string }) => [r.index, r.status]), [[0, 'succeeded'], [1, 'succeeded']]);
  assert.deepEqual(final.runs[0].earlierAttempts.map((e: { id: string; error: { code: string } }) => [e.id, e.error.code]), [[first!.id, 'coordinator_lost']], 'the stalled attempt is recorded as lost, not as a result');
  const { body: history } = await client.call('listResults', 'GET', '/v1/results?limit=100');
  const mine = history.items.filter((s: { jobId: string }) => s.jobId === id);
  assert.deepEqual(mine.map((s: { runId: string }) => s.runId).sort(), final.runs.map((r: { id: string }) => r.id).sort(), 'the history has each run once');
  console.log(`coordinator stalled ${STALL_MS} ms: the other took the job over; the stalled one, woken, let it go (${after.filter((l) => /lost its hold|not kept/.test(l.msg)).length} notices) and started nothing`);
});
