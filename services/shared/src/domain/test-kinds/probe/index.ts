import type { FieldError, JobSpec } from '../../contract.js';
import type { TestKind } from '../kind.js';
import { probeResult } from './result.js';

/** The probe's defaults: irtt's 10 ms would be its `-i 10ms`; 64 bytes is a small datagram that still holds its header. */
export const PROBE_DEFAULTS = { interval: 10, packetSize: 64 } as const;

const NOT_FOR_PROBE = ['packetSize', 'rate', 'requestSize', 'responseSize'] as const;

/** The UDP latency probe (irtt): one small datagram every `interval` ms, reflected by the far end. */
export const probeKind: TestKind = {
  name: 'probe',
  phrase: 'UDP latency probe',

  specErrors(spec) {
    const errors: FieldError[] = [];
    const bidir = 'test "probe" has no bidir: the far end reflects each datagram';
    if (spec.direction === 'bidir') errors.push({ field: 'body.direction', message: bidir });
    if (spec.sweep?.direction?.includes('bidir')) errors.push({ field: 'body.sweep.direction', message: bidir });
    if (spec.udp) errors.push({ field: 'body.udp', message: 'applies to test "stream" only (a probe sizes its datagrams with probe.packetSize)' });
    if (spec.rr) errors.push({ field: 'body.rr', message: 'applies to test "rr" only' });
    for (const dimension of NOT_FOR_PROBE) {
      if (spec.sweep?.[dimension]) errors.push({ field: `body.sweep.${dimension}`, message: 'does not apply to test "probe"' });
    }
    return errors;
  },

  withDefaults: (spec) => ({ ...spec, probe: { ...PROBE_DEFAULTS, ...spec.probe } }),

  params: (spec) => ({ probe: { ...PROBE_DEFAULTS, ...spec.probe } }),

  ownFields({ udp: _udp, rr: _rr, ...spec }): JobSpec {
    if (!spec.sweep || !NOT_FOR_PROBE.some((d) => spec.sweep?.[d])) return spec;
    const sweep = { ...spec.sweep };
    for (const dimension of NOT_FOR_PROBE) delete sweep[dimension];
    return { ...spec, sweep };
  },

  latency: true,

  judgesThroughput: false,

  searchable: false,

  ownBlock: (spec) => (spec.probe ? { probe: spec.probe } : {}),

  pinned: () => [],

  result: (sender, receiver) => ({ probe: probeResult(sender, receiver) }),

  absent: { probe: null },

  headline: {
    name: 'rttP50Seconds',
    unit: 's',
    table: { scale: 1e-3, unit: 'ms RTT p50', digits: 3 },
    flowValue: (flow) => flow.probe?.loaded.rttSeconds.p50,
    // Two probed paths at 17 ms each are a run at 17 ms, not 34: the worst path's median.
    combine: 'worst',
  },
};
