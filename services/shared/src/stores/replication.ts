/**
 * Redis WAIT for an acknowledged write (api/durability.ts): on a connection of its own, after a
 * write there (WAIT waits for the connection's own last write, which the replicas get after
 * every write made before it). Returns how many replicas confirmed within `timeoutMs`.
 *
 * The write itself went by another connection, so `written` (a key it made) must be on the
 * waiter's server first: in a failover the two connections can be on two masters for a moment,
 * and a WAIT on the new one would vouch for a write left on the old. None confirmed, then.
 */
import type { Redis } from 'ioredis';
import type { Keys } from './keys.js';

/** What the write made, by which its server is known: a job (its id), a schedule (its name), an interface's lease (agent, interface). */
export type Written = ['job', string] | ['schedule', string] | ['lease', string, string];

export async function waitForReplicas(waiter: Redis, keys: Keys, replicas: number, timeoutMs: number, written: Written): Promise<number> {
  const [kind, ...names] = written;
  const key = (keys[kind] as (...names: string[]) => string).call(keys, ...names);
  if ((await waiter.exists(key)) === 0) return 0;
  await waiter.incr(keys.replicationMark);
  return waiter.wait(replicas, timeoutMs);
}
