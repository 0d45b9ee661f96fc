import { MISSED_HEARTBEATS, type AgentRegistry } from '@niclab/shared/stores/agent-registry';
import type { ErrorInfo } from '@niclab/shared/domain/contract';
import type { Logger } from '@niclab/shared/runtime/logger';

/** How often a running run checks that its agents are still alive. */
const LIVENESS_CHECK_MS = 1000;

/** The agents of `ids` that are not online now (missed heartbeats, or stopped). */
export async function offlineAgents(registry: AgentRegistry, ids: string[]): Promise<string[]> {
  const unique = [...new Set(ids)];
  const agents = await Promise.all(unique.map((id) => registry.get(id)));
  return unique.filter((_, i) => !agents[i]?.online);
}

/**
 * Watches a run's agents: when one dies mid-run (missed heartbeats, or it stopped), `signal`
 * aborts with agent_lost, so the run ends at once rather than at its deadline.
 */
export class LivenessWatch {
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout | undefined;

  constructor(private readonly registry: AgentRegistry, private readonly agents: string[], private readonly log: Logger) {}

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  start(): this {
    this.timer = setInterval(() => {
      offlineAgents(this.registry, this.agents).then(
        (offline) => {
          if (offline.length === 0 || this.controller.signal.aborted) return;
          this.log.warn({ agents: offline }, 'agent lost mid-run');
          const reason: ErrorInfo = { code: 'agent_lost', message: `agent ${offline.join(', ')} stopped answering during the run (no heartbeat for ${MISSED_HEARTBEATS} intervals, or it shut down)` };
          this.controller.abort(reason);
        },
        () => undefined, // Redis unreachable: the deadline still bounds the run
      );
    }, LIVENESS_CHECK_MS);
    return this;
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
