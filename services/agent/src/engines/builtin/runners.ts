import type { TestName } from '@niclab/shared/domain/test-kinds/index';
import type { EngineParams } from '@niclab/shared/domain/task';

/** The builtin engine's processes, one script each (a sibling module of this one). */
export type RunnerScript = 'tcp-child' | 'udp-child' | 'rr-child' | 'probe-child';

/**
 * Which process runs each test kind, by kind: one line each. A kind's process gets the task's
 * parameters and answers with its figures and, in `measured`, what the kind merges itself.
 */
export const RUNNERS: Record<TestName, (params: EngineParams) => RunnerScript> = {
  stream: (params) => (params.protocol === 'udp' ? 'udp-child' : 'tcp-child'),
  rr: () => 'rr-child',
  // The probe is UDP whatever `protocol` says.
  probe: () => 'probe-child',
};
