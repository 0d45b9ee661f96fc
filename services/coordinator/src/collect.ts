import type { Redis } from 'ioredis';

/**
 * Pops replies from Redis lists until `done()` says enough, the deadline passes or the signal
 * aborts. Blocks in short slices so cancellation is noticed within a quarter second.
 */
export async function collect(
  connection: Redis,
  keys: string[],
  deadline: number,
  signal: AbortSignal,
  onItem: (key: string, value: string) => void,
  done: () => boolean,
): Promise<void> {
  while (!done() && !signal.aborted) {
    const left = deadline - Date.now();
    if (left <= 0) return;
    const reply = await connection.blpop(...keys, Math.min(0.25, left / 1000));
    if (reply) onItem(reply[0], reply[1]);
  }
}
