/**
 * Redis WAIT for an acknowledged write (api/durability.ts): on a connection of its own, after a
 * write there (WAIT waits for the connection's own last write, which the replicas get after
 * every write made before it). Returns how many replicas confirmed within `timeoutMs`.
 */
import type { Redis } from 'ioredis';
import type { Keys } from './keys.js';

export async function waitForReplicas(waiter: Redis, keys: Keys, replicas: number, timeoutMs: number): Promise<number> {
  await waiter.incr(keys.replicationMark);
  return waiter.wait(replicas, timeoutMs);
}
