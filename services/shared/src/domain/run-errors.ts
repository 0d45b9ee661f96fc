import type { ErrorInfo } from './contract.js';

/** Whose side a run error is on: how a lab engineer goes about it. */
export type Fault = 'user' | 'engine' | 'host' | 'lab' | 'niclab';

export interface RunErrorKind {
  /** What happened, for the README and the contract. */
  meaning: string;
  /** A job's `retries` makes a run that failed this way again: the failure was outside the measurement. */
  retryable: boolean;
  fault: Fault;
  /** Explains its peer's failure: an end whose agent went away makes the other end fail too. */
  cause?: boolean;
  /** A consequence of another failure: a root cause is reported in preference. */
  consequence?: boolean;
  /** niclab's own outage, not the lab's: made again STORE_REMAKES times without counting against `retries`; past that, only as one of them. */
  remade?: boolean;
}

/** How many times a run is made again because Redis went away under it (store_interrupted). */
export const STORE_REMAKES = 2;

/**
 * Every error code a job, a run or a flow can carry: one table, read by the retry policy, by
 * pickError, and by the test that keeps openapi.yaml's RunErrorCode enum equal to it.
 */
export const RUN_ERRORS = {
  canceled: { meaning: 'The job was canceled, or the run abandoned, before it ended.', retryable: false, fault: 'user', consequence: true },
  deadline_exceeded: { meaning: "The run passed its deadline (duration + setup allowance); its processes were killed.", retryable: false, fault: 'lab', consequence: true },
  no_data: { meaning: 'No data came through: the receiver saw its sender close without any, or a request/response or probe flow got no round trip back under the load.', retryable: false, fault: 'lab', consequence: true },
  no_report: { meaning: "An end did not report before the run's deadline.", retryable: false, fault: 'niclab', consequence: true },
  agent_shutdown: { meaning: "An end's agent was stopped during the run.", retryable: false, fault: 'host', cause: true },
  agent_lost: { meaning: "An agent missed its heartbeats (or deregistered) during the run.", retryable: true, fault: 'host', cause: true },
  agent_offline: { meaning: 'An agent of the run was offline when the run was to start.', retryable: true, fault: 'host' },
  peer_unavailable: { meaning: 'A receiver did not start within half the setup allowance.', retryable: true, fault: 'host' },
  coordinator_lost: { meaning: 'The coordinator running the attempt died; another resumed the job.', retryable: false, fault: 'niclab' },
  store_interrupted: { meaning: "Redis failed over or restarted during the run, and the run then failed for want of a message (a task, a receiver's reply or an end's report that the old master had not passed on): the message gives the failure. The run is made again twice without counting against retries; past that, only as one of the job's retries.", retryable: false, fault: 'niclab', remade: true },
  coordinator_shutdown: { meaning: 'A coordinator shutdown interrupted the run; it is made again when the job resumes.', retryable: false, fault: 'niclab' },
  connect_failed: { meaning: 'The sender could not connect to its receiver.', retryable: false, fault: 'lab' },
  engine_failed: { meaning: 'The engine failed; the diagnostics hold its command line and output.', retryable: false, fault: 'engine' },
  engine_unavailable: { meaning: "The agent does not have the job's engine.", retryable: false, fault: 'host' },
  invalid_task: { meaning: 'The agent refused a task that did not pass its own checks.', retryable: false, fault: 'niclab' },
  interface_missing: { meaning: "The agent no longer has the named interface.", retryable: false, fault: 'host' },
  interface_down: { meaning: 'The named interface is down.', retryable: false, fault: 'host' },
  no_address: { meaning: 'The named interface has no address to bind to.', retryable: false, fault: 'host' },
  tuning_failed: { meaning: "The job's tuning could not be applied on an end's host.", retryable: false, fault: 'host' },
  path_mtu: { meaning: "The path did not carry the run's MTU with don't-fragment set: the message names the largest size that passed and who refused (diagnostics.sender.pathMtu).", retryable: false, fault: 'lab', cause: true },
  file_refused: { meaning: "An end could not use the job's file: its agent has no file directory, the source is missing, empty, not a regular file or outside the directory (a symlink out of it), or the sink's temporary file could not be made; the message says which.", retryable: false, fault: 'user', cause: true },
  file_io: { meaning: "Reading the source or writing the sink failed mid-run (an I/O error, the file system full, the engine wrote less than it received, the sink's synchronous attribute refused), or an end's disk probe did.", retryable: false, fault: 'host', cause: true },
  enqueue_failed: { meaning: 'The job was stored but could not be queued.', retryable: false, fault: 'niclab' },
  not_runnable: { meaning: "A schedule's firing could not run its spec against the inventory of the moment.", retryable: false, fault: 'user' },
  over_limit: { meaning: "A schedule's firing broke its owner's policy limits (its group grew past maxRunsPerJob, or the policy changed); the message names the limit.", retryable: false, fault: 'user' },
  search_inconclusive: { meaning: "A search could not conclude: a trial niclab could not make (void on every attempt: its own sender or receiving host was the limit, or the run failed), or its trial-seconds reached searchDurationMax; the message says which, at which point.", retryable: false, fault: 'niclab' },
  runs_failed: { meaning: "Some of the job's runs failed (the first one's error is in the message).", retryable: false, fault: 'lab' },
} as const satisfies Record<string, RunErrorKind>;

export type RunErrorCode = keyof typeof RUN_ERRORS;

export function isRunErrorCode(code: unknown): code is RunErrorCode {
  return typeof code === 'string' && Object.hasOwn(RUN_ERRORS, code);
}

/** An error from an abort reason or another process's message: its code if we know it, else `fallback`. */
export function toRunError(value: unknown, fallback: RunErrorCode, fallbackMessage: string): ErrorInfo {
  const candidate = value as { code?: unknown; message?: unknown } | null | undefined;
  const code = isRunErrorCode(candidate?.code) ? candidate.code : fallback;
  const message = typeof candidate?.message === 'string' ? candidate.message : fallbackMessage;
  return { code, message };
}
