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
  private readonly renewScript: Script;
  private readonly releaseScript: Script;

  /** How often a holder renews: three chances before the TTL runs out. */
  readonly renewEveryMs: number;

  constructor(private readonly redis: Redis, private readonly keys: Keys, readonly ttlMs = 15_000) {
    this.renewEveryMs = ttlMs / 3;
    this.acquireScript = defineScript(redis, 'niclabLeaseAcquire', ACQUIRE);
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

  /** All or nothing. Returns null when held, else the first target someone else holds and who. */
  async acquire(holder: string, targets: LeaseTarget[]): Promise<{ target: LeaseTarget; heldBy: string | null } | null> {
    const unique = this.distinct(targets);
    const blocked = await this.acquireScript(this.keyList(unique), holder, this.ttlMs);
    if (blocked === 0) return null;
    const target = unique[blocked - 1]!;
    return { target, heldBy: await this.redis.get(this.keys.lease(target.agent, target.interface)) };
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

  /** Marks `job` as waiting for `target`, for `ttlMs` (the waiter refreshes it while it waits). */
  async markWaiting(job: string, target: LeaseTarget, ttlMs: number): Promise<void> {
    await this.redis.set(this.keys.leaseWaiter(target.agent, target.interface), job, 'PX', ttlMs);
  }

  /** Whether a job other than `job` is waiting for any of the targets. */
  async othersWaiting(job: string, targets: LeaseTarget[]): Promise<boolean> {
    const keys = this.distinct(targets).map((t) => this.keys.leaseWaiter(t.agent, t.interface));
    return (await this.redis.mget(...keys)).some((waiter) => waiter !== null && waiter !== job);
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
