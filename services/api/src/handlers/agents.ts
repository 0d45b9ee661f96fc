import type { Agent } from '@niclab/shared/domain/contract';
import type { Leases } from '@niclab/shared/stores/leases';
import { HttpProblem } from '@niclab/shared/runtime/problem';
import { expandGroup, groupErrors } from '@niclab/shared/domain/groups';
import { planRounds } from '@niclab/shared/domain/rounds';
import type { Handler } from '../handler.js';

/** The agents with each interface's lease holder now (`leasedBy`: a run id, or null). */
async function withLeases(agents: Agent[], leases: Leases): Promise<Agent[]> {
  const holders = await leases.holders(agents.flatMap((a) => a.interfaces.map((i) => ({ agent: a.id, interface: i.name }))));
  let n = 0;
  return agents.map((a) => ({ ...a, interfaces: a.interfaces.map((i) => ({ ...i, leasedBy: holders[n++] ?? null })) }));
}

export const listAgents: Handler<'listAgents'> = async (_request, { agents, leases }) => ({ status: 200, body: { items: await withLeases(await agents.list(), leases) } });

export const getAgent: Handler<'getAgent'> = async ({ params }, { agents, leases }) => {
  const agent = await agents.get(params.id);
  if (!agent) throw HttpProblem.notFound(`Agent ${params.id}`);
  const [withLease] = await withLeases([agent], leases);
  return { status: 200, body: withLease! };
};

/** What a group expands to now: pairs, rounds and skipped members, nothing run. */
export const previewGroup: Handler<'previewGroup'> = async ({ body }, { agents }) => {
  const errors = groupErrors(body, 'body');
  if (errors.length > 0) throw HttpProblem.invalid(errors, 'The group cannot be expanded as specified.');
  const { pairs, skipped } = expandGroup(body, await agents.list());
  return { status: 200, body: { pairs, rounds: planRounds(pairs), skipped } };
};
