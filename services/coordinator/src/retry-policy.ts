import type { Run } from '@niclab/shared/domain/contract';
import { RUN_ERRORS, STORE_REMAKES, type RunErrorKind } from '@niclab/shared/domain/run-errors';

export type EarlierAttempt = NonNullable<Run['earlierAttempts']>[number];

/**
 * A job's retry policy for one planned run: a run that failed for a reason outside the
 * measurement (RUN_ERRORS' `retryable`) is made again, a new run id at the same index, at most
 * `retries` times. An attempt lost with its coordinator is kept in the record but not counted;
 * so is one that failed because Redis went away under it (store_interrupted), made again up to
 * STORE_REMAKES times whatever `retries` says, and after those only as a retry the job has left.
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
    const kind: RunErrorKind = RUN_ERRORS[run.error.code];
    if (!kind.retryable && !kind.remade) return false;
    // A remade error is free STORE_REMAKES times; past them, and for a retryable one, the job's `retries` decides.
    const free = kind.remade === true && this.remade(run.error.code) < STORE_REMAKES;
    if (!free && this.retriesUsed() >= this.retries) return false;
    this.earlier.push({ id: run.id, startedAt: run.startedAt, finishedAt: run.finishedAt, error: run.error });
    return true;
  }

  private remade(code: string): number {
    return this.earlier.filter((e) => e.error.code === code).length;
  }

  /** The earlier attempts counted against `retries`: every retryable one, and each remade one past its STORE_REMAKES. */
  private retriesUsed(): number {
    const remakes = new Map<string, number>();
    let used = 0;
    for (const { error } of this.earlier) {
      const kind: RunErrorKind = RUN_ERRORS[error.code];
      if (kind.remade) {
        const n = (remakes.get(error.code) ?? 0) + 1;
        remakes.set(error.code, n);
        if (n > STORE_REMAKES) used++;
      } else if (kind.retryable) used++;
    }
    return used;
  }
}
