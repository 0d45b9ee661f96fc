import { createHash, randomUUID } from 'node:crypto';
import type { Job } from '@niclab/shared/domain/contract';
import type { JobStore } from '@niclab/shared/stores/job-store';
import { HttpProblem } from '@niclab/shared/runtime/problem';
import type { IdempotencyKeys } from '@niclab/shared/stores/request-stores';

/** JSON with object keys sorted, so the same body hashes the same whatever its key order. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

/**
 * How long a request may still be making its job: past it, a key taken by a request that never
 * answered (its API died, or a Redis failover kept only the start of what it wrote) is the
 * retry's to finish. A request makes its job within milliseconds of taking the key (the API's
 * Redis commands fail after two reconnects); what follows, the wait for replicas, is harmless
 * to overlap, since the retry answers the same job.
 */
export const PENDING_MS = 15_000;

const inProgress = () => new HttpProblem(409, 'idempotency-in-progress', 'A request with this Idempotency-Key is still being handled; retry shortly.', [], { headers: { 'Retry-After': '1' } });

/**
 * Runs `create` once per (owner, key): a retry with the same body gets the job the first
 * request created; another body is 422; a duplicate while the first is still being handled
 * is 409. A first request that fails forgets the key, so it can be retried. One that never
 * answered leaves its key pending: once PENDING_MS have passed, a retry takes over its job if
 * it was made (queued again by `requeue`, which must be harmless when it is queued already:
 * its queue entry may be what was lost), or makes it.
 */
export async function idempotent(
  deps: { idempotencyKeys: IdempotencyKeys; store: JobStore; requeue(job: Job): Promise<void> },
  owner: string,
  key: string,
  body: unknown,
  create: (id: string) => Promise<Job>,
  now: () => number = Date.now,
): Promise<{ job: Job; replayed: boolean }> {
  const keys = deps.idempotencyKeys;
  const keyHash = sha256(key);
  const bodyHash = sha256(canonical(body));
  for (let attempt = 0; attempt < 3; attempt++) {
    const id = randomUUID();
    if (await keys.claim(owner, keyHash, bodyHash, id, now())) {
      try {
        const job = await create(id);
        await keys.remember(owner, keyHash, { body: bodyHash, jobId: job.id });
        return { job, replayed: false };
      } catch (error) {
        await keys.forget(owner, keyHash);
        throw error;
      }
    }
    const remembered = await keys.recall(owner, keyHash);
    if (remembered === null) continue; // the first request failed and let go of the key just now
    if (remembered.body !== bodyHash) {
      throw HttpProblem.invalid([{ field: 'header.idempotency-key', message: 'was used with a different body; use a new key for a new job' }], 'The Idempotency-Key belongs to another request.');
    }
    const pending = remembered.pending !== undefined || !remembered.jobId;
    if (pending && !(remembered.jobId && now() - remembered.pending! >= PENDING_MS)) throw inProgress();
    const job = await deps.store.get(remembered.jobId!);
    if (job && pending) {
      await deps.requeue(job);
      await keys.remember(owner, keyHash, { body: bodyHash, jobId: job.id });
    }
    if (job) return { job, replayed: true };
    // Deleted by retention, or never made by a request that died: the key may create anew.
    await keys.forget(owner, keyHash);
  }
  throw inProgress();
}
