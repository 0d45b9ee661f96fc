import type { Agent, FieldError, JobSpec } from '../contract.js';
import { legsOf } from '../plan.js';

/**
 * A job with `file` against the live inventory: every agent that sends at a file point reads
 * its source from its own file directory, every one that receives writes its sink there, so
 * each needs one (NICLAB_FILE_DIR, which it advertises as `fileDirectory`). Agents unknown or
 * offline are the inventory's own errors.
 */
export function fileInventoryErrors(spec: JobSpec, agents: Map<string, Agent>, root = 'body'): FieldError[] {
  const file = spec.file;
  if (!file) return [];
  const directions = spec.sweep?.direction ?? [spec.direction];
  const errors = new Map<string, FieldError>();
  const need = (agentId: string, field: 'source' | 'sink', what: string) => {
    const agent = agents.get(agentId);
    if (!agent?.online || agent.fileDirectory) return;
    errors.set(`${agentId}/${field}`, { field: `${root}.file.${field}`, message: `agent "${agentId}" has no file directory (NICLAB_FILE_DIR) to ${what}` });
  };
  for (const direction of directions) {
    for (const leg of legsOf(spec, { direction })) {
      const flow = `flow ${leg.flowIndex}${leg.direction === 'reverse' ? ' reverse' : ''}`;
      if (file.source !== undefined) need(leg.sender.agent, 'source', `read the source from (the sender of ${flow})`);
      if (file.sink) need(leg.receiver.agent, 'sink', `write the sink in (the receiver of ${flow})`);
    }
  }
  return [...errors.values()];
}
