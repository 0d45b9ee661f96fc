import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { FlowResult, Job, JobSpec, Run } from '@niclab/shared/domain/contract';
import { compareJobs, comparisonTable } from '@niclab/shared/domain/compare';
import { endFigures, rrFigures } from '@niclab/shared/domain/figures';

const path = { from: { agent: 'A', interface: 'eth1' }, to: { agent: 'D', interface: 'eth1' } };
// Latency under load: a stream flow and an rr flow with an idle baseline, as in a txqueuelen A/B.
const spec: JobSpec = {
  engine: 'builtin', test: 'stream', protocol: 'tcp', retries: 0, duration: 10, bufferLength: 131072, streams: 4, noDelay: false, direction: 'forward', interval: 1, repeat: 3,
  idleBaseline: 3, flows: [path, { ...path, test: { kind: 'rr', engine: 'builtin', streams: 1, noDelay: true, rr: { requestSize: 1, responseSize: 1 } } }],
};
const job = (id: string, s: JobSpec = spec): Job => ({
  id, owner: 'anonymous', status: 'succeeded', createdAt: '2026-12-01T00:00:00.000Z', startedAt: null, finishedAt: null, progress: { runsDone: 3, runsTotal: 3 }, error: null, finding: null, waitingFor: null, spec: s,
});
const flow = (flowIndex: number, f: Partial<FlowResult>): FlowResult => ({
  flowIndex, direction: 'forward', ...path, sender: null, receiver: null, bitsPerSecond: null, retransmits: null, udp: null, rr: null, intervals: [],
  nic: { from: null, to: null }, pathVerified: true, error: null, diagnostics: {}, ...f,
});
/** One run: the stream at `mbit` with `retransmits`, the rr flow's loaded round trips around `rttMs` (idle 0.1 ms). */
const run = (i: number, mbit: number, rttMs: number, retransmits: number): Run => {
  const bytes = (mbit * 1e6 * 10) / 8;
  return {
    id: `r${i}`, jobId: 'j', index: i, point: {}, repetition: i + 1, status: 'succeeded', startedAt: null, finishedAt: null, error: null,
    flows: [
      flow(0, { bitsPerSecond: mbit * 1e6, retransmits, sender: endFigures(bytes, 10, { user: 0.25, system: 0.75 }, 100), receiver: endFigures(bytes, 10, { user: 0.5, system: 1.5 }, 100) }),
      flow(1, { bitsPerSecond: 8000, rr: rrFigures({ requestSize: 1, responseSize: 1 }, [rttMs * 0.9, rttMs, rttMs * 1.1 + i * 0.01], 10, { rtts: [0.1, 0.1 + i * 0.001], seconds: 3 }) }),
    ],
  };
};
// The longer queue: the same throughput (within noise), ten times the loaded round trip, fewer retransmits.
const short = [run(0, 94.1, 2, 30), run(1, 94.2, 2.1, 31), run(2, 94.0, 1.9, 29)];
const long = [run(0, 94.2, 20, 3), run(1, 94.0, 21, 2), run(2, 94.1, 19, 4)];

test('a longer round trip is worse: the verdict judges the figure asked for, in its own direction, and says so', () => {
  const c = compareJobs(job('short'), short, job('long'), long, 1, 'rttP99Seconds');
  assert.deepEqual(c.metric, { name: 'rttP99Seconds', unit: 's', higherIsBetter: false });
  assert.equal(c.higherIsBetter, false);
  assert.equal(c.points[0]!.verdict, 'worse');
  assert.ok(c.points[0]!.changePercent! > 800, `+${c.points[0]!.changePercent}%`);
  assert.match(c.points[0]!.judged, /^rttP99Seconds \(lower is better\): 2\.\d+ -> 2\d\.\d+ ms, \+\d+\.\d+%: worse$/);
  // The other way round, the shorter queue is better.
  assert.equal(compareJobs(job('long'), long, job('short'), short, 1, 'rttP99Seconds').points[0]!.verdict, 'better');
});

test('every figure measured is compared in its own direction; the headline stays the default', () => {
  const c = compareJobs(job('short'), short, job('long'), long);
  assert.equal(c.metric.name, 'bitsPerSecond');
  const verdicts = Object.fromEntries(c.metrics.map((m) => [m.metric.name, `${m.metric.higherIsBetter ? 'higher' : 'lower'}: ${m.points[0]!.verdict}`]));
  assert.deepEqual(verdicts, {
    bitsPerSecond: 'higher: no significant change',
    transactionsPerSecond: 'higher: no significant change', // the fixture's rr flow makes 3 transactions either way
    rttP50Seconds: 'lower: worse',
    rttP90Seconds: 'lower: worse',
    rttP99Seconds: 'lower: worse',
    idleRttP50Seconds: 'lower: no significant change',
    idleRttP99Seconds: 'lower: no significant change',
    retransmits: 'lower: better',
    cpuSecondsPerGigabit: 'lower: no significant change',
  });
  // The job's throughput is its stream flow's: the rr flow's 8 kbit/s is not in it.
  assert.ok(Math.abs(c.points[0]!.baseline.mean - 94.1e6) < 1);
  const table = comparisonTable(c, []);
  assert.match(table, /judged: bitsPerSecond \(higher is better\)/);
  assert.match(table, /rttP99Seconds\s+ms\s+lower is better\s+2\.\d+\s+2\d\.\d+\s+\d+\.\d+\s+\[.*\]\s+p=\S+\s+adj=\S+\s+worse/);
  assert.match(table, /idleRttP99Seconds\s+ms\s+lower is better\s+0\.10\d\s+0\.10\d/);
});

test('UDP loss and jitter: lower is better', () => {
  const udpSpec: JobSpec = { ...spec, protocol: 'udp', udp: { packetSize: 1470, rate: { packetsPerSecond: 1000 } }, idleBaseline: undefined, flows: [path] };
  const udpRun = (i: number, lost: number, jitter: number): Run => ({
    id: `u${i}`, jobId: 'u', index: i, point: {}, repetition: i + 1, status: 'succeeded', startedAt: null, finishedAt: null, error: null,
    flows: [flow(0, { bitsPerSecond: 11e6, udp: { sent: 10000, received: 10000 - lost, lost, outOfOrder: 0, duplicates: 0, jitterSeconds: jitter, lossRatio: lost / 10000 } })],
  });
  const c = compareJobs(job('a', udpSpec), [udpRun(0, 10, 1e-4), udpRun(1, 11, 1.1e-4), udpRun(2, 9, 0.9e-4)], job('b', udpSpec), [udpRun(0, 100, 1e-3), udpRun(1, 110, 1.1e-3), udpRun(2, 90, 0.9e-3)], 1, 'udpLossRatio');
  assert.equal(c.points[0]!.verdict, 'worse');
  assert.equal(c.metrics.find((m) => m.metric.name === 'jitterSeconds')!.points[0]!.verdict, 'worse');
  assert.ok(Math.abs(c.points[0]!.baseline.mean - 0.001) < 1e-12, 'lost over sent');
});
