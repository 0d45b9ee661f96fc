import type { EventEmitter } from 'node:events';
import { MISSED_HEARTBEATS, type AgentRegistry } from '@niclab/shared/stores/agent-registry';
import type { Agent, ErrorInfo } from '@niclab/shared/domain/contract';
import type { Logger } from '@niclab/shared/runtime/logger';

/** How often a running run checks that its agents are still alive. */
const LIVENESS_CHECK_MS = 1000;
/** A check that waited on Redis this long was a Redis gap: heartbeats could not be written either. */
const REDIS_STALL_MS = 2000;

/** Each of `ids` once, with its registry record (null when it never registered). */
async function agentsOf(registry: AgentRegistry, ids: string[]): Promise<{ id: string; agent: Agent | null }[]> {
  const unique = [...new Set(ids)];
  const agents = await Promise.all(unique.map((id) => registry.get(id)));
  return unique.map((id, i) => ({ id, agent: agents[i] ?? null }));
}

/** The agents of `ids` that are not online now (missed heartbeats, or stopped). */
export async function offlineAgents(registry: AgentRegistry, ids: string[]): Promise<string[]> {
  return (await agentsOf(registry, ids)).filter(({ agent }) => !agent?.online).map(({ id }) => id);
}

/**
 * What one Redis connection's own events say of its gaps: closed or reconnecting until ready
 * again. One per connection, listening once, read by every running run's watch (each used to
 * listen itself, which a group's many runs at once took past the emitter's listener limit).
 */
export class RedisGaps {
  /** The connection is down now (closed or reconnecting, not yet ready). */
  down = false;
  /** When it last went down or came back (epoch ms). */
  lastGapAt = 0;

  constructor(connection: EventEmitter) {
    const down = () => {
      this.down = true;
      this.lastGapAt = Date.now();
    };
    connection.on('close', down).on('reconnecting', down).on('ready', () => {
      this.down = false;
      this.lastGapAt = Date.now();
    });
  }

  /** Whether the connection went away at or after `since` (epoch ms), or is away now. */
  since(since: number): boolean {
    return this.down || this.lastGapAt >= since;
  }
}

/**
 * Watches a run's agents: when one dies mid-run (missed heartbeats, or it stopped), `signal`
 * aborts with agent_lost, so the run ends at once rather than at its deadline.
 *
 * While Redis is unreachable no agent can write its heartbeat, so a heartbeat that went stale
 * then is Redis's gap, not the agent's. The gap is what this process's connection saw (closed,
 * reconnecting, until ready again) or a check that failed or waited on Redis for
 * REDIS_STALL_MS; after it, an agent counts as lost only once its heartbeats have had their
 * full window (MISSED_HEARTBEATS of them) with Redis answering. An agent that said it stopped
 * is lost at once. (A Redis killed and restarted under 60 jobs lost one to agent_lost before,
 * twice: with no gap detection, then with only the stalled check's.)
 */
export class LivenessWatch {
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  /** Redis last failed or stalled one of this watch's checks at this time (epoch ms). */
  private redisGapAt = 0;

  constructor(private readonly registry: AgentRegistry, private readonly agents: string[], private readonly log: Logger, private readonly redisGaps?: RedisGaps) {}

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  start(): this {
    this.timer = setInterval(() => {
      const asked = Date.now();
      agentsOf(this.registry, this.agents).then(
        (agents) => {
          const now = Date.now();
          if (now - asked > REDIS_STALL_MS) this.redisGapAt = now;
          if (this.controller.signal.aborted || this.redisGaps?.down) return;
          const gapAt = Math.max(this.redisGapAt, this.redisGaps?.lastGapAt ?? 0);
          const offline = agents.filter(({ agent }) => {
            if (!agent) return true;
            if (agent.online) return false;
            const window = MISSED_HEARTBEATS * agent.heartbeatSeconds * 1000;
            // Offline while its last heartbeat is within the window: it said it stopped.
            const stopped = now - Date.parse(agent.lastSeen) <= window;
            return stopped || now - gapAt > window;
          }).map(({ id }) => id);
          if (offline.length === 0) return;
          this.log.warn({ agents: offline }, 'agent lost mid-run');
          const reason: ErrorInfo = { code: 'agent_lost', message: `agent ${offline.join(', ')} stopped answering during the run (no heartbeat for ${MISSED_HEARTBEATS} intervals, or it shut down)` };
          this.controller.abort(reason);
        },
        () => {
          // Redis unreachable: the deadline still bounds the run.
          this.redisGapAt = Date.now();
        },
      );
    }, LIVENESS_CHECK_MS);
    return this;
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
