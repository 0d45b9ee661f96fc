import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ipdv, probePhase, withReflector, type ProbeSample } from '@niclab/shared/domain/test-kinds/probe/stats';
import type { ProbeFigures } from '@niclab/shared/domain/contract';

/** 100 datagrams: seq i comes back after (i + 1) ms (forward i + 0.75, back 0.25), except those `lost`. */
const samples = (lost: Set<number> = new Set()): ProbeSample[] =>
  Array.from({ length: 100 }, (_, seq) => (lost.has(seq) ? { seq } : { seq, rtt: seq + 1, forward: seq + 0.75, back: 0.25 }));

test('round-trip percentiles by nearest rank, in seconds, over the datagrams that came back', () => {
  const phase = probePhase(samples(), { duplicates: 0, outOfOrder: 0 }, 1);
  assert.deepEqual(phase.rttSeconds, { min: 0.001, mean: 0.0505, p50: 0.05, p90: 0.09, p99: 0.099, max: 0.1 });
  assert.equal(phase.oneWayDelaySeconds!.forward.p50, 0.04975);
  assert.equal(phase.oneWayDelaySeconds!.return.p99, 0.00025);
  // Lost ones are no zero-delay sample: with seq 0-49 lost, the minimum is seq 50's.
  const half = probePhase(samples(new Set(Array.from({ length: 50 }, (_, i) => i))), { duplicates: 0, outOfOrder: 0 }, 1);
  assert.equal(half.rttSeconds.min, 0.051);
  assert.equal(half.rttSeconds.p50, 0.075);
});

test('loss per direction: the far end reflected 95 of 100, 90 came back; its copies add to the duplicates', () => {
  const lost = new Set([3, 10, 11, 12, 40, 41, 60, 61, 62, 99]);
  const phase = probePhase(samples(lost), { duplicates: 2, outOfOrder: 1 }, 1);
  assert.deepEqual(phase.lost, { forward: null, return: null, total: 10 });
  const figures: ProbeFigures = {
    intervalSeconds: 0.01, packetSize: 64, clock: 'separate', loaded: phase,
    schedule: { slots: 100, startedAt: '2026-12-01T00:00:00.000Z', startLateSeconds: 0, latenessSeconds: { min: 0, mean: 0, p50: 0, p90: 0, p99: 0, max: 0 } }, socketDrops: { sender: 0, reflector: null },
  };
  const done = withReflector(figures, { loaded: { reflected: 95, duplicates: 3 } }, true);
  assert.deepEqual(done.loaded.lost, { forward: 5, return: 5, total: 10 });
  assert.deepEqual(done.loaded.lossRatio, { forward: 0.05, return: 5 / 95, total: 0.1 });
  assert.equal(done.loaded.reflected, 95);
  assert.equal(done.loaded.duplicates, 5);
  assert.equal(done.loaded.outOfOrder, 1);
  assert.equal(done.clock, 'shared');
  assert.ok(done.loaded.oneWayDelaySeconds);
  // Two clocks: the one-way delays would carry their offset, so they go; the round trip stays.
  const apart = withReflector(figures, { loaded: { reflected: 95, duplicates: 3 } }, false);
  assert.equal(apart.clock, 'separate');
  assert.equal(apart.loaded.oneWayDelaySeconds, undefined);
  assert.equal(apart.loaded.rttSeconds.p50, done.loaded.rttSeconds.p50);
  // No word from the far end: each direction unknown, the total still known.
  const silent = withReflector(figures, null, true);
  assert.deepEqual(silent.loaded.lost, { forward: null, return: null, total: 10 });
});

test("IPDV as irtt: |d(i) - d(i-1)| over consecutive sequence numbers that both came back", () => {
  const trips: ProbeSample[] = [
    { seq: 0, rtt: 10 }, { seq: 1, rtt: 13 }, { seq: 2, rtt: 11 }, { seq: 3 }, { seq: 4, rtt: 30 }, { seq: 5, rtt: 29 },
  ];
  // 1-0: 3, 2-1: 2, (3 lost: no 3-2, no 4-3), 5-4: 1. Arrival order does not matter: sequence does.
  assert.deepEqual(ipdv(trips, (s) => s.rtt), [3, 2, 1]);
  assert.deepEqual(ipdv([...trips].reverse(), (s) => s.rtt), [3, 2, 1]);
  // Only the ones that came back: 2 and 4 are no consecutive pair even when nothing lies between them.
  assert.deepEqual(ipdv(trips.filter((s) => s.rtt !== undefined), (s) => s.rtt), [3, 2, 1]);
  const phase = probePhase(trips, { duplicates: 0, outOfOrder: 0 }, 1);
  assert.deepEqual(phase.ipdvSeconds.roundTrip, { min: 0.001, mean: 0.002, p50: 0.002, p90: 0.003, p99: 0.003, max: 0.003 });
});
