import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ENGINES } from '@niclab/agent/engines/registry';
import type { EngineParams } from '@niclab/shared/domain/task';
import { enginePair } from '../helpers/engines.js';

const params: EngineParams = { protocol: 'tcp', test: 'stream', duration: 2, bufferLength: 65536, streams: 1, noDelay: false, interval: 0.5 };

// The intervals are the run's time series: no sample may go missing, none may be counted twice.
for (const engine of Object.values(ENGINES)) {
  test(`${engine.name}: the intervals tile the receiver's run from 0 and add up to its bytes`, async (ctx) => {
    const [sender, receiver] = await enginePair(engine, params);
    assert.equal(sender.error, null, JSON.stringify(sender.error));
    assert.equal(receiver.error, null, JSON.stringify(receiver.error));
    const intervals = receiver.intervals;
    const bytes = receiver.figures!.bytes;
    const implied = intervals.reduce((sum, i) => sum + (i.bitsPerSecond * (i.end - i.start)) / 8, 0);
    ctx.diagnostic(`${intervals.length} intervals: ${intervals.map((i) => `${i.start.toFixed(2)}-${i.end.toFixed(2)}`).join(' ')}; they carry ${implied.toFixed(0)} of ${bytes} bytes`);
    assert.ok(intervals.length >= 3, `intervals: ${intervals.length} for a 2 s run at 0.5 s`);
    assert.ok(Math.abs(intervals[0]!.start) < 1e-9, `the first interval starts at ${intervals[0]!.start}`);
    for (let i = 1; i < intervals.length; i++) {
      assert.ok(Math.abs(intervals[i]!.start - intervals[i - 1]!.end) < 1e-6, `interval ${i} starts at ${intervals[i]!.start}, the one before ended at ${intervals[i - 1]!.end}`);
    }
    // Each interval lasts about the asked 0.5 s (the last may be shorter: the run's tail).
    for (const i of intervals.slice(0, -1)) assert.ok(i.end - i.start > 0.4 && i.end - i.start < 0.6, `an interval of ${(i.end - i.start).toFixed(3)} s`);
    // A trailing sliver under a tenth of an interval is left out of the series, not out of the bytes.
    assert.ok(intervals.at(-1)!.end >= params.duration - params.interval, `the last interval ends at ${intervals.at(-1)!.end} of a ${params.duration} s run`);
    assert.ok(implied <= bytes * 1.001 && implied >= bytes * 0.95, `the intervals carry ${implied.toFixed(0)} of the receiver's ${bytes} bytes`);
  });
}
