import assert from 'node:assert/strict';
import { isDeepStrictEqual } from 'node:util';
import { after, before, describe, test } from 'node:test';
import { startAgent } from '@niclab/cli/lab/lab';
import { command } from '@niclab/shared/runtime/command';
import { flow, NOT_ROOT, startTestLab, type TestLab } from '../helpers/lab.js';
import { isAlive, waitFor } from '../helpers/processes.js';

interface HostSettings {
  mtu: number;
  txqueuelen: number;
  tcpRmem: string;
  gro: string;
}

/** What the kernel of a lab host says, read from outside the agent. */
async function settings(namespace: string): Promise<HostSettings> {
  const [link] = JSON.parse(await command('ip', ['-n', namespace, '-j', 'link', 'show', 'eth1'])) as { mtu: number; txqlen: number }[];
  const tcpRmem = (await command('ip', ['netns', 'exec', namespace, 'cat', '/proc/sys/net/ipv4/tcp_rmem'])).trim().replace(/\s+/g, ' ');
  const gro = /generic-receive-offload: (on|off)/.exec(await command('ip', ['netns', 'exec', namespace, 'ethtool', '-k', 'eth1']))![1]!;
  return { mtu: link!.mtu, txqueuelen: link!.txqlen, tcpRmem, gro };
}

const TUNING = { mtu: 9000, txqueuelen: 5000, sysctl: { 'net.ipv4.tcp_rmem': '4096 65536 4194304' }, ethtool: { gro: false } };

/** One unshaped lab of two hosts for every test, in order: the last one kills agent A and starts it again. */
describe('tuning, always undone', { skip: NOT_ROOT }, () => {
  let t: TestLab;
  before(async () => {
    t = await startTestLab(2, 'none');
  });
  after(async () => {
    await t?.close();
  });

  test('MTU 9000, txqueuelen, a sysctl and an offload are in force during each run and in its result, and restored after it', async () => {
    const [a, b] = t.lab.hosts.map((h) => h.namespace) as [string, string];
    const before = await settings(a);
    assert.equal(before.mtu, 1500);
    assert.notEqual(before.tcpRmem, TUNING.sysctl['net.ipv4.tcp_rmem']);
    assert.deepEqual(await settings(b), before);

    // Two runs in a row: the second tunes what the first restored, never the first's values.
    const submitted = await t.client.submit({ engine: 'builtin', duration: 2, repeat: 2, tuning: TUNING, flows: [flow('A', 'B')] });
    assert.equal(submitted.status, 202, JSON.stringify(submitted.body));
    // The agent applies one setting after another (MTU first, then waits for the link), so
    // wait for the whole set rather than asserting on the first sign of it.
    const tuned: HostSettings = { mtu: 9000, txqueuelen: 5000, tcpRmem: '4096 65536 4194304', gro: 'off' };
    let seen: HostSettings[] = [];
    await waitFor('the whole tuning to be in force on both hosts', async () => {
      seen = await Promise.all([settings(a), settings(b)]);
      return seen.every((host) => isDeepStrictEqual(host, tuned));
    }, 15_000, 50).catch((error: Error) => assert.fail(`${error.message}; last seen ${JSON.stringify(seen)}`));

    const { job } = await t.client.finish(submitted.body.id, 30_000);
    assert.equal(job.status, 'succeeded', JSON.stringify(job.runs?.map((r: { error: unknown }) => r.error)));
    assert.equal(job.runs.length, 2);
    for (const run of job.runs) {
      const [result] = run.flows;
      for (const end of ['sender', 'receiver'] as const) {
        assert.deepEqual(result.diagnostics[end].tuning, { mtu: 9000, txqueuelen: 5000, sysctl: { 'net.ipv4.tcp_rmem': '4096 65536 4194304' }, ethtool: { gro: 'off' } });
        assert.equal(result.diagnostics[end].environment.mtu, 9000);
      }
      assert.equal(result.pathVerified, true);
    }
    // Back as they were on both hosts once the run is over.
    assert.deepEqual(await settings(a), before);
    assert.deepEqual(await settings(b), before);
  });

  test('a run with tuned sysctls has its hosts to itself: a job on another interface of the same host waits for it and never overlaps', async () => {
    const tuned = await t.client.submit({ engine: 'builtin', duration: 2, repeat: 2, tuning: { sysctl: TUNING.sysctl }, flows: [flow('A', 'B')] });
    assert.equal(tuned.status, 202, JSON.stringify(tuned.body));
    await waitFor('the tuned job to run', async () => (await t.client.job(tuned.body.id)).body.status === 'running', 15_000, 50);
    // A's loopback is not an interface the tuned job names, but the sysctl it changed is A's.
    const other = await t.client.submit({ engine: 'builtin', duration: 1, flows: [{ from: { agent: 'A', interface: 'lo' }, to: { agent: 'A', interface: 'lo' } }] });
    assert.equal(other.status, 202, JSON.stringify(other.body));
    const waiting = await waitFor('the other job to wait for host A', async () => (await t.client.job(other.body.id)).body.waitingFor, 10_000, 50);
    assert.match(waiting[0], /^A:/);

    const [{ job: a }, { job: b }] = await Promise.all([t.client.finish(tuned.body.id, 60_000), t.client.finish(other.body.id, 60_000)]);
    assert.equal(a.status, 'succeeded');
    assert.equal(b.status, 'succeeded');
    const window = (run: { startedAt: string; finishedAt: string }) => [Date.parse(run.startedAt), Date.parse(run.finishedAt)] as const;
    for (const run of a.runs) {
      const [start, end] = window(run);
      const [otherStart, otherEnd] = window(b.runs[0]);
      assert.ok(otherEnd <= start || otherStart >= end, `the other run (${b.runs[0].startedAt}..${b.runs[0].finishedAt}) overlapped a tuned one (${run.startedAt}..${run.finishedAt})`);
    }
  });

  test('a qdisc setup niclab could not put back exactly (a root htb) is refused before anything changes: the run fails with tuning_failed saying why', async () => {
    const [a, b] = t.lab.hosts.map((h) => h.namespace) as [string, string];
    try {
      await command('tc', ['-n', a, 'qdisc', 'replace', 'dev', 'eth1', 'root', 'handle', '1:', 'htb', 'default', '10']);
      // htb prints a packet counter among its options (direct_packets_stat): the setup is the rest.
      const qdiscs = async (ns: string) => (JSON.parse(await command('tc', ['-n', ns, '-j', 'qdisc', 'show', 'dev', 'eth1', 'invisible'])) as { options?: Record<string, unknown> }[]).map((q) => ({ ...q, options: { ...q.options, direct_packets_stat: undefined } }));
      const [beforeA, beforeB] = [await qdiscs(a), await qdiscs(b)];
      const submitted = await t.client.submit({ engine: 'builtin', duration: 1, tuning: { qdisc: { kind: 'pfifo', limit: 100 } }, flows: [flow('A', 'B')] });
      assert.equal(submitted.status, 202, JSON.stringify(submitted.body));
      const { job } = await t.client.finish(submitted.body.id, 30_000);
      assert.equal(job.status, 'failed');
      assert.equal(job.runs[0].error.code, 'tuning_failed');
      assert.match(job.runs[0].error.message, /root qdisc is htb 1:, which niclab could not put back exactly/);
      assert.deepEqual(await qdiscs(a), beforeA);
      // B could tune (its root is the kernel's noqueue) and put it back when the run failed.
      assert.deepEqual(await qdiscs(b), beforeB);
    } finally {
      // A's root back to the kernel's own (noqueue on a veth) for the tests after this one.
      await command('tc', ['-n', a, 'qdisc', 'del', 'dev', 'eth1', 'root']).catch(() => undefined);
    }
  });

  test('an agent SIGKILLed mid-run restores the tuning when it starts again, before it takes work', async () => {
    const [hostA] = t.lab.hosts;
    const [a, b] = t.lab.hosts.map((h) => h.namespace) as [string, string];
    const before = await settings(a);
    const submitted = await t.client.submit({ engine: 'builtin', duration: 60, tuning: TUNING, flows: [flow('A', 'B')] });
    assert.equal(submitted.status, 202);
    await waitFor('MTU 9000 on A', async () => (await settings(a)).mtu === 9000, 15_000, 50);
    await new Promise((resolve) => setTimeout(resolve, 500));
    process.kill(hostA!.agentPid!, 'SIGKILL');
    await waitFor('agent A to be dead', () => !isAlive(hostA!.agentPid!), 5000);
    // Nobody restored A: the kernel keeps what the dead agent set.
    assert.equal((await settings(a)).mtu, 9000);
    // B's end of the run ended with it (agent_lost) and B put its settings back. Soon after,
    // not before the job's end: the coordinator ends the run on A's lost heartbeats and
    // publishes the cancel then, and B restores on it (a fresh-clone run read B still tuned the
    // moment the job had finished). The coordinator does not wait for B's report first.
    const { job } = await t.client.finish(submitted.body.id, 30_000);
    assert.equal(job.runs[0].error.code, 'agent_lost');
    let seenB = await settings(b);
    await waitFor("B's settings put back", async () => isDeepStrictEqual((seenB = await settings(b)), before), 10_000, 50)
      .catch((error: Error) => assert.fail(`${error.message}; B last seen ${JSON.stringify(seenB)}, before ${JSON.stringify(before)}`));

    const pid = startAgent(hostA!, { name: t.lab.name, hosts: 2, rate: 'none', redisUrl: t.redis.url, prefix: t.env.NICLAB_PREFIX!, dataDir: t.dataDir, heartbeatSeconds: 1, logLevel: 'info' });
    hostA!.agentPid = pid; // so the lab's teardown stops this one
    await waitFor('agent A online again', async () => (await t.client.call('getAgent', 'GET', '/v1/agents/A')).body.online, 20_000);
    // It restored before it registered (and so before it could take work).
    assert.deepEqual(await settings(a), before);
  });
});
