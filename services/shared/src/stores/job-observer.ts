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
  /** The job reached a terminal status; `runs` are all of its runs (read only when an observer asks). */
  jobEnded?(job: Job, runs: Run[]): Promise<void>;
}
