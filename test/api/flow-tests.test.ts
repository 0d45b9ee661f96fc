import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { FlowResult, Job, JobSpec, Run } from '@niclab/shared/domain/contract';
import { flowSpec, flowTestErrors, startDelaySeconds, withFlowTestDefaults } from '@niclab/shared/domain/flow-tests';
import { runValue } from '@niclab/shared/domain/points';
import { summarizeRun } from '@niclab/shared/stores/results';
import { rrFigures } from '@niclab/shared/domain/figures';
import { paramsAt } from '@niclab/shared/domain/plan';

const path = { from: { agent: 'A', interface: 'eth1' }, to: { agent: 'D', interface: 'eth1' } };
// Latency under load (flent's RRUL): a 4-stream flow and an rr flow on the same path, with an idle baseline.
const spec: JobSpec = {
  engine: 'iperf3', test: 'stream', protocol: 'tcp', retries: 0, duration: 10, bufferLength: 131072, streams: 4, noDelay: false, direction: 'forward', interval: 1, repeat: 1,
  idleBaseline: 3, sweep: { streams: [2, 4] },
  flows: [path, { ...path, test: { kind: 'rr', engine: 'builtin', streams: 1, noDelay: true } }],
};

test("each flow runs its own test, engine and parameters; the flow's own values win over the sweep", () => {
  const [stream, rr] = [paramsAt(spec, { streams: 2 }, 0), paramsAt(spec, { streams: 2 }, 1)];
  assert.equal(flowSpec(spec, 0).engine, 'iperf3');
  assert.equal(flowSpec(spec, 1).engine, 'builtin');
  assert.deepEqual([stream.test, stream.streams, stream.duration, stream.rr, stream.idleSeconds], ['stream', 2, 10, undefined, undefined]);
  assert.deepEqual([rr.test, rr.streams, rr.noDelay, rr.rr], ['rr', 1, true, { requestSize: 1, responseSize: 1 }]);
  // The rr flow measures alone for the idle baseline, then beside the load for the whole duration.
  assert.deepEqual([rr.duration, rr.idleSeconds], [13, 3]);
  assert.deepEqual([startDelaySeconds(spec, 0), startDelaySeconds(spec, 1)], [3, 0]);
  assert.deepEqual(withFlowTestDefaults(spec).flows[1]!.test!.rr, { requestSize: 1, responseSize: 1 }, 'the stored job shows the sizes used');
});

test('an idle baseline needs an rr flow and a flow that loads the path; a flow test is checked against the job', () => {
  const fields = (s: JobSpec) => flowTestErrors(s).map((e) => `${e.field}: ${e.message}`);
  assert.deepEqual(fields(spec), []);
  assert.match(fields({ ...spec, flows: [path, path] }).join(), /body.idleBaseline: needs a flow that measures round trips/);
  assert.match(fields({ ...spec, flows: [spec.flows[1]!] }).join(), /body.idleBaseline: needs a flow that loads the path/);
  assert.match(fields({ ...spec, direction: 'bidir' }).join(), /body.flows\[1\].test.direction: test "rr" has no bidir/);
});

test("a stream job's headline is its stream flows' throughput: the rr flow's bytes are not in it", () => {
  const flow = (flowIndex: number, bitsPerSecond: number): FlowResult => ({
    flowIndex, direction: 'forward', ...path, sender: null, receiver: null, bitsPerSecond, retransmits: 0, udp: null,
    rr: flowIndex === 1 ? rrFigures({ requestSize: 1, responseSize: 1 }, [1, 2], 10) : null, intervals: [], nic: { from: null, to: null }, pathVerified: true, error: null, diagnostics: {},
  });
  const run = { status: 'succeeded', flows: [flow(0, 90e6), flow(1, 20e3)] } as Run;
  assert.equal(runValue(spec, run), 90e6);
});

test('rr figures: loaded and idle round trips side by side, with what the load added', () => {
  const rr = rrFigures({ requestSize: 1, responseSize: 1 }, [10, 20, 30, 40], 2, { rtts: [1, 2, 3, 4], seconds: 3 });
  assert.equal(rr.transactionsPerSecond, 2, 'loaded transactions over the loaded seconds only');
  assert.deepEqual(rr.idle, { seconds: 3, transactions: 4, rttSeconds: { min: 0.001, mean: 0.0025, p50: 0.002, p90: 0.004, p99: 0.004, max: 0.004 } });
  assert.deepEqual(rr.rttSeconds.p99, 0.04);
  assert.ok(Math.abs(rr.rttIncreaseSeconds!.p99 - 0.036) < 1e-12 && Math.abs(rr.rttIncreaseSeconds!.p50 - 0.018) < 1e-12);
});

test("a probe flow beside the load: its own params with defaults, the idle baseline, and none of the job's udp", () => {
  const probe = { ...path, test: { kind: 'probe' as const, engine: 'builtin' as const, probe: { interval: 5, packetSize: 64 } } };
  const mixed: JobSpec = { ...spec, protocol: 'udp', udp: { packetSize: 1470, rate: { bitsPerSecond: 1e8 } }, flows: [path, probe] };
  const params = paramsAt(mixed, {}, 1);
  assert.deepEqual([params.test, params.probe, params.udp, params.duration, params.idleSeconds], ['probe', { interval: 5, packetSize: 64 }, undefined, 13, 3]);
  assert.deepEqual([startDelaySeconds(mixed, 0), startDelaySeconds(mixed, 1)], [3, 0]);
  assert.deepEqual(flowTestErrors(mixed), []);
  // Defaults filled in for the stored job; bidir refused on the probe flow, naming it.
  const bare: JobSpec = { ...spec, flows: [path, { ...path, test: { kind: 'probe', engine: 'builtin' } }] };
  assert.deepEqual(withFlowTestDefaults(bare).flows[1]!.test!.probe, { interval: 10, packetSize: 64 });
  assert.match(flowTestErrors({ ...bare, direction: 'bidir' }).map((e) => `${e.field}: ${e.message}`).join(), /body.flows\[1\].test.direction: test "probe" has no bidir/);
});

test("a probe job's headline is its worst path's median round trip, not the sum over its paths; a stream job's still adds up", () => {
  const probeSpec: JobSpec = { ...spec, test: 'probe', engine: 'builtin', protocol: 'udp', idleBaseline: undefined, sweep: undefined, probe: { interval: 10, packetSize: 64 }, flows: [path, path, path] };
  const probed = (flowIndex: number, p50: number | null): FlowResult => ({
    flowIndex, direction: 'forward', ...path, sender: null, receiver: null, bitsPerSecond: null, retransmits: null, udp: null, rr: null,
    probe: p50 === null ? null : { loaded: { rttSeconds: { min: p50, mean: p50, p50, p90: p50, p99: p50, max: p50 } } } as unknown as FlowResult['probe'],
    intervals: [], nic: { from: null, to: null }, pathVerified: true, error: null, diagnostics: {},
  });
  const run = { status: 'succeeded', flows: [probed(0, 0.017), probed(1, 0.019), probed(2, null)] } as unknown as Run;
  assert.equal(runValue(probeSpec, run), 0.019, 'two paths at 17 and 19 ms: a run at 19 ms');
  const streams = { status: 'succeeded', flows: [0, 1, 2].map((i) => ({ ...probed(i, null), bitsPerSecond: 30e6 })) } as unknown as Run;
  assert.equal(runValue({ ...spec, flows: [path, path, path] }, streams), 90e6);
});

test("a run's summary (history, the run event) carries a probe flow's round-trip median as it does an rr flow's", () => {
  const rtt = (p50: number) => ({ min: p50, mean: p50, p50, p90: p50, p99: p50, max: p50 });
  const base = { direction: 'forward', ...path, sender: null, receiver: null, bitsPerSecond: null, retransmits: null, udp: null, intervals: [], nic: { from: null, to: null }, pathVerified: true, error: null, diagnostics: {} };
  const run = { id: 'r', index: 0, status: 'succeeded', point: {}, error: null, flows: [
    { ...base, flowIndex: 0, rr: null, probe: { loaded: { rttSeconds: rtt(0.017) } } },
    { ...base, flowIndex: 1, rr: { transactionsPerSecond: 10, rttSeconds: rtt(0.002) }, probe: null },
  ] } as unknown as Run;
  const job = { id: 'j', spec: { ...spec, test: 'probe' }, labels: {} } as unknown as Job;
  assert.deepEqual(summarizeRun(job, run).flows.map((f) => f.rttP50Seconds), [0.017, 0.002]);
});
