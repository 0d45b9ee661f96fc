import type { FieldError } from '../../contract.js';
import type { TestKind } from '../kind.js';

/** A bulk stream, TCP or UDP: throughput as received (nttcp, iperf). */
export const streamKind: TestKind = {
  name: 'stream',
  phrase: 'stream',

  specErrors(spec) {
    const errors: FieldError[] = [];
    if (spec.protocol === 'udp' && !spec.udp) errors.push({ field: 'body.udp', message: 'is required when protocol is "udp"' });
    if (spec.rr) errors.push({ field: 'body.rr', message: 'applies to test "rr" only' });
    if (spec.probe) errors.push({ field: 'body.probe', message: 'applies to test "probe" only' });
    for (const dimension of ['requestSize', 'responseSize'] as const) {
      if (spec.sweep?.[dimension]) errors.push({ field: `body.sweep.${dimension}`, message: 'applies to test "rr" only' });
    }
    return errors;
  },

  withDefaults: (spec) => spec,

  params: () => ({}),

  ownFields({ rr: _rr, probe: _probe, ...spec }) {
    if (!spec.sweep?.requestSize && !spec.sweep?.responseSize) return spec;
    const { requestSize: _request, responseSize: _response, ...sweep } = spec.sweep;
    return { ...spec, sweep };
  },

  latency: false,

  judgesThroughput: true,

  searchable: true,

  ownBlock: () => ({}),

  pinned: () => [],

  // A stream's figures (bytes, goodput, UDP counts) are every kind's: nothing of its own to merge.
  result: () => ({}),

  absent: {},

  headline: {
    name: 'bitsPerSecond',
    unit: 'bits/s',
    table: { scale: 1e6, unit: 'Mbit/s', digits: 2 },
    flowValue: (flow) => flow.bitsPerSecond,
    combine: 'sum',
  },
};
