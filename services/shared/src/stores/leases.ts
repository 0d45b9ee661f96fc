import type { Redis } from 'ioredis';
import type { Keys } from './keys.js';
import { defineScript, type Script } from '../runtime/redis.js';

/** Takes every key or none: free keys, or keys this holder already has, are (re)set with the TTL. */
const ACQUIRE = `
--[[
  KEYS[1..n]  the leases, keys.lease(agent, interface)
  ARGV[1]     the holder: a run id
  ARGV[2]     the TTL in ms
  Returns 0 when every lease is now the holder's, else the index of the first another holds.
]]
for i, key in ipairs(KEYS) do
  local holder = redis.call('GET', key)
  if holder and holder ~= ARGV[1] then return i end
end
for _, key in ipairs(KEYS) do redis.call('SET', key, ARGV[1], 'PX', ARGV[2]) end
return 0
`;

/**
 * The same, first come first served: the job joins each interface's queue (keeping the time it
 * first joined), and takes the leases only when every one is free and it is first in every
 * queue. A waiter that stopped asking (its coordinator died) leaves its queues when its time
 * is up. One job's places are all set in one call with one time, so the queues agree on the
 * order: the earliest waiter is first everywhere it waits, and two jobs cannot wait for each other.
 */
const ACQUIRE_IN_TURN = `
--[[
  KEYS[1..n]      the leases, keys.lease(agent, interface)
  KEYS[n+1..2n]   their queues, keys.leaseQueue(agent, interface)
  KEYS[2n+1..3n]  when each waiter there is gone, keys.leaseQueueAlive(agent, interface)
  ARGV[1]         the holder: a run id
  ARGV[2]         the TTL in ms
  ARGV[3]         the waiting job
  ARGV[4]         when it began to wait (epoch ms): its place in the queues
  ARGV[5]         how long it stays in a queue without asking again (ms)
  Returns 0 when every lease is now the holder's (or already was); i when another run holds
  lease i; -i when an earlier waiter is first in queue i (two that began to wait in the same
  millisecond: by job id).
]]
local n = #KEYS / 3
-- Asked again after it already took them (a reply lost to a reconnect, the command resent): it holds them.
local mine = true
for i = 1, n do if redis.call('GET', KEYS[i]) ~= ARGV[1] then mine = false end end
if mine then
  for i = 1, n do
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
    redis.call('ZREM', KEYS[n + i], ARGV[3])
    redis.call('HDEL', KEYS[2 * n + i], ARGV[3])
  end
  return 0
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local job, stay = ARGV[3], tonumber(ARGV[5])
for i = 1, n do
  local queue, alive = KEYS[n + i], KEYS[2 * n + i]
  local entries = redis.call('HGETALL', alive)
  for j = 1, #entries, 2 do
    if tonumber(entries[j + 1]) < now then redis.call('HDEL', alive, entries[j]); redis.call('ZREM', queue, entries[j]) end
  end
  redis.call('ZADD', queue, 'NX', ARGV[4], job)
  redis.call('HSET', alive, job, now + stay)
  redis.call('PEXPIRE', queue, stay * 2)
  redis.call('PEXPIRE', alive, stay * 2)
end
for i = 1, n do
  local holder = redis.call('GET', KEYS[i])
  if holder and holder ~= ARGV[1] then return i end
end
for i = 1, n do
  if redis.call('ZRANGE', KEYS[n + i], 0, 0)[1] ~= job then return -i end
end
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  redis.call('ZREM', KEYS[n + i], job)
  redis.call('HDEL', KEYS[2 * n + i], job)
end
return 0
`;

/** Takes a job out of the queues it waits in (it was canceled, or stopped waiting). */
const LEAVE = `
--[[
  KEYS[1..n]      the queues, keys.leaseQueue(agent, interface)
  KEYS[n+1..2n]   their waiters' times, keys.leaseQueueAlive(agent, interface)
  ARGV[1]         the job
]]
local n = #KEYS / 2
for i = 1, n do redis.call('ZREM', KEYS[i], ARGV[1]); redis.call('HDEL', KEYS[n + i], ARGV[1]) end
return n
`;

/** A job waiting for leases in turn: who it is, since when, and how long its place is kept without its asking again. */
export interface Waiter {
  job: string;
  /** When it began to wait (epoch ms): a job's first run, its submission; a later one, the moment it asks. */
  since: number;
  stayMs: number;
}

/**
 * Extends keys this holder still has, and takes back free ones (a Redis restarted from its AOF
 * may have lost the last second's SET); a key another holder has is never touched.
 */
const RENEW = `
--[[
  KEYS[1..n]  the leases, keys.lease(agent, interface)
  ARGV[1]     the holder: a run id
  ARGV[2]     the TTL in ms
  Returns how many of the leases the holder has now.
]]
local n = 0
for _, key in ipairs(KEYS) do
  local holder = redis.call('GET', key)
  if holder == ARGV[1] then redis.call('PEXPIRE', key, ARGV[2]); n = n + 1
  elseif not holder then redis.call('SET', key, ARGV[1], 'PX', ARGV[2]); n = n + 1 end
end
return n
`;

/** Releases only keys this holder still has: a stale holder never touches a newer one's lease. */
const RELEASE = `
--[[
  KEYS[1..n]  the leases, keys.lease(agent, interface)
  ARGV[1]     the holder: a run id
  Returns how many leases were released.
]]
local n = 0
for _, key in ipairs(KEYS) do
  if redis.call('GET', key) == ARGV[1] then redis.call('DEL', key); n = n + 1 end
end
return n
`;

export interface LeaseTarget {
  agent: string;
  interface: string;
}

/**
 * Interface leases: a run holds one on every (agent, interface) it touches, so runs that share
 * an interface never overlap. Leases carry a TTL that the holder renews; a holder that dies
 * lets them expire.
 */
export class Leases {
  private readonly acquireScript: Script;
  private readonly inTurnScript: Script;
  private readonly leaveScript: Script;
  private readonly renewScript: Script;
  private readonly releaseScript: Script;

  /** How often a holder renews: three chances before the TTL runs out. */
  readonly renewEveryMs: number;

  constructor(private readonly redis: Redis, private readonly keys: Keys, readonly ttlMs = 15_000) {
    this.renewEveryMs = ttlMs / 3;
    this.acquireScript = defineScript(redis, 'niclabLeaseAcquire', ACQUIRE);
    this.inTurnScript = defineScript(redis, 'niclabLeaseAcquireInTurn', ACQUIRE_IN_TURN);
    this.leaveScript = defineScript(redis, 'niclabLeaseLeave', LEAVE);
    this.renewScript = defineScript(redis, 'niclabLeaseRenew', RENEW);
    this.releaseScript = defineScript(redis, 'niclabLeaseRelease', RELEASE);
  }

  /** The targets without repeats: an interface named twice in a run (both ends on lo) is one lease. */
  distinct(targets: LeaseTarget[]): LeaseTarget[] {
    return [...new Map(targets.map((t) => [`${t.agent}\u0000${t.interface}`, t])).values()];
  }

  private keyList(targets: LeaseTarget[]): string[] {
    return this.distinct(targets).map((t) => this.keys.lease(t.agent, t.interface));
  }

  /** Each distinct target's queue and its waiters' times, in the targets' order. */
  private queueKeys(unique: LeaseTarget[]): { queues: string[]; alive: string[] } {
    return { queues: unique.map((t) => this.keys.leaseQueue(t.agent, t.interface)), alive: unique.map((t) => this.keys.leaseQueueAlive(t.agent, t.interface)) };
  }

  /**
   * All or nothing. Returns null when held, else the first target someone else holds and who.
   * With a waiter, in turn: first come first served on each interface (`waitingBehind` is then
   * the job first in the queue of the target it waits for, when no run holds that one).
   */
  async acquire(holder: string, targets: LeaseTarget[], waiter?: Waiter): Promise<{ target: LeaseTarget; heldBy: string | null; waitingBehind?: string } | null> {
    const unique = this.distinct(targets);
    const { queues, alive } = this.queueKeys(unique);
    const blocked = waiter
      ? await this.inTurnScript([...this.keyList(unique), ...queues, ...alive], holder, this.ttlMs, waiter.job, waiter.since, waiter.stayMs)
      : await this.acquireScript(this.keyList(unique), holder, this.ttlMs);
    if (blocked === 0) return null;
    const target = unique[Math.abs(blocked) - 1]!;
    if (blocked < 0) return { target, heldBy: null, waitingBehind: (await this.redis.zrange(queues[-blocked - 1]!, 0, 0))[0] ?? '' };
    return { target, heldBy: await this.redis.get(this.keys.lease(target.agent, target.interface)) };
  }

  /** Takes the job out of the targets' queues: it waits no more (canceled, or its run is over). */
  async leave(job: string, targets: LeaseTarget[]): Promise<void> {
    const unique = this.distinct(targets);
    if (unique.length === 0) return;
    const { queues, alive } = this.queueKeys(unique);
    await this.leaveScript([...queues, ...alive], job);
  }

  /** The jobs waiting for one interface, first to last. */
  queue(target: LeaseTarget): Promise<string[]> {
    return this.redis.zrange(this.keys.leaseQueue(target.agent, target.interface), 0, -1);
  }

  /** How many of the targets this holder still holds after extending them. */
  async renew(holder: string, targets: LeaseTarget[]): Promise<number> {
    return this.renewScript(this.keyList(targets), holder, this.ttlMs);
  }

  /** Who holds the lease on one interface now (a run id), or null. */
  holderOf(target: LeaseTarget): Promise<string | null> {
    return this.redis.get(this.keys.lease(target.agent, target.interface));
  }

  /** Who holds the lease on each target now (a run id, or null), in the targets' order. */
  async holders(targets: LeaseTarget[]): Promise<(string | null)[]> {
    return targets.length === 0 ? [] : this.redis.mget(...targets.map((t) => this.keys.lease(t.agent, t.interface)));
  }

  /** How many of the targets some run holds now. */
  async countHeld(targets: LeaseTarget[]): Promise<number> {
    const keys = this.keyList(targets);
    return keys.length === 0 ? 0 : this.redis.exists(...keys);
  }

  async release(holder: string, targets: LeaseTarget[]): Promise<number> {
    return this.releaseScript(this.keyList(targets), holder);
  }
}
