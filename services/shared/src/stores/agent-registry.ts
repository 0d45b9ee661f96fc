import { randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Agent } from '../domain/contract.js';
import type { Keys } from './keys.js';
import { defineScript, type Script } from '../runtime/redis.js';

/** What an agent writes about itself; `online` and `lastSeen` are derived by readers. */
export type AgentRecord = Omit<Agent, 'online' | 'lastSeen'> & { stopped?: boolean };

/** An agent not seen for this many heartbeats is offline. */
export const MISSED_HEARTBEATS = 3;

/** Removes an agent last seen at or before ARGV[2] (ms); one that heartbeated since stays. */
const PRUNE = `
if redis.call('ZSCORE', KEYS[1], ARGV[1]) == false then return 0 end
if tonumber(redis.call('ZSCORE', KEYS[1], ARGV[1])) > tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('DEL', KEYS[2])
return 1`;

/**
 * A heartbeat: the agent's last-seen time (ARGV[2]) always, its record (ARGV[1]) only when it
 * differs from the one stored, and then the registry's revision is set to a value never used
 * before (ARGV[4], random): a counter could come back to a number a reader cached with other
 * records (a Redis restarted empty, or a failover to a replica behind, and as many writes since).
 * A heartbeat rewrote an unchanged 1 KB record every 5 s (a 1,000-agent fleet's 200 KB/s to the
 * AOF), and every scrape read the whole fleet's records again (bench/fleet.ts).
 */
const HEARTBEAT = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call('SET', KEYS[3], ARGV[4])
end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
return 1`;

/** The live inventory: one JSON record per agent and a sorted set of last-seen times. */
export class AgentRegistry {
  /**
   * Each agent as last read, with the JSON it was parsed from: a heartbeat rewrites an
   * unchanged record every few seconds, and parsing a 1,000-agent fleet's records (1 KB each)
   * and spreading them into agents took 22 of the 25 ms that list() cost each scrape
   * (bench/fleet.ts). A record is parsed again only when its JSON differs, and the agent is
   * the same object while its record, last-seen time and state are.
   */
  private parsed = new Map<string, Parsed>();
  /**
   * The records list() read last and the registry's revision before it read them: while the
   * revision is the same, no record was written anew since, and list() reads only the last-seen
   * times (an agent dropped leaves them, an agent new to them is read). Written by list() alone (a get() finishing late must not put an older
   * record into what list() trusts).
   */
  private listed: { revision: string; records: Map<string, Parsed> } | null = null;

  private readonly writeHeartbeat: Script;

  constructor(private readonly redis: Redis, private readonly keys: Keys) {
    this.writeHeartbeat = defineScript(redis, 'niclabAgentHeartbeat', HEARTBEAT);
  }

  /** The agent of `json` last seen at `lastSeenMs`, parsed and made only when something differs from the last read. */
  private agentOf(id: string, json: string, lastSeenMs: number, now: number, into: Map<string, Parsed>): Agent {
    const known = this.parsed.get(id);
    const entry: Parsed = known?.json === json ? known : parse(json);
    into.set(id, entry);
    const online = !entry.stopped && now - lastSeenMs <= MISSED_HEARTBEATS * entry.base.heartbeatSeconds * 1000;
    if (entry.agent?.online !== online || entry.lastSeenMs !== lastSeenMs) {
      entry.agent = { ...entry.base, online, lastSeen: new Date(lastSeenMs).toISOString() };
      entry.lastSeenMs = lastSeenMs;
    }
    return entry.agent;
  }

  async heartbeat(record: AgentRecord, now = Date.now()): Promise<void> {
    await this.writeHeartbeat([this.keys.agent(record.id), this.keys.agents, this.keys.agentsRevision], JSON.stringify(record), now, record.id, randomUUID());
  }

  /** Marks the agent stopped: it shows as offline at once instead of after three missed heartbeats. */
  async deregister(record: AgentRecord): Promise<void> {
    await this.heartbeat({ ...record, stopped: true });
  }

  /**
   * Drops the agents last seen at or before `cutoffMs` (NICLAB_AGENT_PRUNE_HOURS ago) and
   * returns their ids: their records and interfaces go, and with them their series. An agent
   * that heartbeats again registers again.
   */
  async prune(cutoffMs: number): Promise<string[]> {
    const ids = await this.redis.zrangebyscore(this.keys.agents, '-inf', cutoffMs);
    const pruned: string[] = [];
    for (const id of ids) {
      if ((await this.redis.eval(PRUNE, 2, this.keys.agents, this.keys.agent(id), id, cutoffMs)) === 1) pruned.push(id);
    }
    return pruned;
  }

  async get(id: string, now = Date.now()): Promise<Agent | null> {
    const [json, score] = await Promise.all([this.redis.get(this.keys.agent(id)), this.redis.zscore(this.keys.agents, id)]);
    if (!json || score === null) return null;
    return this.agentOf(id, json, Number(score), now, this.parsed);
  }

  /**
   * The registered agents among `ids`, as list() shows them: one round trip for any number,
   * whatever the fleet's size (a submission reads the agents its flows name, not every agent).
   */
  async some(ids: readonly string[], now = Date.now()): Promise<Agent[]> {
    const unique = [...new Set(ids)];
    if (unique.length === 0) return [];
    const [records, scores] = await Promise.all([this.redis.mget(unique.map((id) => this.keys.agent(id))), this.redis.zmscore(this.keys.agents, ...unique)]);
    return unique
      .map((_, i) => {
        const json = records[i];
        const score = scores[i];
        return json && score !== null && score !== undefined ? this.agentOf(unique[i]!, json, Number(score), now, this.parsed) : null;
      })
      .filter((agent): agent is Agent => agent !== null);
  }

  async list(now = Date.now()): Promise<Agent[]> {
    // The revision and the last-seen times at one instant (MULTI): records no older than both.
    const [revision, entries] = ((await this.redis.multi().get(this.keys.agentsRevision).zrange(this.keys.agents, 0, -1, 'WITHSCORES').exec()) ?? []).map(([error, value]) => {
      if (error) throw error;
      return value;
    }) as [string | null, string[]];
    const ids: string[] = [];
    const seen = new Map<string, number>();
    for (let i = 0; i < entries.length; i += 2) {
      ids.push(entries[i] as string);
      seen.set(entries[i] as string, Number(entries[i + 1]));
    }
    if (ids.length === 0) return [];
    const listed = this.listed;
    const unchanged = revision !== null && listed?.revision === revision && ids.every((id) => listed.records.has(id));
    const records = unchanged ? ids.map((id) => listed.records.get(id)!.json) : await this.redis.mget(ids.map((id) => this.keys.agent(id)));
    // The whole fleet was read: what is kept is what is registered now.
    const next = new Map<string, Parsed>();
    const agents = records
      .map((json, i) => (json ? this.agentOf(ids[i]!, json, seen.get(ids[i] as string) ?? 0, now, next) : null))
      .filter((agent): agent is Agent => agent !== null)
      .sort((a, b) => a.id.localeCompare(b.id));
    this.parsed = next;
    // A copy: get() and some() write into the parse cache, never into what list() trusts.
    if (!unchanged && revision !== null) this.listed = { revision, records: new Map(next) };
    return agents;
  }
}

/** A record as read: its JSON, what an agent shows of it, and the agent made of it last. */
interface Parsed {
  json: string;
  base: Omit<AgentRecord, 'stopped'>;
  stopped: boolean;
  agent?: Agent;
  lastSeenMs?: number;
}

function parse(json: string): Parsed {
  const { stopped, ...base } = JSON.parse(json) as AgentRecord;
  return { json, base, stopped: stopped === true };
}
