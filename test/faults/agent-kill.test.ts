import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { Keys } from '@niclab/shared/keys';
import { startNiclab, type TestNiclab } from '../helpers/niclab.js';
import { childPids, enginesOf, isAlive, waitFor } from '../helpers/processes.js';

/** The bound the issue states for noticing a dead agent; with 1 s heartbeats it takes ~3-4 s. */
const LOST_WITHIN_MS = 60_000;

for (const engine of ['builtin', 'iperf3'] as const) {
  describe(`SIGKILL of an agent mid-run (${engine})`, () => {
    let niclab: TestNiclab;
    let redis: Redis;
    before(async () => {
      niclab = await startNiclab(['ks', 'kr']);
      redis = new Redis(niclab.redis.url);
    });
    after(async () => {
      redis?.disconnect();
      await niclab?.stop();
    });

    test('the run fails agent_lost within the bound, leases are freed, no engine survives on either end, the retry is made exactly once', async () => {
      const [sender, receiver] = niclab.agents as [typeof niclab.agents[0], typeof niclab.agents[0]];
      const submitted = await niclab.client.submit({ engine, duration: 60, retries: 1, flows: [{ from: { agent: 'ks', interface: 'lo' }, to: { agent: 'kr', interface: 'lo' } }] });
      assert.equal(submitted.status, 202, JSON.stringify(submitted.body));
      const id = submitted.body.id as string;
      // Both ends' engines are running once each agent has a child process.
      const engines = await enginesOf([sender.pid, receiver.pid]);
      await new Promise((resolve) => setTimeout(resolve, 1000));
      const killedAt = Date.now();
      receiver.child.kill('SIGKILL');

      const lost = await waitFor('the run to fail', async () => {
        const runs = (await niclab.client.call('listRuns', 'GET', `/v1/jobs/${id}/runs`)).body.items;
        return runs[0]?.attempt === 2 || runs[0]?.status === 'failed' ? runs[0] : null;
      }, LOST_WITHIN_MS + 5000, 100);
      const noticedMs = Date.now() - killedAt;
      const { job } = await niclab.client.finish(id, 30_000);
      console.log(`${engine}: agent_lost after ${noticedMs} ms; job ${job.status}`);
      assert.ok(noticedMs <= LOST_WITHIN_MS, `noticed after ${noticedMs} ms`);

      // One retry, which found the receiver's agent offline, then the job ended: not two.
      const [run] = (await niclab.client.call('listRuns', 'GET', `/v1/jobs/${id}/runs`)).body.items;
      assert.equal(job.status, 'failed');
      assert.equal(run.attempt, 2, JSON.stringify(run));
      assert.equal(run.earlierAttempts.length, 1);
      assert.equal(run.earlierAttempts[0].error.code, 'agent_lost');
      assert.match(run.earlierAttempts[0].error.message, /agent kr/);
      assert.equal(run.error.code, 'agent_offline');
      assert.ok(lost);

      // Leases are released, and every engine process of both ends is gone.
      const keys = new Keys(niclab.env.NICLAB_PREFIX!);
      assert.deepEqual(await redis.keys(`${keys.prefix}:lease:*`), []);
      await waitFor('every engine process to end', () => engines.every((pid) => !isAlive(pid)), 10_000);
      assert.deepEqual(childPids(sender.pid), []);
    });
  });
}
