import type { FlowResult, JobSpec } from '../contract.js';
import type { TestKind, TestName } from './kind.js';
import { probeKind } from './probe/index.js';
import { rrKind } from './rr/index.js';
import { streamKind } from './stream/index.js';

export type { FlowTest, Headline, TestKind, TestName } from './kind.js';

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

/** Every kind's own result fields as a leg of another kind shows them (rr: null, probe: null): what a kind's result() then fills in. */
export const ABSENT_KIND_FIELDS: Partial<FlowResult> = Object.assign({}, ...Object.values(TEST_KINDS).map((kind) => kind.absent));
