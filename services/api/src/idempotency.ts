import { createHash } from 'node:crypto';
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
 * Runs `create` once per (owner, key): a retry with the same body gets the job the first
 * request created; another body is 422; a duplicate while the first is still being handled
 * is 409. A first request that fails forgets the key, so it can be retried.
 */
export async function idempotent(
  deps: { idempotencyKeys: IdempotencyKeys; store: JobStore },
  owner: string,
  key: string,
  body: unknown,
  create: () => Promise<Job>,
): Promise<{ job: Job; replayed: boolean }> {
  const keys = deps.idempotencyKeys;
  const keyHash = sha256(key);
  const bodyHash = sha256(canonical(body));
  for (let attempt = 0; attempt < 3; attempt++) {
    if (await keys.claim(owner, keyHash, bodyHash)) {
      try {
        const job = await create();
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
    if (!remembered.jobId) throw new HttpProblem(409, 'idempotency-in-progress', 'A request with this Idempotency-Key is still being handled; retry shortly.');
    const job = await deps.store.get(remembered.jobId);
    if (job) return { job, replayed: true };
    await keys.forget(owner, keyHash); // the job was deleted by retention: the key may create anew
  }
  throw new HttpProblem(409, 'idempotency-in-progress', 'A request with this Idempotency-Key is still being handled; retry shortly.');
}
