import type { ProbeFigures } from '../../contract.js';
import type { ReflectorCounts } from './stats.js';

/** What the far end of a probe counted. */
export interface ProbeReflector {
  loaded: ReflectorCounts;
  idle?: ReflectorCounts;
  rcvbufErrors: number | null;
  /** Whether its arrival times (the start of each dwell) were the kernel's timestamps or when it read them. */
  arrivalTimes?: 'kernel' | 'process';
}

/** What one end of a probe flow measured: the sending end its figures, the far end what it reflected. */
export type ProbeMeasured = { probe: ProbeFigures } | { reflector: ProbeReflector };
