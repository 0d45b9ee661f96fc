import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { DELAY_HISTOGRAM_RELATIVE_ERROR, DelayHistogram } from '@niclab/shared/domain/delay-histogram';

const filled = (values: number[]) => {
  const h = new DelayHistogram();
  for (const v of values) h.add(v);
  return h;
};

/** Within the histogram's bound of `expected` (and a nanosecond, its rounding). */
const near = (actual: number, expected: number, what: string) =>
  assert.ok(Math.abs(actual - expected) <= Math.abs(expected) * DELAY_HISTOGRAM_RELATIVE_ERROR + 1e-9, `${what}: ${actual} s, closed form ${expected} s`);

test('delays of 1 ms to 10 s, one each ms: nearest-rank quantiles as the closed form gives them, past 1 s too', () => {
  // 10,000 delays i ms: the q-quantile by nearest rank is ceil(q * 10,000) ms.
  const h = filled(Array.from({ length: 10_000 }, (_, i) => (i + 1) / 1000));
  const s = h.summary();
  near(s.p50, 5, 'p50');
  near(s.p99, 9.9, 'p99');
  near(h.quantile(0.999), 9.99, 'p99.9');
  near(h.quantile(0.25), 2.5, 'p25');
  assert.equal(s.min, 0.001);
  assert.equal(s.max, 10);
  assert.ok(Math.abs(s.mean - 5.0005) < 1e-9, `mean ${s.mean}`);
});

test('exponential delays with a mean of 2 s: the quantiles are -2 ln(1 - q) s', () => {
  // The distribution's own quantile points, (i - 0.5) / N for i = 1..N: the sample's nearest-rank
  // quantile is then the closed form's within 1/N of q.
  const n = 100_000;
  const h = filled(Array.from({ length: n }, (_, i) => -2 * Math.log(1 - (i + 0.5) / n)));
  for (const q of [0.5, 0.9, 0.99, 0.999]) {
    const closed = -2 * Math.log(1 - q);
    // The sample's own quantile is the closed form's at q within half a rank.
    const slack = 2 / (n * (1 - q));
    assert.ok(Math.abs(h.quantile(q) - closed) <= closed * (DELAY_HISTOGRAM_RELATIVE_ERROR + slack), `q ${q}: ${h.quantile(q)} s, closed form ${closed} s`);
  }
  assert.ok(Math.abs(h.summary().mean - 2) < 1e-3, `mean ${h.summary().mean}`);
});

test('a delay alone is its own quantile, within the bound, from a nanosecond to a day, and negative ones keep their sign', () => {
  fc.assert(fc.property(fc.double({ min: 1e-9, max: 86_400, noNaN: true }), fc.boolean(), (magnitude, negative) => {
    const v = negative ? -magnitude : magnitude;
    // Two copies and one far above: the median is v's bucket, not clamped to v by min or max.
    const h = filled([v, v, 1e5]);
    near(h.quantile(0.5), v, `a delay of ${v} s`);
  }), { numRuns: 500 });
});

test('negative delays (two clocks a little apart) rank below zero: -3..+6 us, one each us', () => {
  const h = filled(Array.from({ length: 10 }, (_, i) => (i - 3) * 1e-6));
  assert.equal(h.quantile(0.1), -3e-6);
  assert.equal(h.quantile(0.3), -1e-6);
  assert.equal(h.quantile(0.4), 0);
  assert.equal(h.summary().p50, 1e-6);
  assert.equal(h.summary().min, -3e-6);
});

test('no delays: zeros, not NaN', () => {
  assert.deepEqual(new DelayHistogram().summary(), { min: 0, mean: 0, p50: 0, p99: 0, max: 0 });
});
