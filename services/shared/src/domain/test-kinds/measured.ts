/**
 * What one end measured for its test kind beyond the figures every kind has (bytes, CPU,
 * intervals): one slot, `measured`, from the engine's outcome through the end's report to the
 * kind's own merge of two ends (TestKind.result). A kind that measures nothing of its own (a
 * stream) adds no line here.
 */
import type { ProbeMeasured } from './probe/measured.js';
import type { RrMeasured } from './rr/measured.js';

export type Measured = RrMeasured | ProbeMeasured;
