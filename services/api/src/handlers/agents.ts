import { HttpProblem } from '@niclab/shared/runtime/problem';
import type { Handler } from '../handler.js';

export const listAgents: Handler = async (_request, { agents }) => ({ status: 200, body: { items: await agents.list() } });

export const getAgent: Handler = async ({ params }, { agents }) => {
  const agent = await agents.get(params.id as string);
  if (!agent) throw HttpProblem.notFound(`Agent ${params.id}`);
  return { status: 200, body: agent };
};
