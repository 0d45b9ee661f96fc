import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { FlowResult, JobSpec, Run } from '@niclab/shared/domain/contract';
import { endFigures } from '@niclab/shared/domain/figures';
import { RUN_METRICS } from '@niclab/shared/domain/figure-directions';

/** Figures that are arithmetic of others, each checked on a case worked by hand. */

test("nttcp's derived columns and netperf's service demand from the measured ones, worked by hand; a zero divisor gives 0", () => {
  // 125,000,000 bytes in 10 s of real time and 2 s of CPU (0.5 user, 1.5 system), 1000 calls.
  assert.deepEqual(endFigures(125_000_000, 10, { user: 0.5, system: 1.5 }, 1000), {
    bytes: 125_000_000, realSeconds: 10, cpuSeconds: 2, userCpuSeconds: 0.5, systemCpuSeconds: 1.5, calls: 1000,
    realBitsPerSecond: 100_000_000, cpuBitsPerSecond: 500_000_000, realCallsPerSecond: 100, cpuCallsPerSecond: 500,
    // 125,000,000 B is 122,070.3125 KB: 2e6 µs over it is 16.384 µs/KB, 0.5e6 is 4.096, 1.5e6 is 12.288.
    serviceDemand: { microsecondsPerKilobyte: 16.384, userMicrosecondsPerKilobyte: 4.096, systemMicrosecondsPerKilobyte: 12.288 },
  });
  assert.deepEqual(endFigures(0, 0, { user: 0, system: 0 }, null), {
    bytes: 0, realSeconds: 0, cpuSeconds: 0, userCpuSeconds: 0, systemCpuSeconds: 0, calls: null,
    realBitsPerSecond: 0, cpuBitsPerSecond: 0, realCallsPerSecond: null, cpuCallsPerSecond: null, serviceDemand: null,
  });
});

test('CPU seconds per gigabit: both ends of every stream flow over the bits the receivers got, worked by hand', () => {
  const spec = { test: 'stream', flows: [{}, {}] } as unknown as JobSpec;
  const flow = (flowIndex: number, receivedBytes: number, senderCpu: number, receiverCpu: number) => ({
    flowIndex, sender: endFigures(receivedBytes, 1, { user: 0, system: senderCpu }, 1), receiver: endFigures(receivedBytes, 1, { user: receiverCpu, system: 0 }, 1),
  }) as unknown as FlowResult;
  // 0.5 Gbit (62.5 MB) with 0.2 + 0.3 s, and 1.5 Gbit (187.5 MB) with 0.4 + 0.6 s: 1.5 s over 2 Gbit.
  const run = { status: 'succeeded', flows: [flow(0, 62_500_000, 0.2, 0.3), flow(1, 187_500_000, 0.4, 0.6)] } as unknown as Run;
  assert.ok(Math.abs(RUN_METRICS.cpuSecondsPerGigabit.value(spec, run)! - 0.75) < 1e-12);
  // No byte delivered: no figure, not Infinity.
  assert.equal(RUN_METRICS.cpuSecondsPerGigabit.value(spec, { status: 'succeeded', flows: [flow(0, 0, 0.2, 0.3)] } as unknown as Run), null);
});
