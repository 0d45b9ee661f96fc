import type { FieldError, FlowResult, JobSpec, SweepPoint } from '../contract.js';
import type { EndReport, EngineParams } from '../task.js';

export type TestName = JobSpec['test'];

/** A flow's own test (`flows[].test`): its kind, and the parameters it sets over the job's. */
export type FlowTest = NonNullable<JobSpec['flows'][number]['test']>;

/** The figure a run is judged by: over its flows (`combine`), with its units for JSON and for tables. */
export interface Headline {
  name: 'bitsPerSecond' | 'transactionsPerSecond' | 'rttP50Seconds';
  /** Base unit, as in JSON. */
  unit: string;
  /** How tables show it: value / scale in `tableUnit`, with `digits` decimals. */
  table: { scale: number; unit: string; digits: number };
  /** One flow's share of the run's headline value (null when the flow measured none). */
  flowValue(flow: FlowResult): number | null | undefined;
  /**
   * The run's value from its flows' (at least one): a rate adds up over flows; a delay does not,
   * the run is as slow as its slowest path.
   */
  combine: 'sum' | 'worst';
}

/** A run's figure from its flows' values (the finite ones: a flow that measured none is left out); null when none measured it. */
export function combineHeadline(headline: Pick<Headline, 'combine'>, values: (number | null | undefined)[]): number | null {
  const present = values.filter((v): v is number => typeof v === 'number' && Number.isFinite(v));
  if (!present.length) return null;
  return headline.combine === 'sum' ? present.reduce((a, b) => a + b, 0) : Math.max(...present);
}

/**
 * A test kind: what is measured (a stream's throughput, request/response round trips), apart
 * from how (the engines). It owns its spec rules, its run parameters and its headline figure;
 * the rest of niclab asks it rather than branching on its name. Registered in test-kinds/index.ts.
 */
export interface TestKind {
  readonly name: TestName;
  /** How a sentence names it. */
  readonly phrase: string;
  /** Field errors of a spec of this kind beyond what the schema says (rules across fields). */
  specErrors(spec: JobSpec): FieldError[];
  /** The spec with defaults that depend on this kind filled in, so the stored job shows them. */
  withDefaults(spec: JobSpec): JobSpec;
  /** This kind's own engine parameters at a sweep point. */
  params(spec: JobSpec, point: SweepPoint): Partial<EngineParams>;
  /** This kind's fields alone: a flow of this kind in a job of another drops the others' (`udp`, `rr`, their sweeps). */
  ownFields(spec: JobSpec): JobSpec;
  /** It measures round trips, so its flows may take an idle baseline before the other flows load the path. */
  readonly latency: boolean;
  readonly headline: Headline;
  /** Its legs carry a load whose throughput a bottleneck verdict may judge (rr's and the probe's round trips do not). */
  readonly judgesThroughput: boolean;
  /** A rate search (RFC 2544) may drive it: it offers a UDP rate and measures loss. */
  readonly searchable: boolean;
  /** This kind's own parameter block of a spec (rr's sizes, the probe's interval and size), as a flow's stored test shows it. */
  ownBlock(spec: JobSpec): Partial<JobSpec>;
  /** The sweep dimensions that a flow's own test of this kind fixes inside its block (rr's request and response sizes). */
  pinned(own: FlowTest): string[];
  /**
   * This kind's own fields of one leg's result, merged from its two ends' reports (what each
   * end `measured`); an end that did not report is undefined.
   */
  result(sender: EndReport | undefined, receiver: EndReport | undefined): Partial<FlowResult>;
  /** The same fields on a leg of another kind: null, or absent. */
  readonly absent: Partial<FlowResult>;
}
