/**
 * What a 202 or 201 promises beside Sentinel: the write is on `redisWaitReplicas` replicas
 * (Redis WAIT) before it is acknowledged, so a failover that follows loses nothing the API
 * acknowledged. WAIT blocks the connection it runs on and counts the replicas that have that
 * connection's own last write, so it runs on a connection of its own (not the one every
 * request shares) after a small write there, which the replicas get after every write the
 * request made before it. It does not make the write durable on the replica's disk (Redis 7.0
 * has no WAITAOF): a replica that is killed too before it writes its AOF can still lose it.
 */
import type { Redis } from 'ioredis';
import { HttpProblem } from '@niclab/shared/runtime/problem';
import type { Config } from '@niclab/shared/runtime/config';
import type { Keys } from '@niclab/shared/stores/keys';
import { waitForReplicas, type Written } from '@niclab/shared/stores/replication';

/** Waits until the write that made `written` is on the replicas, or throws the 503. */
export async function replicated({ config, waiter, keys }: { config: Config; waiter: Redis | null; keys: Keys }, written: Written): Promise<void> {
  if (!waiter) return;
  const confirmed = await waitForReplicas(waiter, keys, config.redisWaitReplicas, config.redisWaitMs, written);
  if (confirmed < config.redisWaitReplicas) {
    throw new HttpProblem(503, 'not-replicated', `The write reached ${confirmed} of the ${config.redisWaitReplicas} Redis replicas it must be on within ${config.redisWaitMs} ms (a failover under way?); it may or may not have been kept. Send it again (with the same Idempotency-Key, a job is not made twice).`, [], { headers: { 'Retry-After': '1' } });
  }
}
