import type { JobSpec } from '@niclab/shared/contract';
import type { Engine, EngineOutcome } from '../engine.js';
import { runNodeChild, siblingScript } from '../child.js';
import type { TcpChildInput, TcpChildResult } from './tcp-child.js';

const script = siblingScript(import.meta.url, 'tcp-child');

/** nttcp-style TCP written in TypeScript; each end runs in its own process so its CPU time is its own. */
export const builtinEngine: Engine = {
  name: 'builtin',

  async probe() {
    return { available: true, version: `niclab builtin (node ${process.version})` };
  },

  canRun(spec: JobSpec) {
    const reasons: string[] = [];
    if (spec.protocol !== 'tcp') reasons.push('the builtin engine does not do UDP yet');
    if (spec.test !== 'stream') reasons.push('the builtin engine does not do request/response (rr) tests yet');
    if (spec.socketBuffer !== undefined || spec.sweep?.socketBuffer) reasons.push('the builtin engine cannot set socket buffer sizes yet');
    return reasons;
  },

  async run(task, context): Promise<EngineOutcome> {
    const input: TcpChildInput = { role: task.role, params: task.params, address: context.address };
    if (task.role === 'sender') {
      input.peer = task.peer;
      input.startAt = task.startAt;
    }
    let port: number | null = task.role === 'sender' ? task.peer.port : null;
    const outcome = await runNodeChild<TcpChildResult>(script, input, context.signal, (listening) => {
      port = listening;
      context.ready(listening);
    }, context.spawned);
    return {
      figures: outcome.result?.figures ?? null,
      intervals: outcome.result?.intervals ?? [],
      error: outcome.error,
      command: outcome.argv,
      port,
      startedAt: outcome.result?.startedAt ?? null,
    };
  },
};
