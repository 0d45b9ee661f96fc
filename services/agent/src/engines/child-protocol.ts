import type { Interval } from '@niclab/shared/domain/contract';
import type { RunErrorCode } from '@niclab/shared/domain/run-errors';

/**
 * The one protocol between the agent and a builtin engine's process, for both sides: the agent
 * (child.ts) sends the input as the first IPC message; the child (builtin/child-main.ts) answers
 * with these, ending on one `result` or `error`.
 */
export type ChildMessage<R> =
  | { type: 'ready'; port: number }
  /** A sender has loaded and warmed its code, and waits for the run's start. */
  | { type: 'armed' }
  | { type: 'interval'; interval: Interval }
  | { type: 'result'; result: R }
  | { type: 'error'; error: { code: ChildErrorCode; message: string } };

/** The run errors an engine process ends with. */
export type ChildErrorCode = Extract<RunErrorCode, 'connect_failed' | 'no_data' | 'engine_failed' | 'file_io'>;

/** A failure an engine process names itself (no data under the load, say): its code reaches the run as is. */
export class EngineFailure extends Error {
  constructor(readonly code: ChildErrorCode, message: string) {
    super(message);
  }
}

/** The errnos of a connection that could not be made. */
const CONNECT_FAILURES = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ETIMEDOUT']);

/** The code an engine process's error ends its run with: its own, a failed connection's, or engine_failed. */
export function childErrorCode(error: Error & { code?: string }): ChildErrorCode {
  if (error instanceof EngineFailure) return error.code;
  return CONNECT_FAILURES.has(error.code ?? '') ? 'connect_failed' : 'engine_failed';
}
