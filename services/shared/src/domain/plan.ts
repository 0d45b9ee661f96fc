import type { JobSpec, SweepPoint } from './contract.js';
import type { EngineParams, Leg } from './task.js';
import { kindOf, TEST_KINDS } from './test-kinds/index.js';
import { flowSpec } from './flow-tests.js';
import { CONFIDENCE } from './statistics.js';
import { fileAt } from './file-io/spec.js';

export interface PlannedRun {
  index: number;
  point: SweepPoint;
  repetition: number;
  /** A group's run carries one pair: its index in `spec.flows`. */
  pair?: number;
  /** Seconds of load when its campaign chose them (an MLRsearch trial's duration); else the job's `duration`. */
  duration?: number;
  /** An MLRsearch's latency run after its search, at this fraction of the PDR's conditional throughput: the job's flows, then a probe beside each. */
  latencyAt?: number;
}

/** The latency probe that goes beside a flow on its path (test `probe`, the builtin engine, its defaults). */
const probeBeside = (flow: JobSpec['flows'][number]): JobSpec['flows'][number] => ({ from: flow.from, to: flow.to, test: { kind: 'probe', engine: 'builtin' } });

/** The spec one run carries out: a group's run carries its pair alone, a trial its own duration, a latency run a probe beside each flow. */
export function runSpec(spec: JobSpec, plan: Pick<PlannedRun, 'pair' | 'duration' | 'latencyAt'>): JobSpec {
  const chosen = plan.pair === undefined ? spec.flows : [spec.flows[plan.pair]!];
  const flows = plan.latencyAt === undefined ? chosen : [...chosen, ...chosen.map(probeBeside)];
  if (plan.duration === undefined) return plan.pair === undefined && plan.latencyAt === undefined ? spec : { ...spec, flows };
  return { ...spec, flows, duration: plan.duration, ...(spec.interval !== undefined && spec.interval > plan.duration ? { interval: plan.duration } : {}) };
}

/**
 * In sweep order, the outermost first: each MTU's runs together, as a person would make them;
 * `io` inner, so each file point follows its memory point. The last, `tuned`, is no sweep's: a
 * factorial's cell (campaigns/factorial.ts), innermost.
 */
export const DIMENSIONS = ['mtu', 'direction', 'bufferLength', 'socketBuffer', 'streams', 'noDelay', 'packetSize', 'rate', 'requestSize', 'responseSize', 'io', 'tuned'] as const;
export type Dimension = (typeof DIMENSIONS)[number];

/** A dimension's list in the spec's sweep (undefined for one not swept, and for a campaign's own, as `tuned`). */
export function sweptValues(spec: Pick<JobSpec, 'sweep'>, dimension: Dimension): readonly unknown[] | undefined {
  return dimension === 'tuned' ? undefined : spec.sweep?.[dimension];
}

/** How many runs a point gets: `min` always, up to `max` while the interval is too wide. */
export interface Repetitions {
  min: number;
  max: number;
  adaptive: { confidence: number; halfWidthPercent: number } | null;
}

export function repetitions(spec: JobSpec): Repetitions {
  const repeat = spec.repeat;
  if (typeof repeat === 'number') return { min: repeat, max: repeat, adaptive: null };
  return { min: repeat.min, max: repeat.max, adaptive: { confidence: repeat.confidence ?? CONFIDENCE, halfWidthPercent: repeat.halfWidthPercent ?? 2.5 } };
}

/** The same point, as a stable key (runs of one point share it). */
export function pointKey(point: SweepPoint): string {
  return JSON.stringify(DIMENSIONS.filter((d) => point[d] !== undefined).map((d) => [d, point[d]]));
}

/** The sweep's cartesian product in a stable order. */
export function sweepPoints(spec: JobSpec): SweepPoint[] {
  let points: SweepPoint[] = [{}];
  for (const dimension of DIMENSIONS) {
    const values = sweptValues(spec, dimension);
    if (!values || values.length === 0) continue;
    points = points.flatMap((point) => values.map((value) => ({ ...point, [dimension]: value }) as SweepPoint));
  }
  return points;
}

/**
 * Every run the job may make, each point's repetitions in a row. With adaptive repetition a
 * point's runs beyond `min` are made only while its interval is still too wide.
 */
export function planRuns(spec: JobSpec): PlannedRun[] {
  const runs: PlannedRun[] = [];
  const { max } = repetitions(spec);
  for (const point of sweepPoints(spec)) {
    for (let repetition = 1; repetition <= max; repetition++) runs.push({ index: runs.length, point, repetition });
  }
  return runs;
}

/** Seconds between interval samples: as asked, else 1 s, or the whole run when it is shorter. */
export function intervalOf(spec: Pick<JobSpec, 'interval' | 'duration'>): number {
  return spec.interval ?? Math.min(1, spec.duration);
}

/**
 * The parameters an engine sees for one sweep point; with `flowIndex`, for that flow (its own
 * test's values win over the job's and the sweep's).
 */
export function paramsAt(job: JobSpec, at: SweepPoint, flowIndex?: number): EngineParams {
  const own = flowIndex === undefined ? undefined : job.flows[flowIndex]?.test;
  const spec = flowIndex === undefined ? job : flowSpec(job, flowIndex);
  // A flow's own test fixes what it sets, its kind's block among them: the sweep does not move those.
  const pinned = own ? [...Object.keys(own), ...TEST_KINDS[own.kind].pinned(own)] : [];
  const point = own ? (Object.fromEntries(Object.entries(at).filter(([d]) => !pinned.includes(d))) as SweepPoint) : at;
  const params: EngineParams = {
    protocol: spec.protocol,
    test: spec.test,
    duration: spec.duration,
    bufferLength: point.bufferLength ?? spec.bufferLength,
    streams: point.streams ?? spec.streams,
    noDelay: point.noDelay ?? spec.noDelay,
    interval: intervalOf(spec),
  };
  const socketBuffer = point.socketBuffer ?? spec.socketBuffer;
  if (socketBuffer !== undefined) params.socketBuffer = socketBuffer;
  if (spec.udp) {
    params.udp = { packetSize: point.packetSize ?? spec.udp.packetSize, rate: point.rate ?? spec.udp.rate };
  }
  const file = fileAt(spec, point);
  if (file) params.file = file;
  const kind = kindOf(spec);
  // A latency flow's idle baseline is part of its own run: it starts with the run, the load after it.
  const idle = flowIndex !== undefined && kind.latency && job.idleBaseline ? { duration: params.duration + job.idleBaseline, idleSeconds: job.idleBaseline } : {};
  return { ...params, ...kind.params(spec, point), ...idle };
}

/** The directions a run at `point` carries data in: the swept one, else the spec's. */
export function directionAt(spec: JobSpec, point: SweepPoint): JobSpec['direction'] {
  return point.direction ?? spec.direction;
}

/** The legs of a run at a sweep point: every flow's data direction(s), all started together. */
export function legsOf(spec: JobSpec, point: SweepPoint = {}): Leg[] {
  const at = directionAt(spec, point);
  const directions: Leg['direction'][] = at === 'bidir' ? ['forward', 'reverse'] : [at];
  return spec.flows.flatMap((flow, flowIndex) =>
    directions.map((direction) => ({
      flowIndex,
      direction,
      sender: direction === 'forward' ? flow.from : flow.to,
      receiver: direction === 'forward' ? flow.to : flow.from,
    })),
  );
}

/** A sweep point as the seeds write it: `bufferLength=10240 socketBuffer=8192`, or `-` for none. */
export function pointLabel(point: SweepPoint): string {
  const parts = DIMENSIONS.filter((d) => point[d] !== undefined).map((d) => {
    const value = point[d];
    return `${d}=${typeof value === 'object' ? ('packetsPerSecond' in value ? `${value.packetsPerSecond}pps` : `${value.bitsPerSecond}bps`) : String(value)}`;
  });
  return parts.length ? parts.join(' ') : '-';
}
