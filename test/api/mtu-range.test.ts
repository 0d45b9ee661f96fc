/**
 * An MTU the interface refuses is a 422 naming the field (issue 30, part 3): each agent reports
 * its interfaces' MTU range as the kernel has it (min_mtu, max_mtu), and a job that would set an
 * MTU outside it, job-wide, in one end's block or in a sweep, is refused at submission.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import request from 'supertest';
import { AgentService } from '@niclab/agent/agent';
import { readInterfaces } from '@niclab/agent/interfaces';
import type { AgentInterface } from '@niclab/shared/domain/contract';
import { command } from '@niclab/shared/runtime/command';
import { assertResponse } from '../helpers/contract.js';
import { waitFor } from '../helpers/processes.js';
import { silentLog, stackPerFile, type Stack } from '../helpers/stack.js';

let stack: Stack;
stackPerFile({}, (s) => (stack = s));

test("each interface's MTU range is the kernel's, as `ip -d -j link` prints it; none where the driver sets no limit (lo)", async () => {
  const links = JSON.parse(await command('ip', ['-d', '-j', 'link', 'show'])) as { ifname: string; min_mtu: number; max_mtu: number }[];
  const reported = await readInterfaces();
  assert.ok(reported.length > 0);
  for (const iface of reported) {
    const link = links.find((l) => l.ifname === iface.name)!;
    assert.deepEqual(iface.mtuRange, link.max_mtu > 0 ? { min: link.min_mtu, max: link.max_mtu } : null, iface.name);
  }
  assert.equal(reported.find((i) => i.name === 'lo')?.mtuRange, null, 'lo: max_mtu 0, no limit');
});

test('an MTU outside what the interface takes is a 422 naming the field: job-wide, in an end\'s block, in a sweep; inside it, or where the range is not known, accepted', async () => {
  // A NIC as a 10 GbE driver reports it (ixgbe: 68 to 9710) on an agent of its own, beside this
  // host's lo (no range). Its flows are refused or accepted only: no coordinator runs them.
  const nic: AgentInterface = { name: 'ens1f0', mac: '02:00:00:00:00:02', mtu: 1500, mtuRange: { min: 68, max: 9710 }, speedBitsPerSecond: 10e9, operstate: 'up', driver: 'ixgbe', addresses: [{ family: 'IPv4', address: '198.18.0.2', prefixLength: 32 }] };
  // And one whose driver's smallest MTU is IPv6's minimum (a synthetic range: veth's is 68-65535).
  const v6: AgentInterface = { ...nic, name: 'ens1f1', mac: '02:00:00:00:00:03', mtuRange: { min: 1280, max: 9000 }, addresses: [{ family: 'IPv4', address: '198.18.0.3', prefixLength: 32 }] };
  const lo: AgentInterface = { name: 'lo', mac: null, mtu: 65536, mtuRange: null, speedBitsPerSecond: null, operstate: 'unknown', driver: null, addresses: [{ family: 'IPv4', address: '127.0.0.1', prefixLength: 8 }] };
  const agent = new AgentService({ ...stack.config, agentId: 'ranged' }, silentLog, { hostname: () => 'ranged', readInterfaces: async () => [nic, v6, lo] });
  await agent.start();
  try {
    await waitFor('the agent registered', async () => (await request(stack.app).get('/v1/agents/ranged')).status === 200, 10_000);
    const listed = await request(stack.app).get('/v1/agents/ranged');
    assertResponse('getAgent', listed);
    assert.deepEqual(listed.body.interfaces.find((i: { name: string }) => i.name === 'ens1f0').mtuRange, { min: 68, max: 9710 });

    const end = (name: string) => ({ agent: 'ranged', interface: name });
    const spec = (extra: Record<string, unknown>, to = 'ens1f0', from = 'ens1f0') => ({ engine: 'builtin', protocol: 'tcp', duration: 1, flows: [{ from: end(from), to: end(to) }], ...extra });
    const cases: [string, unknown, number, string?, RegExp?][] = [
      ['job-wide, at the driver\'s largest', spec({ tuning: { mtu: 9710 } }), 202],
      ['job-wide, one over it', spec({ tuning: { mtu: 9711 } }), 422, 'body.tuning.mtu', /^ranged:ens1f0 takes an MTU of 68 to 9710 \(its driver's min_mtu and max_mtu\), not 9711$/],
      ['the receiver\'s block, lo sending', spec({ tuning: { receiver: { mtu: 16000 } } }, 'ens1f0', 'lo'), 422, 'body.tuning.receiver.mtu', /^ranged:ens1f0 takes an MTU of 68 to 9710 .*, not 16000$/],
      ['the sender\'s block on lo, whose range is not known: left to the run', spec({ tuning: { sender: { mtu: 16000 } } }, 'ens1f0', 'lo'), 202],
      ['job-wide, under the smallest a driver takes', spec({ tuning: { mtu: 576 } }, 'ens1f1', 'ens1f1'), 422, 'body.tuning.mtu', /^ranged:ens1f1 takes an MTU of 1280 to 9000 .*, not 576$/],
      ['a sweep, its third point', spec({ sweep: { mtu: [1500, 9000, 16000] } }), 422, 'body.sweep.mtu[2]', /not 16000$/],
      // A factorial's cells that leave the receiver untuned give it the shorthand's MTU: that is the field at fault, not the receiver's block (9000 is within its range).
      ['a factorial, the shorthand out of range and the receiver\'s own MTU in it', spec({ tuning: { mtu: 16000, sender: { txqueuelen: 2000 }, receiver: { mtu: 9000 } }, factorial: {}, repeat: 2 }, 'ens1f0', 'lo'), 422, 'body.tuning.mtu', /not 16000$/],
    ];
    for (const [name, body, status, field, message] of cases) {
      const res = await request(stack.app).post('/v1/jobs').set('content-type', 'application/json').send(JSON.stringify(body));
      assertResponse('createJob', res);
      assert.equal(res.status, status, `${name}: ${JSON.stringify(res.body)}`);
      if (status !== 422) continue;
      assert.equal(res.type, 'application/problem+json');
      assert.deepEqual(res.body.errors.map((e: { field: string }) => e.field), [field], name);
      assert.match(res.body.errors[0].message, message!, name);
    }
  } finally {
    await agent.stop();
  }
});
