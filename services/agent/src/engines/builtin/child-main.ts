/** What both builtin engine processes share: the IPC entry point and their CPU clock. */

export type Send = (message: unknown) => void;

/** User + system CPU seconds of this process since `since`. */
export function cpuSeconds(since: NodeJS.CpuUsage): number {
  const used = process.cpuUsage(since);
  return (used.user + used.system) / 1e6;
}

const CONNECT_FAILURES = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ETIMEDOUT']);

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
    const answer = (message: unknown) => process.send?.(message, undefined, {}, () => process.disconnect?.());
    run(input, send).then(
      (result) => answer({ type: 'result', result }),
      (error: Error & { code?: string }) => {
        const code = CONNECT_FAILURES.has(error.code ?? '') ? 'connect_failed' : error.code === 'no_data' ? 'no_data' : 'engine_failed';
        answer({ type: 'error', error: { code, message: `${input.role}: ${error.message}` } });
      },
    );
  });
  // The agent died or let go of us: never outlive the run.
  process.on('disconnect', () => process.exit(0));
}
