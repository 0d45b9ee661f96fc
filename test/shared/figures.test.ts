import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { FlowResult, JobSpec, Run } from '@niclab/shared/domain/contract';
import { endFigures } from '@niclab/shared/domain/figures';
import { RUN_METRICS } from '@niclab/shared/domain/figure-directions';

/** Figures that are arithmetic of others, each checked on a case worked by hand. */

test("nttcp's derived columns from its four measured ones, worked by hand; a zero divisor gives 0", () => {
  // 125,000,000 bytes in 10 s of real time and 2 s of CPU, 1000 calls.
  assert.deepEqual(endFigures(125_000_000, 10, 2, 1000), {
    bytes: 125_000_000, realSeconds: 10, cpuSeconds: 2, calls: 1000,
    realBitsPerSecond: 100_000_000, cpuBitsPerSecond: 500_000_000, realCallsPerSecond: 100, cpuCallsPerSecond: 500,
  });
  assert.deepEqual(endFigures(0, 0, 0, null), { bytes: 0, realSeconds: 0, cpuSeconds: 0, calls: null, realBitsPerSecond: 0, cpuBitsPerSecond: 0, realCallsPerSecond: null, cpuCallsPerSecond: null });
});

test('CPU seconds per gigabit: both ends of every stream flow over the bits the receivers got, worked by hand', () => {
  const spec = { test: 'stream', flows: [{}, {}] } as unknown as JobSpec;
  const flow = (flowIndex: number, receivedBytes: number, senderCpu: number, receiverCpu: number) => ({
    flowIndex, sender: endFigures(receivedBytes, 1, senderCpu, 1), receiver: endFigures(receivedBytes, 1, receiverCpu, 1),
  }) as unknown as FlowResult;
  // 0.5 Gbit (62.5 MB) with 0.2 + 0.3 s, and 1.5 Gbit (187.5 MB) with 0.4 + 0.6 s: 1.5 s over 2 Gbit.
  const run = { status: 'succeeded', flows: [flow(0, 62_500_000, 0.2, 0.3), flow(1, 187_500_000, 0.4, 0.6)] } as unknown as Run;
  assert.ok(Math.abs(RUN_METRICS.cpuSecondsPerGigabit.value(spec, run)! - 0.75) < 1e-12);
  // No byte delivered: no figure, not Infinity.
  assert.equal(RUN_METRICS.cpuSecondsPerGigabit.value(spec, { status: 'succeeded', flows: [flow(0, 0, 0.2, 0.3)] } as unknown as Run), null);
});
