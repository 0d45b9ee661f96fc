import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startNiclab, type TestNiclab } from '../helpers/niclab.js';
import { childPids, isAlive, waitFor } from '../helpers/processes.js';

let niclab: TestNiclab;
before(async () => {
  niclab = await startNiclab(['ts', 'tr']);
});
after(async () => {
  await niclab?.stop();
});

test('SIGTERM to an agent mid-run: it cancels its run, ends its engines and deregisters within 10 s; the run fails at once', async () => {
  const receiver = niclab.agents[1]!;
  const submitted = await niclab.client.submit({ engine: 'builtin', duration: 60, flows: [{ from: { agent: 'ts', interface: 'lo' }, to: { agent: 'tr', interface: 'lo' } }] });
  assert.equal(submitted.status, 202);
  const engines = await waitFor('both engines to run', () => {
    const pids = childPids(receiver.pid);
    return pids.length > 0 && childPids(niclab.agents[0]!.pid).length > 0 ? pids : null;
  }, 20_000, 50);
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const t0 = Date.now();
  receiver.child.kill('SIGTERM');
  assert.equal(await receiver.exited, 0);
  const exitMs = Date.now() - t0;
  assert.ok(exitMs < 10_000, `exited after ${exitMs} ms`);
  assert.ok(engines.every((pid) => !isAlive(pid)), 'its engine processes ended with it');
  assert.match(receiver.output(), /"msg":"agent stopped"/);
  // Deregistered: offline at once, not after three missed heartbeats.
  assert.equal((await niclab.client.call('getAgent', 'GET', '/v1/agents/tr')).body.online, false);
  const { job } = await niclab.client.finish(submitted.body.id, 15_000);
  const failedMs = Date.now() - t0;
  const [run] = (await niclab.client.call('listRuns', 'GET', `/v1/jobs/${job.id}/runs`)).body.items;
  console.log(`SIGTERM: agent exited after ${exitMs} ms, run ${run.status} (${run.error?.code}) after ${failedMs} ms`);
  assert.equal(run.status, 'failed');
  assert.ok(['agent_lost', 'agent_shutdown'].includes(run.error.code), run.error.code);
  assert.ok(failedMs < 15_000);
  await waitFor('the sender engine to end too', () => childPids(niclab.agents[0]!.pid).length === 0, 10_000);
});
