import type { ErrorInfo, FlowResult, Run } from '@niclab/shared/domain/contract';
import { RUN_ERRORS } from '@niclab/shared/domain/run-errors';

/** The abort reason of a coordinator that is stopping: its job is interrupted, not ended. */
export const SHUTDOWN: ErrorInfo = { code: 'coordinator_shutdown', message: 'the coordinator is shutting down' };
/**
 * The abort reason of a coordinator that lost its hold on a job (its lock lapsed, as in an
 * event loop stalled past it): another coordinator has the job now, so this one keeps nothing.
 */
export const JOB_LOST: ErrorInfo = { code: 'coordinator_lost', message: 'this coordinator lost its hold on the job (its lock lapsed): another coordinator runs it now' };

/** Of several ends' errors, the one that explains the others: a cause first, a consequence last. */
export function pickError(errors: (ErrorInfo | null | undefined)[]): ErrorInfo | null {
  const present = errors.filter((e): e is ErrorInfo => !!e);
  const kind = (e: ErrorInfo) => RUN_ERRORS[e.code] as { cause?: boolean; consequence?: boolean };
  return present.find((e) => kind(e).cause) ?? present.find((e) => !kind(e).consequence) ?? present[0] ?? null;
}

/**
 * How a run ended, from its flows and what stopped it. `stopped` is the reason the job's signal
 * gave (a cancel, or the coordinator's shutdown), `failure` what went wrong around the flows
 * (an agent offline or lost, a receiver that never started).
 */
export function runOutcome(flows: FlowResult[], stopped: ErrorInfo | null, failure: ErrorInfo | null): Pick<Run, 'status' | 'error'> {
  if (stopped?.code === SHUTDOWN.code) return { status: 'interrupted', error: { code: SHUTDOWN.code, message: 'interrupted by a coordinator shutdown; it runs again when the job resumes' } };
  if (stopped) return { status: 'canceled', error: stopped };
  const error = failure ?? pickError(flows.map((f) => f.error));
  return { status: error ? 'failed' : 'succeeded', error };
}
