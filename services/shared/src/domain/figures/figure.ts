/**
 * What a figure is, declared once: its name, unit, which way is better, where its values can
 * lie, how it is computed and what independent figure it is checked against. The catalogue
 * (catalogue.ts) lists every figure niclab reports; the report, the CSV, the comparison, the
 * history, the metric families, the plots and the page read their units and directions there.
 */
import type { EngineName, JobSpec } from '../contract.js';

export type TestName = JobSpec['test'];

/** Base units, as in JSON. */
export type Unit =
  | 'bits/s'
  | 'B'
  | 's'
  | 'ratio'
  | 'datagrams'
  | 'datagrams/s'
  | 'segments'
  | 'frames'
  | 'transactions'
  | 'transactions/s'
  | 'calls'
  | 'calls/s'
  | 's/Gbit'
  | 's/bit'
  /** CPU microseconds per KB (1,024 B) moved: netperf's service demand. */
  | 'us/KB'
  | 'percent'
  | 'runs'
  | 'jobs'
  | 'count'
  | 'boolean'
  /** A point of a series of another figure, in that figure's unit (a change point's `unit` names it). */
  | 'the series figure'
  /** In the unit of the job's headline figure (bits/s for a stream job): a factorial's cells and contrasts (its `unit` names it). */
  | 'the headline figure';

/** How tables and plots show a value: value / scale in `unit`, with `digits` decimals. */
export interface Display {
  scale: number;
  unit: string;
  digits: number;
}

/**
 * Where a figure's values can lie (null: no bound that way). A statistic of repeated runs stays
 * inside it: the Student-t interval of a mean is cut to it and says so (`clipped-t`), so no
 * interval says a rate could be negative or a loss ratio above 1.
 */
export interface Domain {
  min: number | null;
  max: number | null;
}

/** The independent figure a figure is checked against, and the test that checks it. */
export interface Reference {
  /**
   * - `bare-tool`: the same measurement by bare iperf3 or irtt on the same path in the same run;
   * - `kernel`: the kernel's own NIC, qdisc or socket counters, read by the test itself;
   * - `closed-form`: a value worked out by hand on synthetic input;
   * - `arithmetic`: it is arithmetic of other figures; the test checks the arithmetic on a case
   *   worked by hand (it needs no reference of its own beyond theirs);
   * - `reference-code`: the algorithm's own reference implementation (Apache Otava's, run by
   *   the test) on the same input.
   */
  kind: 'bare-tool' | 'kernel' | 'closed-form' | 'arithmetic' | 'reference-code';
  /** What it is compared with, in words. */
  against: string;
  /** The test file, from the repository's root. */
  test: string;
  /** Words of the test's name (a substring of it), so the guard can find the very case. */
  case: string;
}

/** The questions every figure is asked (issue 26): the answers are part of its entry. */
export interface Answers {
  /** At a zero baseline or a zero denominator. */
  zero: string;
  /** Under bidir and reverse, and summed over directions. */
  directions: string;
  /** With streams > 1, several flows, and in a group. */
  flows: string;
  /** When the sender stalls, the receiver drops, or the run ends at its deadline. */
  stall: string;
  /** Payload or wire, frames or datagrams, IPv4 or IPv6. */
  wire: string;
}

/** One figure of the catalogue. */
export interface Figure {
  /** Its name, as the report, the CSV and the comparison spell it. */
  readonly name: string;
  /** What it means, in a sentence. */
  readonly meaning: string;
  readonly unit: Unit;
  readonly display: Display;
  /** Which way is better; null for a figure that is context (a count of calls, a size). */
  readonly better: 'higher' | 'lower' | null;
  readonly domain: Domain;
  /** Test kinds whose runs report it. */
  readonly kinds: readonly TestName[];
  /** Engines that produce it. */
  readonly engines: readonly EngineName[];
  /** How it is computed. */
  readonly computed: string;
  readonly reference: Reference;
  readonly answers: Answers;
  /**
   * The contract's numeric fields that carry it, as paths from a schema (`FlowResult.udp.lost`,
   * `Report.points[].flows[].bitsPerSecond`); `*` stands for one segment. A field whose schema is
   * a RepeatSummary carries the figure's statistics over repeated runs.
   */
  readonly fields: readonly string[];
  /** Metric families on /metrics that carry it. */
  readonly metrics?: readonly string[];
}
