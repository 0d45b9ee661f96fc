import type { FieldError } from '../../contract.js';
import type { TestKind } from '../kind.js';
import type { RrMeasured } from './measured.js';

/** Request/response (netperf TCP_RR): transactions per second and their round-trip times. */
export const rrKind: TestKind = {
  name: 'rr',
  phrase: 'request/response (rr)',

  specErrors(spec) {
    const errors: FieldError[] = [];
    if (spec.direction === 'bidir') errors.push({ field: 'body.direction', message: 'test "rr" has no bidir: requests go one way and responses the other' });
    if (spec.sweep?.direction?.includes('bidir')) errors.push({ field: 'body.sweep.direction', message: 'test "rr" has no bidir: requests go one way and responses the other' });
    if (spec.udp) errors.push({ field: 'body.udp', message: 'applies to test "stream" only' });
    if (spec.probe) errors.push({ field: 'body.probe', message: 'applies to test "probe" only' });
    return errors;
  },

  withDefaults: (spec) => ({ ...spec, rr: { requestSize: 1, responseSize: 1, ...spec.rr } }),

  params: (spec, point) => ({
    rr: { requestSize: point.requestSize ?? spec.rr?.requestSize ?? 1, responseSize: point.responseSize ?? spec.rr?.responseSize ?? 1 },
  }),

  ownFields: ({ udp: _udp, probe: _probe, ...spec }) => spec,

  latency: true,

  judgesThroughput: false,

  searchable: false,

  ownBlock: (spec) => (spec.rr ? { rr: spec.rr } : {}),

  pinned: (own) => Object.keys(own.rr ?? {}),

  // The requesting end times each transaction; the responding end has nothing of its own.
  result: (sender) => ({ rr: (sender?.measured as RrMeasured | null | undefined)?.rr ?? null }),

  absent: { rr: null },

  headline: {
    name: 'transactionsPerSecond',
    unit: 'transactions/s',
    table: { scale: 1, unit: 'transactions/s', digits: 1 },
    flowValue: (flow) => flow.rr?.transactionsPerSecond,
    combine: 'sum',
  },
};
