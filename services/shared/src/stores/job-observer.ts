import type { Job, JobStatus, Run } from '../domain/contract.js';

/**
 * What else must happen when a job moves or a run ends: /metrics' counts (MetricStore), the
 * history (Results), the live events (JobEventPublisher). JobStore calls each one, in the order
 * given, after its own write; whoever builds the store passes them in.
 */
export interface JobObserver {
  jobMoved?(job: Job, to: JobStatus): Promise<void>;
  runEnded?(job: Job, run: Run): Promise<void>;
  progressed?(jobId: string, runsDone: number, runsTotal: number): Promise<void>;
  /** The job reached a terminal status; `runs()` reads all of its runs, once, for an observer that needs them. */
  jobEnded?(job: Job, runs: () => Promise<Run[]>): Promise<void>;
}
