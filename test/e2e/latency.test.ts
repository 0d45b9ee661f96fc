import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { ApiClient } from '../helpers/api-client.js';
import { startNiclab, type TestNiclab } from '../helpers/niclab.js';

let niclab: TestNiclab;
let client: ApiClient;
const lo = (agentId: string) => ({ agent: agentId, interface: 'lo' });

before(async () => {
  // iperf3's server takes a while to listen on a loaded machine: the receivers get 3 s.
  niclab = await startNiclab(['lat']);
  ({ client } = niclab);
});

after(async () => {
  await niclab?.stop();
});

test('latency under load: an iperf3 stream flow and a builtin rr flow in one run, the rr flow idle first', async () => {
  const loop = { from: lo('lat'), to: lo('lat') };
  const job = await client.succeed({
    engine: 'iperf3', duration: 2, idleBaseline: 1, flows: [loop, { ...loop, test: { kind: 'rr', engine: 'builtin', noDelay: true } }],
  }, 60_000);
  assert.deepEqual(job.spec.flows[1].test, { kind: 'rr', engine: 'builtin', noDelay: true, rr: { requestSize: 1, responseSize: 1 } }, 'the stored job shows the sizes used');
  const [stream, rr] = job.runs[0].flows;
  // Each flow ran its own engine.
  assert.equal(stream.diagnostics.sender.command[0], 'iperf3');
  assert.notEqual(rr.diagnostics.sender.command[0], 'iperf3');
  assert.equal(stream.rr, null);
  assert.ok(stream.bitsPerSecond > 1e8, `stream ${stream.bitsPerSecond} bit/s`);
  // The idle window runs from this end's start to the run's load start (1 s after the run's start): less when its child started late (0.72 s once, under load).
  assert.ok(rr.rr.idle.seconds > 0 && rr.rr.idle.seconds <= 1, `idle ${rr.rr.idle.seconds} s`);
  assert.ok(rr.rr.idle.transactions > 50 && rr.rr.transactions > 50, `idle ${rr.rr.idle.transactions}, loaded ${rr.rr.transactions} transactions`);
  // One request in flight at a time, back to back: the transactions a second and the mean round
  // trip, counted and timed apart, multiply to the share of the time a request was out (at most
  // 1; the rest is the engine's turn between a response and the next request). rttIncreaseSeconds
  // is arithmetic of these figures, checked on a case worked by hand in test/api/flow-tests.test.ts.
  for (const [phase, tps, mean] of [['loaded', rr.rr.transactionsPerSecond, rr.rr.rttSeconds.mean], ['idle', rr.rr.idle.transactions / rr.rr.idle.seconds, rr.rr.idle.rttSeconds.mean]] as const) {
    assert.ok(tps * mean > 0.5 && tps * mean <= 1.01, `${phase}: ${tps} transactions/s x ${mean} s mean round trip = ${tps * mean}`);
  }
  // The rr flow ran idle + duration (less when its end came up late on a loaded machine: 2.75 s beside three other files); the stream's sender, started with it, waited out the idle second and then ran its 2 s.
  assert.ok(rr.sender.realSeconds >= 2.5 && rr.sender.realSeconds < 3.5, `rr ran ${rr.sender.realSeconds} s`);
  const span = Date.parse(stream.diagnostics.sender.engineEndedAt) - Date.parse(stream.diagnostics.sender.engineStartedAt);
  assert.ok(span >= 2900, `the stream's sender ran ${span} ms from its start to its end`);
  const report = await client.call('getReport', 'GET', `/v1/jobs/${job.id}/report`);
  const [point] = report.body.points;
  assert.equal(point.total.bitsPerSecond.mean, stream.bitsPerSecond, "the job's throughput is its stream flow's alone");
  assert.deepEqual(point.flows.map((f: { test: string }) => f.test), ['stream', 'rr']);
  assert.equal(point.flows[1].idleRttP99Seconds.mean, rr.rr.idle.rttSeconds.p99);
  const table = await fetch(`${client.base}/v1/jobs/${job.id}/report?format=table`);
  assert.match(await table.text(), /round trips \(rr\):\n.*idle p50 ms\s+idle p99 ms\s+loaded p50 ms\s+loaded p99 ms\s+\+p99 ms/);
});
