/**
 * What a 202 or 201 promises beside Sentinel: the write is on `redisWaitReplicas` replicas
 * (Redis WAIT) before it is acknowledged, so a failover that follows loses nothing the API
 * acknowledged. WAIT counts the replicas that have every write of this connection so far, and
 * the API's job store and its queue share the connection, so it covers the job's record and
 * its place in the queue. It does not make the write durable on the replica's disk (Redis 7.0
 * has no WAITAOF): a replica that is killed too before it writes its AOF can still lose it.
 */
import { HttpProblem } from '@niclab/shared/runtime/problem';
import type { ApiServices } from './services.js';

export async function replicated({ config, redis }: Pick<ApiServices, 'config' | 'redis'>): Promise<void> {
  if (config.redisWaitReplicas === 0) return;
  const acknowledged = await redis.wait(config.redisWaitReplicas, config.redisWaitMs);
  if (acknowledged < config.redisWaitReplicas) {
    throw new HttpProblem(503, 'not-replicated', `The write reached ${acknowledged} of the ${config.redisWaitReplicas} Redis replicas it must be on within ${config.redisWaitMs} ms (a failover under way?); it may or may not have been kept. Send it again (with the same Idempotency-Key, a job is not made twice).`, [], { headers: { 'Retry-After': '1' } });
  }
}
