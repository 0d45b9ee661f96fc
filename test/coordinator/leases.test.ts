import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Redis } from 'ioredis';
import { Keys } from '@niclab/shared/stores/keys';
import { Leases } from '@niclab/shared/stores/leases';
import { waitFor } from '../helpers/processes.js';
import { redisPerFile, uniquePrefix } from '../helpers/redis.js';

let redis: Redis;
const D = { agent: 'D', interface: 'eth1' };
const A = { agent: 'A', interface: 'eth1' };

redisPerFile((client) => (redis = client));

test('a run takes all its interfaces or none, and says who holds the one it waits for', async () => {
  const leases = new Leases(redis, new Keys(uniquePrefix()));
  assert.equal(await leases.acquire('run-1', [A, D]), null);
  const blocked = await leases.acquire('run-2', [{ agent: 'B', interface: 'eth1' }, D]);
  assert.deepEqual(blocked, { target: D, heldBy: 'run-1' });
  // All or nothing: run-2 did not keep B while it waited for D.
  assert.equal(await leases.acquire('run-3', [{ agent: 'B', interface: 'eth1' }]), null);
  assert.equal(await leases.release('run-1', [A, D]), 2);
  assert.equal(await leases.acquire('run-2', [D]), null);
});

test('the same interface named twice in one run (both ends on lo) is one lease', async () => {
  const leases = new Leases(redis, new Keys(uniquePrefix()));
  const lo = { agent: 'local', interface: 'lo' };
  assert.equal(await leases.acquire('run-1', [lo, lo]), null);
  assert.equal(await leases.renew('run-1', [lo, lo]), 1);
});

test('a lease expires when its holder stops renewing, and the stale holder can neither renew nor release the new one', async () => {
  // Long enough that a loaded machine cannot stall past it between two commands; the expiry is
  // judged by Redis's own PTTL and by when the lease was first seen free, never by a fixed sleep.
  const ttlMs = 2000;
  const keys = new Keys(uniquePrefix());
  const leases = new Leases(redis, keys, ttlMs);
  const takenAt = Date.now();
  assert.equal(await leases.acquire('stale', [D]), null);
  const pttl = await redis.pttl(keys.lease(D.agent, D.interface));
  assert.ok(pttl > 0 && pttl <= ttlMs, `the lease carries the ${ttlMs} ms TTL (PTTL ${pttl})`);
  assert.deepEqual(await leases.acquire('fresh', [D]), { target: D, heldBy: 'stale' }, 'held while the TTL runs');
  // Redis never expires a key early, and a GET expires it at once when due: free within the TTL
  // plus 2 s for a loaded 2-core machine, never before it.
  const freedAt = await waitFor('the lease to expire', async () => ((await leases.holderOf(D)) === null ? Date.now() : null), ttlMs + 2000, 20);
  assert.ok(freedAt - takenAt >= ttlMs - 5, `expired ${freedAt - takenAt} ms after it was taken, before its ${ttlMs} ms TTL`);
  assert.equal(await leases.acquire('fresh', [D]), null, 'expired: the next run takes it');
  assert.equal(await leases.renew('stale', [D]), 0);
  assert.equal(await leases.release('stale', [D]), 0);
  assert.deepEqual(await leases.acquire('third', [D]), { target: D, heldBy: 'fresh' });
});

test('a renewal takes back a lease Redis lost (a restart from its AOF), but never one another run holds', async () => {
  const keys = new Keys(uniquePrefix());
  const leases = new Leases(redis, keys);
  assert.equal(await leases.acquire('run-1', [A, D]), null);
  await redis.del(keys.lease(D.agent, D.interface)); // lost, as the last second before a crash can be
  assert.equal(await leases.holderOf(D), null);
  assert.equal(await leases.renew('run-1', [A, D]), 2);
  assert.equal(await leases.holderOf(D), 'run-1');
  assert.ok((await redis.pttl(keys.lease(D.agent, D.interface))) > 0, 'taken back with its TTL');
  await redis.set(keys.lease(A.agent, A.interface), 'run-2');
  assert.equal(await leases.renew('run-1', [A, D]), 1);
  assert.equal(await leases.holderOf(A), 'run-2');
});
