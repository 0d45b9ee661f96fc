import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { command } from '@niclab/shared/runtime/command';
import { namespaces } from '@niclab/cli/lab/lab';
import { flow, NOT_ROOT, startTestLab, type TestLab } from '../helpers/lab.js';
import { isAlive, spawnNiclab, waitFor } from '../helpers/processes.js';

/** One lab for both tests, in order: the second kills its agents and takes it down. */
describe('lab lifecycle', { skip: NOT_ROOT }, () => {
  let t: TestLab;
  before(async () => {
    t = await startTestLab(2, '100mbit');
  });
  after(async () => {
    await t?.close();
  });

  test('lab up refuses a bad rate, a bad name and a name already in use; another name can live beside it', async () => {
    const other = spawnNiclab(['lab', 'up', '--hosts', '2', '--rate', 'none', '--name', `${t.lab.name}b`, '--agent-prefix', 'o'], t.env);
    assert.equal(await other.exited, 0, other.output());
    assert.match(other.output(), new RegExp(`lab ${t.lab.name}b is up`));
    assert.ok((await namespaces()).includes(`${t.lab.name}b-B`) && (await namespaces()).includes(t.lab.hosts[0]!.namespace), 'both labs exist at once');
    await waitFor('agents of the second lab', async () => (await t.client.call('getAgent', 'GET', '/v1/agents/oB')).body.online);
    const down = spawnNiclab(['lab', 'down', '--name', `${t.lab.name}b`], t.env);
    assert.equal(await down.exited, 0, down.output());
    assert.ok(!(await namespaces()).some((ns) => ns.startsWith(`${t.lab.name}b-`)));
    assert.ok((await namespaces()).includes(t.lab.hosts[0]!.namespace), 'the first lab is untouched');

    for (const [args, message] of [
      [['--rate', 'fast'], /not a rate/],
      [['--rate', 'Z=1gbit'], /does not name one of the hosts/],
      [['--name', 'Bad;name'], /must be 1-10 lower-case/],
      [['--name', t.lab.name], /exists already/],
    ] as const) {
      const up = spawnNiclab(['lab', 'up', '--hosts', '1', ...args], t.env);
      assert.equal(await up.exited, 2, up.output());
      assert.match(up.output(), message);
    }
  });

  test('SIGKILL every agent mid-run, then `niclab lab down` leaves no namespace, link or process', async () => {
    const hostNamespaces = [t.lab.switchNamespace, ...t.lab.hosts.map((h) => h.namespace)];
    const submitted = await t.client.submit({ engine: 'builtin', duration: 60, flows: [flow('A', 'B')] });
    assert.equal(submitted.status, 202);
    // Running: the agents and their engine processes live in the lab's namespaces.
    const pids = await waitFor('engine processes in the lab', async () => {
      const all = (await Promise.all(hostNamespaces.map((ns) => command('ip', ['netns', 'pids', ns])))).join('\n').split('\n').filter(Boolean).map(Number);
      return all.length >= 4 ? all : null; // two agents and two engine ends
    }, 15_000);
    for (const host of t.lab.hosts) process.kill(host.agentPid!, 'SIGKILL');

    const status = spawnNiclab(['lab', 'status', '--name', t.lab.name], t.env);
    assert.equal(await status.exited, 1, 'status reports the dead agents');
    assert.match(status.output(), /not running/);
    const json = spawnNiclab(['lab', 'status', '--name', t.lab.name, '--json'], t.env);
    assert.equal(await json.exited, 1);
    const state = JSON.parse(json.output()) as { healthy: boolean; hosts: { name: string; agentRunning: boolean; namespacePresent: boolean }[] };
    assert.deepEqual([state.healthy, state.hosts.map((h) => [h.name, h.agentRunning, h.namespacePresent])], [false, t.lab.hosts.map((h) => [h.name, false, true])]);

    const down = spawnNiclab(['lab', 'down', '--name', t.lab.name], t.env);
    assert.equal(await down.exited, 0, down.output());
    assert.match(down.output(), /is down/);
    const left = (await namespaces()).filter((ns) => hostNamespaces.includes(ns));
    assert.deepEqual(left, [], 'no namespace left');
    await waitFor('every lab process to be gone', () => pids.every((pid) => !isAlive(pid)), 3000);
    const links = await command('ip', ['-o', 'link']);
    for (const host of t.lab.hosts) assert.doesNotMatch(links, new RegExp(`\\bp${host.name}@`), 'no veth end left in the root namespace');

    const again = spawnNiclab(['lab', 'down', '--name', t.lab.name], t.env);
    assert.equal(await again.exited, 0);
    assert.match(again.output(), /nothing to remove/);
  });

});
