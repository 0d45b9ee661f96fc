import { HttpProblem } from '@niclab/shared/runtime/problem';
import { expandGroup, groupErrors } from '@niclab/shared/domain/groups';
import { planRounds } from '@niclab/shared/domain/rounds';
import type { Handler } from '../handler.js';

export const listAgents: Handler<'listAgents'> = async (_request, { agents }) => ({ status: 200, body: { items: await agents.list() } });

export const getAgent: Handler<'getAgent'> = async ({ params }, { agents }) => {
  const agent = await agents.get(params.id);
  if (!agent) throw HttpProblem.notFound(`Agent ${params.id}`);
  return { status: 200, body: agent };
};

/** What a group expands to now: pairs, rounds and skipped members, nothing run. */
export const previewGroup: Handler<'previewGroup'> = async ({ body }, { agents }) => {
  const errors = groupErrors(body, 'body');
  if (errors.length > 0) throw HttpProblem.invalid(errors, 'The group cannot be expanded as specified.');
  const { pairs, skipped } = expandGroup(body, await agents.list());
  return { status: 200, body: { pairs, rounds: planRounds(pairs), skipped } };
};
