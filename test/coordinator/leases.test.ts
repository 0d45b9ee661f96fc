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

test('in turn: waiters take an interface first come first served, whatever order they ask in; one that stops asking loses its place', async () => {
  const leases = new Leases(redis, new Keys(uniquePrefix()));
  assert.equal(await leases.acquire('run-0', [D]), null);
  // Four jobs begin to wait, one after the other; their names sort the other way round.
  const arrivals = ['job-d', 'job-c', 'job-b', 'job-a'];
  const waiters = arrivals.map((job, i) => ({ job, since: 1_000 + i, stayMs: 60_000 }));
  for (const w of waiters) assert.deepEqual(await leases.acquire(`run-${w.job}`, [D], w), { target: D, heldBy: 'run-0' });
  assert.deepEqual(await leases.queue(D), arrivals);
  assert.equal(await leases.release('run-0', [D]), 1);
  const granted: string[] = [];
  while (granted.length < arrivals.length) {
    // Each round every waiter asks, the latest arrival first: only the earliest may take it.
    const asking = waiters.filter((w) => !granted.includes(w.job)).reverse();
    const answers: Awaited<ReturnType<Leases['acquire']>>[] = [];
    for (const w of asking) answers.push(await leases.acquire(`run-${w.job}`, [D], w));
    const winners = asking.filter((_, i) => answers[i] === null);
    assert.equal(winners.length, 1, JSON.stringify(answers));
    const behind = answers.find((a) => a?.heldBy === null);
    if (behind) assert.equal(behind.waitingBehind, asking.at(-1)!.job, 'a waiter asking before its turn is told who is first');
    granted.push(winners[0]!.job);
    assert.equal(await leases.release(`run-${winners[0]!.job}`, [D]), 1);
  }
  assert.deepEqual(granted, arrivals);
  assert.deepEqual(await leases.queue(D), [], 'each left the queue as it took the lease');

  // Two interfaces: the earlier waiter is first in both queues, so neither job waits for the other.
  assert.equal(await leases.acquire('run-x', [A]), null);
  const early = { job: 'early', since: 5_000, stayMs: 60_000 };
  const late = { job: 'late', since: 5_001, stayMs: 60_000 };
  assert.deepEqual(await leases.acquire('run-early', [A, D], early), { target: A, heldBy: 'run-x' });
  assert.deepEqual(await leases.acquire('run-late', [D], late), { target: D, heldBy: null, waitingBehind: 'early' }, 'D is free, but early waits for it');
  await leases.release('run-x', [A]);
  assert.equal(await leases.acquire('run-early', [A, D], early), null);

  // A waiter that stops asking (its coordinator died) is out once its stay is over.
  await leases.release('run-early', [A, D]);
  const gone = { job: 'gone', since: 4_000, stayMs: 1500 };
  assert.equal(await leases.acquire('run-hold', [D]), null);
  await leases.acquire('run-gone', [D], gone);
  await leases.release('run-hold', [D]);
  assert.deepEqual(await leases.acquire('run-late', [D], late), { target: D, heldBy: null, waitingBehind: 'gone' });
  const took = await waitFor('the silent waiter to lose its place', async () => ((await leases.acquire('run-late', [D], late)) === null ? true : null), 5_000, 50);
  assert.equal(took, true);
  // Leaving: a canceled waiter is out at once, and the next one need not wait out its stay.
  assert.equal(await leases.acquire('run-busy', [A]), null);
  await leases.acquire('run-cancel', [A], { job: 'canceled', since: 7_000, stayMs: 60_000 });
  assert.deepEqual(await leases.queue(A), ['canceled']);
  await leases.leave('canceled', [A]);
  assert.deepEqual(await leases.queue(A), []);
  await leases.release('run-busy', [A]);
  assert.equal(await leases.acquire('run-next', [A], { job: 'next', since: 8_000, stayMs: 60_000 }), null);
  // Asked again after taking them (a resent command): it holds them, and is told so.
  assert.equal(await leases.acquire('run-next', [A], { job: 'next', since: 8_000, stayMs: 60_000 }), null);
});
