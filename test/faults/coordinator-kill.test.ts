import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Redis } from 'ioredis';
import { Keys } from '@niclab/shared/stores/keys';
import type { ApiClient } from '../helpers/api-client.js';
import { startFaultStack, type FaultStack } from '../helpers/fault-stack.js';
import { childPids, enginesOf, isAlive, spawnNiclab, waitFor, type NiclabProcess } from '../helpers/processes.js';
import type { TestRedis } from '../helpers/redis.js';

/** For process starts, late timers and Redis round trips on a loaded 2-core machine. */
const MARGIN_MS = 3000;
/**
 * README: the dead run's lease lapses 15 s after the coordinator's last renewal, and its ends,
 * which check every second, give it up once it has been gone 10 s: 26 s after the kill at most.
 */
const PROMISED_OLD_ENDS_GONE_MS = 15_000 + 10_000 + 1000;
const OLD_ENDS_GONE_WITHIN_MS = PROMISED_OLD_ENDS_GONE_MS + MARGIN_MS;
/**
 * README: the coordinator's hold on the job lapses after 15 s (long past when the next one
 * starts here) and any coordinator's stalled check, every 5 s, resumes the job. BullMQ moves a
 * job on the second check that finds it without its lock (the first, at start, marks it): 5 s
 * after the coordinator is up. Two checks' time, 10 s, leaves 5 s for the process to start.
 */
const PROMISED_RESUMED_MS = 2 * 5000;
const RESUMED_WITHIN_MS = PROMISED_RESUMED_MS + MARGIN_MS;
/** Long enough that the dead run's engines, left alone, would outlive both bounds. */
const DURATION_S = 40;

let stack: FaultStack;
let redis: TestRedis;
let env: Record<string, string>;
let client: ApiClient;
let processes: NiclabProcess[];

before(async () => {
  stack = await startFaultStack(['cs', 'cr']);
  ({ redis, env, client, processes } = stack);
});

after(async () => {
  await stack?.stop();
});

test('a coordinator SIGKILLed mid-run: the job is resumed by the next one, the dead run is made again and recorded, its engines end, nothing is left held', async () => {
  const [, sender, receiver] = processes as [NiclabProcess, NiclabProcess, NiclabProcess];
  const first = spawnNiclab(['coordinator'], env);
  processes.push(first);
  // Paced UDP, not TCP at full speed: what is tested is who holds the run, and two 40 s runs
  // flat out on loopback took a core and a half from the files beside this one.
  const submitted = await client.submit({
    engine: 'builtin', protocol: 'udp', udp: { packetSize: 1000, rate: { packetsPerSecond: 500 } }, duration: DURATION_S,
    flows: [{ from: { agent: 'cs', interface: 'lo' }, to: { agent: 'cr', interface: 'lo' } }],
  });
  assert.equal(submitted.status, 202, JSON.stringify(submitted.body));
  const id = submitted.body.id as string;
  const oldEngines = await enginesOf([sender.pid, receiver.pid], 20_000, () => client.explain(id, { cs: sender, cr: receiver }));
  const [lostRun] = (await client.call('listRuns', 'GET', `/v1/jobs/${id}/runs`)).body.items;
  assert.equal(lostRun.status, 'running');
  await new Promise((resolve) => setTimeout(resolve, 2000));
  const killedAt = Date.now();
  first.child.kill('SIGKILL');
  await first.exited;

  // Nobody else coordinates yet: the dead run's ends must stop on their own once its lease
  // lapses, rather than run to their deadline.
  await waitFor("the dead run's engines to end", () => oldEngines.every((pid) => !isAlive(pid)), OLD_ENDS_GONE_WITHIN_MS + 5000, 100);
  const oldGoneMs = Date.now() - killedAt;
  assert.ok(oldGoneMs <= OLD_ENDS_GONE_WITHIN_MS, `the dead run's engines ended ${oldGoneMs} ms after the kill; promised ${PROMISED_OLD_ENDS_GONE_MS} ms, bound ${OLD_ENDS_GONE_WITHIN_MS} ms with ${MARGIN_MS} ms margin for a loaded machine`);
  // Given up for its lease, not at the deadline (whichever end notices first ends the flow;
  // the other may see its peer go before it notices too).
  assert.ok([sender, receiver].some((agent) => /the run lost its interface lease/.test(agent.output())), 'an end gave the dead run up for its lease');

  // The next coordinator, as a supervisor would restart it.
  const restartedAt = Date.now();
  processes.push(spawnNiclab(['coordinator'], env));
  const resumed = await waitFor('the run to be made again', async () => {
    const [run] = (await client.call('listRuns', 'GET', `/v1/jobs/${id}/runs`)).body.items;
    return run && run.id !== lostRun.id ? run : null;
  }, RESUMED_WITHIN_MS + 5000, 100);
  const resumedMs = Date.now() - restartedAt;
  console.log(`coordinator SIGKILL: the dead run's engines gone ${oldGoneMs} ms after the kill (left alone they would have run ${DURATION_S} s); a coordinator started then resumed the job after ${resumedMs} ms`);
  assert.ok(resumedMs <= RESUMED_WITHIN_MS, `resumed ${resumedMs} ms after the next coordinator started; promised ${PROMISED_RESUMED_MS} ms (two 5 s stalled checks, the process start included), bound ${RESUMED_WITHIN_MS} ms with ${MARGIN_MS} ms margin for a loaded machine`);
  assert.equal(resumed.attempt, 2);
  assert.deepEqual(resumed.earlierAttempts.map((e: { id: string; error: { code: string } }) => [e.id, e.error.code]), [[lostRun.id, 'coordinator_lost']]);

  const { job } = await client.finish(id, (DURATION_S + 30) * 1000);
  assert.equal(job.status, 'succeeded', JSON.stringify(job.error));
  assert.deepEqual(job.progress, { runsDone: 1, runsTotal: 1 });
  const [run] = job.runs;
  assert.equal(run.id, resumed.id);
  assert.equal(run.status, 'succeeded');
  assert.ok(run.flows[0].bitsPerSecond > 0);

  // Nothing held, nothing running: no lease, no task, no engine.
  const keys = new Keys(env.NICLAB_PREFIX!);
  const connection = new Redis(redis.url);
  try {
    assert.deepEqual(await connection.keys(`${keys.prefix}:lease:*`), []);
  } finally {
    connection.disconnect();
  }
  await waitFor('no engine left', () => childPids(sender.pid).length === 0 && childPids(receiver.pid).length === 0, 10_000);
});
