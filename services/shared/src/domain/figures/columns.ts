/**
 * The named values read off a run's flows: the comparison's figures, a report leg's and the
 * CSV's columns. Each is a view of one catalogue figure, whose unit, display, direction and
 * domain it takes; what differs between them is only how the value is read and combined.
 */
import type { FlowResult, JobSpec, Run } from '../contract.js';
import { flowSpec } from '../flow-tests.js';
import { kindOf } from '../test-kinds/index.js';
import { combineHeadline } from '../test-kinds/kind.js';
import { figure, type Figure } from './catalogue.js';

/** A latency flow's round trips under load: an rr flow's or a probe flow's. */
export const roundTrips = (f: FlowResult) => f.rr?.rttSeconds ?? f.probe?.loaded.rttSeconds;
/** A latency flow's round trips in its idle baseline. */
export const idleRoundTrips = (f: FlowResult) => f.rr?.idle?.rttSeconds ?? f.probe?.idle?.rttSeconds;

type FlowValue = (flow: FlowResult) => number | null | undefined;
type RunValue = (spec: JobSpec, run: Run) => number | null;

export interface Column {
  /** Its name: in the comparison (MetricName), a report leg and the CSV. */
  readonly name: string;
  /** The catalogue figure it is a view of. */
  readonly figure: Figure;
  /** How an axis or a table's heading names it (its unit follows, from the figure). */
  readonly label: string;
  /** One flow's value (a report leg's), when it has one per flow. */
  readonly flow?: FlowValue;
  /** A run's value over its flows (what the comparison judges), when it is compared. */
  readonly run?: RunValue;
}

const sum = (values: (number | null | undefined)[]) => combineHeadline({ combine: 'sum' }, values);
/** The worst flow's value: a path is as slow as its slowest flow. */
const worst = (pick: FlowValue): RunValue => (_, run) => combineHeadline({ combine: 'worst' }, run.flows.map(pick));
/** Summed over the flows whose own test has this headline (throughput of stream flows, transactions of rr flows). */
const headlineSum = (name: 'bitsPerSecond' | 'transactionsPerSecond'): RunValue => (spec, run) => {
  const flows = run.flows.filter((f) => kindOf(flowSpec(spec, f.flowIndex)).headline.name === name);
  return sum(flows.map((f) => kindOf(flowSpec(spec, f.flowIndex)).headline.flowValue(f)));
};

const of = (name: string): Figure => {
  const found = figure(name);
  if (!found) throw new Error(`figures/columns.ts: no figure ${name} in the catalogue`);
  return found;
};

/** A column of flow values: `run` combines them as the figure does over flows. */
const column = (name: string, label: string, figureName: string, flow: FlowValue | undefined, run?: RunValue): Column => ({ name, label, figure: of(figureName), ...(flow ? { flow } : {}), ...(run ? { run } : {}) });

export const COLUMNS: readonly Column[] = [
  column('bitsPerSecond', 'throughput', 'bitsPerSecond', (f) => f.bitsPerSecond, headlineSum('bitsPerSecond')),
  column('transactionsPerSecond', 'transactions', 'transactionsPerSecond', (f) => f.rr?.transactionsPerSecond, headlineSum('transactionsPerSecond')),
  column('rttP50Seconds', 'round-trip median', 'rrRttSeconds', (f) => roundTrips(f)?.p50, worst((f) => roundTrips(f)?.p50)),
  column('rttP90Seconds', 'round-trip p90', 'rrRttSeconds', undefined, worst((f) => roundTrips(f)?.p90)),
  column('rttP99Seconds', 'round-trip p99', 'rrRttSeconds', (f) => roundTrips(f)?.p99, worst((f) => roundTrips(f)?.p99)),
  column('idleRttP50Seconds', 'idle round-trip median', 'rrRttSeconds', (f) => idleRoundTrips(f)?.p50, worst((f) => idleRoundTrips(f)?.p50)),
  column('idleRttP99Seconds', 'idle round-trip p99', 'rrRttSeconds', (f) => idleRoundTrips(f)?.p99, worst((f) => idleRoundTrips(f)?.p99)),
  column('udpLossRatio', 'UDP loss', 'udpLossRatio', (f) => f.udp?.lossRatio, (_, run) => {
    // Datagrams lost over datagrams sent, all UDP flows together.
    const udp = run.flows.map((f) => f.udp).filter((u) => u !== null);
    const sent = udp.reduce((a, u) => a + u.sent, 0);
    return udp.length && sent > 0 ? udp.reduce((a, u) => a + u.lost, 0) / sent : null;
  }),
  column('jitterSeconds', 'jitter', 'jitterSeconds', (f) => f.udp?.jitterSeconds, worst((f) => f.udp?.jitterSeconds)),
  column('retransmits', 'retransmits', 'retransmits', (f) => f.retransmits, (_, run) => sum(run.flows.map((f) => f.retransmits))),
  column('cpuSecondsPerGigabit', 'CPU per gigabit', 'cpuSecondsPerGigabit', undefined, (spec, run) => {
    // Both ends' CPU over the bits the receivers got, throughput flows only (an rr flow moves few bits for its CPU).
    const flows = run.flows.filter((f) => kindOf(flowSpec(spec, f.flowIndex)).headline.name === 'bitsPerSecond' && f.sender && f.receiver);
    const bits = flows.reduce((a, f) => a + f.receiver!.bytes * 8, 0);
    return bits > 0 ? flows.reduce((a, f) => a + f.sender!.cpuSeconds + f.receiver!.cpuSeconds, 0) / (bits / 1e9) : null;
  }),
  column('probeLossRatio', 'probe loss', 'probeLossRatio', undefined, (_, run) => {
    // Probe datagrams that never came back over those sent, all probe flows together (under load).
    const phases = run.flows.map((f) => f.probe?.loaded).filter((p) => p !== undefined);
    const sent = phases.reduce((a, p) => a + p.sent, 0);
    return sent > 0 ? phases.reduce((a, p) => a + p.lost.total, 0) / sent : null;
  }),
  column('ipdvP99Seconds', 'IPDV p99', 'probeIpdvSeconds', undefined, worst((f) => f.probe?.loaded.ipdvSeconds.roundTrip.p99)),
  column('forwardDelayP99Seconds', 'forward delay p99', 'probeOneWayDelaySeconds', undefined, worst((f) => f.probe?.loaded.oneWayDelaySeconds?.forward.p99)),
  column('returnDelayP99Seconds', 'return delay p99', 'probeOneWayDelaySeconds', undefined, worst((f) => f.probe?.loaded.oneWayDelaySeconds?.return.p99)),
  column('senderCpuSeconds', 'sender CPU', 'endCpuSeconds', (f) => f.sender?.cpuSeconds),
  column('receiverCpuSeconds', 'receiver CPU', 'endCpuSeconds', (f) => f.receiver?.cpuSeconds),
  column('senderServiceDemand', 'sender service demand', 'serviceDemand', (f) => f.sender?.serviceDemand?.microsecondsPerKilobyte),
  column('receiverServiceDemand', 'receiver service demand', 'serviceDemand', (f) => f.receiver?.serviceDemand?.microsecondsPerKilobyte),
  column('sourceDiskBitsPerSecond', 'source disk', 'diskReadBitsPerSecond', (f) => f.file?.source?.disk?.bitsPerSecond),
  column('sinkDiskBitsPerSecond', 'sink disk', 'diskWriteBitsPerSecond', (f) => f.file?.sink?.disk?.bitsPerSecond),
];

/** The column of a name, or undefined. */
export function columnOf(name: string): Column | undefined {
  return COLUMNS.find((c) => c.name === name);
}

/**
 * The figures the history keeps of each flow of a run (its summary in /v1/results, the CSV and
 * OpenMetrics exports): these columns, read off the flow as a report leg reads them.
 */
export const HISTORY_COLUMN_NAMES = ['bitsPerSecond', 'retransmits', 'udpLossRatio', 'jitterSeconds', 'transactionsPerSecond', 'rttP50Seconds'] as const;
export type HistoryColumnName = (typeof HISTORY_COLUMN_NAMES)[number];
export const HISTORY_COLUMNS: readonly Column[] = HISTORY_COLUMN_NAMES.map((name) => {
  const found = COLUMNS.find((c) => c.name === name);
  if (!found?.flow) throw new Error(`figures/columns.ts: the history's ${name} is no per-flow column`);
  return found;
});

/** A flow's history figures, as the catalogue's columns read them (null where the flow has none). */
export function historyFigures(flow: FlowResult): Record<HistoryColumnName, number | null> {
  return Object.fromEntries(HISTORY_COLUMNS.map((c) => [c.name, c.flow!(flow) ?? null])) as Record<HistoryColumnName, number | null>;
}
