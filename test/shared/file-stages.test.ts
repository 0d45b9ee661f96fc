import assert from 'node:assert/strict';
import { test } from 'node:test';
import { diskLimit, judgeBottleneck } from '@niclab/shared/domain/attribution';
import { fileStages, stageLines } from '@niclab/shared/domain/file-io/stages';
import type { FileStages, HostCounters, JobSpec } from '@niclab/shared/domain/contract';
import type { components } from '@niclab/shared/generated/openapi';

/**
 * Disk against memory, worked by hand: the flow verdict a file leg's disks give (the transfer at
 * least 80% of its slower disk alone) and the report's stages (the slowest of source disk,
 * network and sink disk; the transfer over memory to memory).
 */
type Report = components['schemas']['Report'];
type Summary = NonNullable<Report['points'][number]['flows'][number]['bitsPerSecond']>;
const M = 1e6;
const disk = (mbit: number) => ({ bytes: mbit * 125_000, seconds: 1, bitsPerSecond: mbit * M });
const file = (source: number | null, sink: number | null, ioMode: 'buffered' | 'dsync' = 'dsync'): FileStages => ({
  ioMode,
  source: source === null ? null : { path: 'a.bin', sizeBytes: 1e9, endedAtEof: false, cacheDropped: true, disk: disk(source) },
  sink: sink === null ? null : { writtenBytes: 1, removed: true, disk: disk(sink) },
});

test('a file leg is disk-limited when it moved at least 80% of what its slower disk did alone; otherwise something else set its rate', () => {
  assert.equal(diskLimit({ file: file(158, 42), bitsPerSecond: 42 * M })?.stage, 'sink disk');
  assert.equal(diskLimit({ file: file(158, 42), bitsPerSecond: 34 * M })?.stage, 'sink disk', '0.81 of the sink disk');
  assert.equal(diskLimit({ file: file(158, 42), bitsPerSecond: 33 * M }), null, '0.79 of the sink disk: not its limit');
  assert.equal(diskLimit({ file: file(20, 100), bitsPerSecond: 19 * M })?.stage, 'source disk');
  assert.equal(diskLimit({ file: file(null, 4000, 'buffered'), bitsPerSecond: 940 * M }), null, 'a fast cache under a 1 Gbit/s link');
  assert.equal(diskLimit({ file: file(null, null), bitsPerSecond: 42 * M }), null, 'no disk measured');
  const limit = diskLimit({ file: file(158, 42), bitsPerSecond: 42 * M })!;
  assert.deepEqual(limit.evidence, { transferBitsPerSecond: 42 * M, diskShare: 1, sourceDiskBitsPerSecond: 158 * M, sinkDiskBitsPerSecond: 42 * M });
  assert.equal(limit.reason, "the file moved at 42.0 Mbit/s, 100% of what the sink's disk wrote alone (dsync) (42.0 Mbit/s); the source disk did 158 Mbit/s");
});

test('the disk verdict comes before the receiver window that a slow sink shuts', () => {
  const host = { interfaceStatistics: {}, ethtool: null, nicDrops: { rx: 0, tx: 0 }, qdiscs: [], softnet: { dropped: 0, timeSqueeze: 0, perCpu: [] }, udp: {}, tcpExt: {}, cpu: { samples: 5, perCpu: [], busiest: null, engineCore: null, engineCoreBusy: null, engineWaitShare: null }, overlapped: false } as unknown as HostCounters;
  const figures = { bytes: 1, realSeconds: 2, cpuSeconds: 0.02, userCpuSeconds: 0, systemCpuSeconds: 0.02, calls: 1, realBitsPerSecond: 1, cpuBitsPerSecond: 1, realCallsPerSecond: 1, cpuCallsPerSecond: 1, serviceDemand: null };
  const diagnostics = { agent: 'A', interface: 'eth1', address: '198.18.0.1', command: [], host };
  const leg = {
    udp: null, bitsPerSecond: 42 * M, retransmits: 0,
    sender: { figures, diagnostics: { ...diagnostics, tcpTimes: { connections: 1, busySeconds: 2, receiveWindowLimitedSeconds: 1.8, sendBufferLimitedSeconds: 0 } } },
    receiver: { figures, diagnostics },
  };
  assert.equal(judgeBottleneck(leg)?.verdict, 'receiver socket buffer', 'without its disks, the shut window names the receiver');
  assert.equal(judgeBottleneck({ ...leg, file: file(158, 42) })?.verdict, 'sink disk');
});

const summary = (mbit: number): Summary => ({ n: 2, mean: mbit * M, standardDeviation: 0, min: mbit * M, max: mbit * M, confidenceInterval: [mbit * M, mbit * M], intervalMethod: 't', coefficientOfVariation: 0 });
const A = { agent: 'A', interface: 'eth1' };
const B = { agent: 'B', interface: 'eth1' };
function point(io: 'memory' | 'file', rate: number, source: number | null, sink: number | null): Report['points'][number] {
  const leg = {
    flowIndex: 0, direction: 'forward' as const, test: 'stream' as const, from: A, to: B, bitsPerSecond: summary(rate), retransmits: null, udpLossRatio: null, jitterSeconds: null, transactionsPerSecond: null,
    rttP50Seconds: null, rttP99Seconds: null, idleRttP50Seconds: null, idleRttP99Seconds: null, senderCpuSeconds: null, receiverCpuSeconds: null, senderServiceDemand: null, receiverServiceDemand: null,
    sourceDiskBitsPerSecond: source === null ? null : summary(source), sinkDiskBitsPerSecond: sink === null ? null : summary(sink),
  };
  return { point: { io }, runs: { succeeded: 2, failed: 0 }, stoppedBy: 'fixed', halfWidthPercent: null, flows: [leg], total: { bitsPerSecond: summary(rate), retransmits: null, transactionsPerSecond: null } };
}
const spec = (f: JobSpec['file']) => ({ file: f }) as JobSpec;

test("the report's stages: the slowest of source disk, network and sink disk, and the transfer over memory to memory (seed 003: ftp 30 Mbit/s where netperf did 430)", () => {
  const both = spec({ source: 'a.bin', sink: true, ioMode: 'dsync', dropCache: true, probeSeconds: 2 });
  const [stage] = fileStages(both, [point('memory', 430, null, null), point('file', 30, 300, 31)]);
  assert.deepEqual({ ...stage, reason: undefined }, {
    point: { io: 'file' }, flowIndex: 0, direction: 'forward', from: A, to: B,
    sourceDisk: summary(300), network: summary(430), sinkDisk: summary(31), transfer: summary(30), transferShare: 30 / 430, slowest: 'sink disk', reason: undefined,
  });
  assert.equal(stage!.reason, 'sink disk: 31.00 Mbit/s against the source disk 300.00 and the network 430.00; the file moved at 30.00 Mbit/s, 6.98% of memory to memory');
  // The network slowest: a link under two fast disks.
  assert.equal(fileStages(both, [point('memory', 94, null, null), point('file', 93, 800, 500)])[0]!.slowest, 'network');
  // Only a source: its disk and the network are the stages.
  assert.equal(fileStages(spec({ source: 'a.bin', ioMode: 'buffered', dropCache: true, probeSeconds: 2 }), [point('memory', 900, null, null), point('file', 150, 160, null)])[0]!.slowest, 'source disk');
});

test('a stage the point has but did not measure: no slowest, and the reason says which', () => {
  const both = spec({ source: 'a.bin', sink: true, ioMode: 'dsync', dropCache: false, probeSeconds: 2 });
  const [noMemory] = fileStages(both, [point('file', 30, 300, 31)]);
  assert.deepEqual([noMemory!.slowest, noMemory!.network, noMemory!.transferShare], [null, null, null]);
  assert.equal(noMemory!.reason, 'not measured: network; the file moved at 30.00 Mbit/s');
  const [noProbe] = fileStages(both, [point('memory', 430, null, null), point('file', 30, 300, null)]);
  assert.equal(noProbe!.slowest, null);
  assert.match(noProbe!.reason, /^not measured: sink disk;/);
  const lines = stageLines([noMemory!]);
  assert.match(lines.join('\n'), /^io=file flow 0: not measured: network/m);
});
