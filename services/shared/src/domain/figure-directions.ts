/**
 * Every figure a run can be judged by, each with the way it is better: higher throughput and
 * transactions/s; lower round trips (rr's and the probe's), loss, jitter, IPDV, one-way
 * delays, retransmits and CPU per bit. A comparison
 * judges one of them and shows all the jobs measured.
 */
import type { FlowResult, JobSpec, Run } from './contract.js';
import { flowSpec } from './flow-tests.js';
import { kindOf } from './test-kinds/index.js';
import { combineHeadline } from './test-kinds/kind.js';

export const METRIC_NAMES = [
  'bitsPerSecond', 'transactionsPerSecond', 'rttP50Seconds', 'rttP90Seconds', 'rttP99Seconds', 'idleRttP50Seconds', 'idleRttP99Seconds',
  'udpLossRatio', 'jitterSeconds', 'retransmits', 'cpuSecondsPerGigabit',
  'probeLossRatio', 'ipdvP99Seconds', 'forwardDelayP99Seconds', 'returnDelayP99Seconds',
] as const;
export type MetricName = (typeof METRIC_NAMES)[number];

export interface RunMetric {
  name: MetricName;
  /** Base unit, as in JSON. */
  unit: string;
  higherIsBetter: boolean;
  /** How tables show it: value / scale in `unit`, with `digits` decimals. */
  table: { scale: number; unit: string; digits: number };
  /** The run's value, over its flows; null when the run measured none. */
  value(spec: JobSpec, run: Run): number | null;
}

type Pick = (flow: FlowResult) => number | null | undefined;
const sum = (values: (number | null | undefined)[]) => combineHeadline({ combine: 'sum' }, values);
/** The worst flow's value: a path is as slow as its slowest flow. */
const worst = (pick: Pick) => (_: JobSpec, run: Run) => combineHeadline({ combine: 'worst' }, run.flows.map(pick));
/** Summed over the flows whose own test has this headline (throughput of stream flows, transactions of rr flows). */
const headlineSum = (name: 'bitsPerSecond' | 'transactionsPerSecond') => (spec: JobSpec, run: Run) => {
  const flows = run.flows.filter((f) => kindOf(flowSpec(spec, f.flowIndex)).headline.name === name);
  return sum(flows.map((f) => kindOf(flowSpec(spec, f.flowIndex)).headline.flowValue(f)));
};
const ms = { scale: 1e-3, unit: 'ms', digits: 3 };
/** A latency flow's round trips under load: an rr flow's or a probe flow's. */
export const roundTrips = (f: FlowResult) => f.rr?.rttSeconds ?? f.probe?.loaded.rttSeconds;
/** A latency flow's round trips in its idle baseline. */
export const idleRoundTrips = (f: FlowResult) => f.rr?.idle?.rttSeconds ?? f.probe?.idle?.rttSeconds;

export const RUN_METRICS: Record<MetricName, RunMetric> = {
  bitsPerSecond: { name: 'bitsPerSecond', unit: 'bits/s', higherIsBetter: true, table: { scale: 1e6, unit: 'Mbit/s', digits: 2 }, value: headlineSum('bitsPerSecond') },
  transactionsPerSecond: { name: 'transactionsPerSecond', unit: 'transactions/s', higherIsBetter: true, table: { scale: 1, unit: 'transactions/s', digits: 1 }, value: headlineSum('transactionsPerSecond') },
  rttP50Seconds: { name: 'rttP50Seconds', unit: 's', higherIsBetter: false, table: ms, value: worst((f) => roundTrips(f)?.p50) },
  rttP90Seconds: { name: 'rttP90Seconds', unit: 's', higherIsBetter: false, table: ms, value: worst((f) => roundTrips(f)?.p90) },
  rttP99Seconds: { name: 'rttP99Seconds', unit: 's', higherIsBetter: false, table: ms, value: worst((f) => roundTrips(f)?.p99) },
  idleRttP50Seconds: { name: 'idleRttP50Seconds', unit: 's', higherIsBetter: false, table: ms, value: worst((f) => idleRoundTrips(f)?.p50) },
  idleRttP99Seconds: { name: 'idleRttP99Seconds', unit: 's', higherIsBetter: false, table: ms, value: worst((f) => idleRoundTrips(f)?.p99) },
  udpLossRatio: {
    name: 'udpLossRatio', unit: 'ratio', higherIsBetter: false, table: { scale: 0.01, unit: '%', digits: 3 },
    // Datagrams lost over datagrams sent, all UDP flows together.
    value: (_, run) => {
      const udp = run.flows.map((f) => f.udp).filter((u) => u !== null);
      const sent = udp.reduce((a, u) => a + u.sent, 0);
      return udp.length && sent > 0 ? udp.reduce((a, u) => a + u.lost, 0) / sent : null;
    },
  },
  jitterSeconds: { name: 'jitterSeconds', unit: 's', higherIsBetter: false, table: ms, value: worst((f) => f.udp?.jitterSeconds) },
  retransmits: { name: 'retransmits', unit: 'segments', higherIsBetter: false, table: { scale: 1, unit: 'segments', digits: 0 }, value: (_, run) => sum(run.flows.map((f) => f.retransmits)) },
  cpuSecondsPerGigabit: {
    name: 'cpuSecondsPerGigabit', unit: 's/Gbit', higherIsBetter: false, table: { scale: 1, unit: 'CPU s/Gbit', digits: 3 },
    // Both ends' CPU over the bits the receivers got, throughput flows only (an rr flow moves few bits for its CPU).
    value: (spec, run) => {
      const flows = run.flows.filter((f) => kindOf(flowSpec(spec, f.flowIndex)).headline.name === 'bitsPerSecond' && f.sender && f.receiver);
      const bits = flows.reduce((a, f) => a + f.receiver!.bytes * 8, 0);
      return bits > 0 ? flows.reduce((a, f) => a + f.sender!.cpuSeconds + f.receiver!.cpuSeconds, 0) / (bits / 1e9) : null;
    },
  },
  probeLossRatio: {
    name: 'probeLossRatio', unit: 'ratio', higherIsBetter: false, table: { scale: 0.01, unit: '%', digits: 3 },
    // Probe datagrams that never came back over those sent, all probe flows together (under load).
    value: (_, run) => {
      const phases = run.flows.map((f) => f.probe?.loaded).filter((p) => p !== undefined);
      const sent = phases.reduce((a, p) => a + p.sent, 0);
      return sent > 0 ? phases.reduce((a, p) => a + p.lost.total, 0) / sent : null;
    },
  },
  ipdvP99Seconds: { name: 'ipdvP99Seconds', unit: 's', higherIsBetter: false, table: ms, value: worst((f) => f.probe?.loaded.ipdvSeconds.roundTrip.p99) },
  forwardDelayP99Seconds: { name: 'forwardDelayP99Seconds', unit: 's', higherIsBetter: false, table: ms, value: worst((f) => f.probe?.loaded.oneWayDelaySeconds?.forward.p99) },
  returnDelayP99Seconds: { name: 'returnDelayP99Seconds', unit: 's', higherIsBetter: false, table: ms, value: worst((f) => f.probe?.loaded.oneWayDelaySeconds?.return.p99) },
};
