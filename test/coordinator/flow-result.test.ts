import assert from 'node:assert/strict';
import { test } from 'node:test';
import { flowResult } from '@niclab/coordinator/flow-result';
import { TEST_KINDS } from '@niclab/shared/domain/test-kinds/index';
import type { EndReport, Leg } from '@niclab/shared/domain/task';

const flow = { from: { agent: 'A', interface: 'eth1' }, to: { agent: 'B', interface: 'eth1' } };
const leg: Leg = { flowIndex: 0, direction: 'forward', sender: flow.from, receiver: flow.to };
const end = (role: EndReport['role'], rest: Partial<EndReport>): EndReport => ({
  leg: 0, role, figures: null, intervals: [], nic: null, error: null, diagnostics: { agent: role === 'sender' ? 'A' : 'B', interface: 'eth1', address: '198.18.0.1', command: [] }, ...rest,
});
const delay = { min: 0.0001, mean: 0.0002, p50: 0.0002, p99: 0.0004, max: 0.001 };

test('UDP: sent = received + lost from the two ends, one-way delay only where both ends read one clock', () => {
  const sender = (bootId: string) => end('sender', { bootId, udp: { sent: 1000, targetPacketsPerSecond: 500, achievedPacketsPerSecond: 500 } });
  const receiver = end('receiver', { bootId: 'k1', udp: { received: 990, outOfOrder: 2, duplicates: 0, jitterSeconds: 0.00001, oneWayDelaySeconds: delay } });
  const shared = flowResult(TEST_KINDS.stream, flow, leg, sender('k1'), receiver).udp!;
  assert.deepEqual([shared.sent, shared.received, shared.lost, shared.lossRatio], [1000, 990, 10, 0.01]);
  assert.deepEqual(shared.oneWayDelaySeconds, delay);
  assert.equal(flowResult(TEST_KINDS.stream, flow, leg, sender('k2'), receiver).udp!.oneWayDelaySeconds, undefined, 'two kernels, two clocks: no delay');
});
