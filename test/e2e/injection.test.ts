import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { Keys } from '@niclab/shared/stores/keys';
import { INJECTION } from '../helpers/injection.js';
import { startNiclab, type TestNiclab } from '../helpers/niclab.js';
import { childPids } from '../helpers/processes.js';

let niclab: TestNiclab;
let redis: Redis;
let queue: Queue;
let keys: Keys;

before(async () => {
  niclab = await startNiclab(['inj']);
  keys = new Keys(niclab.env.NICLAB_PREFIX!);
  redis = new Redis(niclab.redis.url, { maxRetriesPerRequest: null });
  queue = new Queue(keys.agentQueue('inj'), { connection: redis, prefix: keys.bull });
});
after(async () => {
  await queue?.close();
  redis?.disconnect();
  await niclab?.stop();
});

const params = { protocol: 'tcp', test: 'stream', duration: 1, bufferLength: 1024, streams: 1, noDelay: false, interval: 1 };
const sender = () => ({ jobId: randomUUID(), runId: randomUUID(), leg: 0, engine: 'builtin', params: { ...params }, interface: 'lo', deadline: Date.now() + 30_000, role: 'sender', peer: { address: '127.0.0.1', port: 9 }, startAt: Date.now() });

test('tasks that bypass the API with the injection corpus are refused by the agent itself; it starts no process', async () => {
  const tasks: Record<string, unknown>[] = [];
  for (const value of INJECTION) {
    tasks.push({ ...sender(), interface: value });
    tasks.push({ ...sender(), peer: { address: value, port: 5201 } });
    tasks.push({ ...sender(), engine: value });
    tasks.push({ ...sender(), params: { ...params, duration: value } });
    tasks.push({ ...sender(), params: { ...params, udp: { packetSize: value, rate: { packetsPerSecond: 1 } } } });
    // A plain name ('a' × 16) is a fine path, refused later for this agent's want of a file directory.
    if (!/^a+$/.test(value)) tasks.push({ ...sender(), params: { ...params, file: { source: value, ioMode: 'buffered', dropCache: false, probeSeconds: 1 } } });
  }
  tasks.push({ ...sender(), params: { ...params, extra: '--exec=id' } });
  tasks.push({ ...sender(), peer: { address: '127.0.0.1', port: 0 } });
  tasks.push({ ...sender(), peer: undefined });
  tasks.push({ ...sender(), params: { ...params, streams: 100000 } });

  // Watch the agent's children the whole time: a refused task must not start one. The agent's
  // own inventory (ethtool -i on this host's interfaces, each heartbeat) is not a task's: on a
  // loaded machine one fell in the window.
  const spawned = new Map<number, string[]>();
  const agentPid = niclab.agents[0]!.pid;
  const agentArgv = readFileSync(`/proc/${agentPid}/cmdline`, 'utf8');
  const watch = setInterval(() => {
    for (const pid of childPids(agentPid)) {
      if (spawned.has(pid)) continue;
      try {
        const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
        // Forked and not yet exec'd: it still shows the agent's own command line (CI at f60be8e
        // caught one under load). Read again next time, when it is what it runs, or gone.
        if (argv === agentArgv) continue;
        spawned.set(pid, argv.split('\0').filter(Boolean));
      } catch {
        // Gone before its command line was read: an engine would not be (they run for the task's seconds).
      }
    }
  }, 5);
  const inventory = (argv: string[]) => argv.length === 0 || argv.length === 3 && /(^|\/)ethtool$/.test(argv[0]!) && argv[1] === '-i' && existsSync(`/sys/class/net/${argv[2]}`);
  try {
    for (const task of tasks) await queue.add('sender', task, { removeOnComplete: true, removeOnFail: true });
    for (const task of tasks) {
      const reply = await redis.blpop(keys.runResults(task.runId as string), 15);
      assert.ok(reply, `no report for ${JSON.stringify(task).slice(0, 200)}`);
      const report = JSON.parse(reply[1]);
      assert.equal(report.error?.code, 'invalid_task', `${JSON.stringify(task).slice(0, 300)} -> ${JSON.stringify(report.error)}`);
      assert.deepEqual(report.diagnostics.command, []);
    }
  } finally {
    clearInterval(watch);
  }
  assert.deepEqual([...spawned.values()].filter((argv) => !inventory(argv)), [], 'the agent started no process for a task');

  // The control: a valid task (to a port nobody listens on) does start an engine process, and
  // the watch sees it, so the empty set above means something.
  const good = { ...sender(), peer: { address: '127.0.0.1', port: 1 } };
  const control = new Set<number>();
  const watchGood = setInterval(() => childPids(niclab.agents[0]!.pid).forEach((pid) => control.add(pid)), 5);
  try {
    await queue.add('sender', good, { removeOnComplete: true });
    const reply = await redis.blpop(keys.runResults(good.runId), 15);
    assert.ok(reply);
    const report = JSON.parse(reply[1]);
    assert.notEqual(report.error?.code, 'invalid_task');
    assert.ok(report.diagnostics.command.length > 0);
  } finally {
    clearInterval(watchGood);
  }
  assert.ok(control.size > 0, 'the valid task started an engine process');
});
