/** What both builtin engine processes share: the IPC entry point and their CPU clock. */
import type { CpuTime } from '@niclab/shared/domain/figures';
import { childErrorCode, type ChildMessage } from '../child-protocol.js';

/** Sends one of the protocol's messages before the answer (ready, armed, an interval). */
export type Send = (message: Exclude<ChildMessage<never>, { type: 'result' | 'error' }>) => void;

/** User and system CPU seconds of this process since `since`. */
export function cpuSeconds(since: NodeJS.CpuUsage): CpuTime {
  const used = process.cpuUsage(since);
  return { user: used.user / 1e6, system: used.system / 1e6 };
}

/** No CPU used (an end that never started its clock). */
export const NO_CPU: CpuTime = { user: 0, system: 0 };

/**
 * Runs this process as one end of a leg: the first IPC message is the input, the answer is
 * one `result` or `error` message (after any `ready`), and the process never outlives the
 * agent that started it.
 */
export function serveChild<I extends { role: string }>(run: (input: I, send: Send) => Promise<unknown>): void {
  process.once('message', (input: I) => {
    const send: Send = (message) => process.send?.(message);
    // Let go of the agent only once the answer is written: disconnecting at once can close the
    // pipe before the queued write, and the agent then sees an exit without a result.
    const answer = (message: ChildMessage<unknown>) => process.send?.(message, undefined, {}, () => process.disconnect?.());
    run(input, send).then(
      (result) => answer({ type: 'result', result }),
      (error: Error & { code?: string }) => answer({ type: 'error', error: { code: childErrorCode(error), message: `${input.role}: ${error.message}` } }),
    );
  });
  // The agent died or let go of us: never outlive the run.
  process.on('disconnect', () => process.exit(0));
}
