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

test("pathVerified: both named interfaces' counters hold at least what the receiver got, not what the sender wrote into its socket", () => {
  const nic = (txBytes: number, rxBytes: number) => ({ agent: 'A', interface: 'eth1', rxBytes, txBytes, rxPackets: 0, txPackets: 0, rxErrors: 0, txErrors: 0, rxDropped: 0, txDropped: 0 });
  const figures = (bytes: number) => ({ bytes, realSeconds: 2, cpuSeconds: 0.1, userCpuSeconds: 0.05, systemCpuSeconds: 0.05, calls: 1, realBitsPerSecond: bytes * 4, cpuBitsPerSecond: 0, realCallsPerSecond: 0, cpuCallsPerSecond: 0, serviceDemand: null });
  const verified = (sent: number, received: number, tx: number, rx: number) =>
    flowResult(TEST_KINDS.stream, flow, leg, end('sender', { figures: figures(sent), nic: nic(tx, 0) }), end('receiver', { figures: figures(received), nic: nic(0, rx) })).pathVerified;
  // iperf3 through a 20 Mbit/s tbf (test/lab/flows): it wrote 5,483,576 B; 4,805,912 B arrived, 4,899,102 B (with headers) left A's eth1.
  assert.equal(verified(5_483_576, 4_805_912, 4_899_102, 4_899_102), true);
  assert.equal(verified(1000, 1000, 999, 2000), false, "the sender's interface carried less than arrived: the bytes went another way");
  assert.equal(verified(1000, 1000, 2000, 999), false, "the receiver's interface took in less than arrived");
  assert.equal(verified(1000, 0, 1042, 0), false, 'sent, and nothing arrived (a UDP leg into a black hole): not proven');
  assert.equal(verified(0, 0, 0, 0), null, 'nothing sent, nothing arrived: nothing to verify');
});
