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
 * What a run fails with when a message of it never arrived: a task, a receiver's reply, an end's
 * report. A Redis failover loses what the old master had acknowledged but not yet passed to its
 * replica, so a run that failed so across a gap of Redis failed for niclab's store, not the lab.
 */
const WANT_OF_A_MESSAGE = new Set(['deadline_exceeded', 'no_report', 'peer_unavailable']);

/** The run's error, as store_interrupted when Redis went away during it and a message never came. */
export function storeInterrupted(run: Pick<Run, 'status' | 'error'>, redisGap: boolean): ErrorInfo | null {
  if (run.status !== 'failed' || !run.error || !redisGap || !WANT_OF_A_MESSAGE.has(run.error.code)) return run.error;
  return { code: 'store_interrupted', message: `Redis went away during the run (a failover or a restart), and then: ${run.error.message}` };
}

/**
 * How a run ended, from its flows and what stopped it. `stopped` is the reason the job's signal
 * gave (a cancel, or the coordinator's shutdown), `failure` what went wrong around the flows
 * (an agent offline or lost, a receiver that never started), `redisGap` whether Redis went away
 * during the run.
 */
export function runOutcome(flows: FlowResult[], stopped: ErrorInfo | null, failure: ErrorInfo | null, redisGap = false): Pick<Run, 'status' | 'error'> {
  if (stopped?.code === SHUTDOWN.code) return { status: 'interrupted', error: { code: SHUTDOWN.code, message: 'interrupted by a coordinator shutdown; it runs again when the job resumes' } };
  if (stopped) return { status: 'canceled', error: stopped };
  const error = failure ?? pickError(flows.map((f) => f.error));
  return error ? { status: 'failed', error: storeInterrupted({ status: 'failed', error }, redisGap) } : { status: 'succeeded', error: null };
}
