import type { Run } from '@niclab/shared/domain/contract';
import { RUN_ERRORS, STORE_REMAKES, type RunErrorKind } from '@niclab/shared/domain/run-errors';

export type EarlierAttempt = NonNullable<Run['earlierAttempts']>[number];

/**
 * A job's retry policy for one planned run: a run that failed for a reason outside the
 * measurement (RUN_ERRORS' `retryable`) is made again, a new run id at the same index, at most
 * `retries` times. An attempt lost with its coordinator is kept in the record but not counted;
 * so is one that failed because Redis went away under it (store_interrupted), made again up to
 * STORE_REMAKES times whatever `retries` says.
 */
export class RetryPolicy {
  readonly earlier: EarlierAttempt[];

  constructor(private readonly retries: number, lostWithCoordinator?: Run) {
    this.earlier = lostWithCoordinator
      ? [...(lostWithCoordinator.earlierAttempts ?? []), {
          id: lostWithCoordinator.id, startedAt: lostWithCoordinator.startedAt, finishedAt: null,
          error: { code: 'coordinator_lost', message: 'the coordinator running this attempt died (its hold on the job lapsed); the job was resumed by another' },
        }]
      : [];
  }

  /** Whether `run` earns another attempt; when it does, it is recorded as an earlier attempt. */
  again(run: Run): boolean {
    if (run.status !== 'failed' || !run.error) return false;
    const { code } = run.error;
    const kind: RunErrorKind = RUN_ERRORS[code];
    // A remade error counts its own earlier attempts against STORE_REMAKES; a retryable one, every retryable attempt against `retries`.
    const limit = kind.remade ? STORE_REMAKES : kind.retryable ? this.retries : 0;
    const counted = this.earlier.filter((e) => (kind.remade ? e.error.code === code : RUN_ERRORS[e.error.code].retryable)).length;
    if (counted >= limit) return false;
    this.earlier.push({ id: run.id, startedAt: run.startedAt, finishedAt: run.finishedAt, error: run.error });
    return true;
  }
}
