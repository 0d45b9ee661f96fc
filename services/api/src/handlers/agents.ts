import { HttpProblem } from '@niclab/shared/runtime/problem';
import type { Handler } from '../handler.js';

export const listAgents: Handler<'listAgents'> = async (_request, { agents }) => ({ status: 200, body: { items: await agents.list() } });

export const getAgent: Handler<'getAgent'> = async ({ params }, { agents }) => {
  const agent = await agents.get(params.id);
  if (!agent) throw HttpProblem.notFound(`Agent ${params.id}`);
  return { status: 200, body: agent };
};
