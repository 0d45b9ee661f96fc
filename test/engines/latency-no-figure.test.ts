import assert from 'node:assert/strict';
import { createSocket } from 'node:dgram';
import { test } from 'node:test';
import { ENGINES } from '@niclab/agent/engines/registry';
import type { EngineParams, SenderTask } from '@niclab/shared/domain/task';
import { enginePair, measuredProbe, measuredRr } from '../helpers/engines.js';

/**
 * No round trip is no figure. A latency end that measured nothing must say so, never report a
 * round trip of 0 s: compare reads lower as better, so a zero would win every A/B and fill the
 * matrix and the RTT metrics with the best value there is.
 */
const engine = ENGINES.builtin!;
const probe = (extra: Partial<EngineParams> = {}): EngineParams => ({ protocol: 'udp', test: 'probe', duration: 1, bufferLength: 64, streams: 1, noDelay: false, interval: 1, probe: { interval: 10, packetSize: 64 }, ...extra });

test('a probe whose datagrams never come back fails no_data, with no round trip figure', async () => {
  // A far end that takes every datagram and reflects none (a path that drops the replies).
  const hole = createSocket('udp4');
  let swallowed = 0;
  hole.on('message', () => void (swallowed += 1));
  await new Promise<void>((resolve) => hole.bind(0, '127.0.0.1', resolve));
  try {
    const params = probe();
    const task: SenderTask = { jobId: '00000000-0000-4000-8000-000000000001', runId: '00000000-0000-4000-8000-000000000003', leg: 0, role: 'sender', engine: 'builtin', params, interface: 'lo', deadline: Date.now() + 15_000, peer: { address: '127.0.0.1', port: hole.address().port }, startAt: Date.now() + 100 };
    const outcome = await engine.run(task, { signal: new AbortController().signal, address: '127.0.0.1', ready: () => undefined });
    assert.ok(swallowed > 0, `the probe sent (${swallowed} datagrams arrived at the far end)`);
    assert.equal(outcome.error?.code, 'no_data', JSON.stringify(outcome.error));
    assert.equal(measuredProbe(outcome) ?? null, null, 'no probe figures beside the error');
  } finally {
    hole.close();
  }
});

// The ends start a second late: a loaded machine takes part of the rest to spawn them, so the loaded phase runs 4 s.
test('a probe that came up after its idle baseline ended reports no idle figure rather than a 0 s one', async () => {
  const [sender, receiver] = await enginePair(engine, probe({ duration: 4, idleSeconds: 0.5 }), { startInMs: -1000 });
  assert.equal(sender.error, null, JSON.stringify(sender.error));
  assert.equal(receiver.error, null, JSON.stringify(receiver.error));
  assert.ok(measuredProbe(sender)!.loaded.received > 0);
  assert.equal(measuredProbe(sender)!.idle, undefined, JSON.stringify(measuredProbe(sender)!.idle));
  assert.equal(measuredProbe(sender)!.rttIncreaseSeconds, undefined);
});

test('an rr end that came up after its idle baseline ended reports no idle figure rather than a 0 s one', async () => {
  const [sender, receiver] = await enginePair(engine, { protocol: 'tcp', test: 'rr', duration: 4, idleSeconds: 0.5, bufferLength: 1, streams: 1, noDelay: true, interval: 2, rr: { requestSize: 1, responseSize: 1 } }, { startInMs: -1000 });
  assert.equal(sender.error, null, JSON.stringify(sender.error));
  assert.equal(receiver.error, null, JSON.stringify(receiver.error));
  assert.ok(measuredRr(sender)!.transactions > 0);
  assert.equal(measuredRr(sender)!.idle, undefined, JSON.stringify(measuredRr(sender)!.idle));
  assert.equal(measuredRr(sender)!.rttIncreaseSeconds, undefined);
});
