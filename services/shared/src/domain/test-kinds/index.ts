import type { JobSpec } from '../contract.js';
import type { TestKind, TestName } from './kind.js';
import { probeKind } from './probe.js';
import { rrKind } from './rr.js';
import { streamKind } from './stream.js';

export type { Headline, TestKind, TestName } from './kind.js';

/** Every test kind, by name: one line each. */
export const TEST_KINDS: Record<TestName, TestKind> = {
  stream: streamKind,
  rr: rrKind,
  probe: probeKind,
};

/** The kind a spec asks for. */
export function kindOf(spec: Pick<JobSpec, 'test'>): TestKind {
  return TEST_KINDS[spec.test];
}
