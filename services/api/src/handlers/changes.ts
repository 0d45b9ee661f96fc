import { HttpProblem } from '@niclab/shared/runtime/problem';
import { CHANGE_FORMATS, reply } from '../formats.js';
import { defaulted, type Handler } from '../handler.js';

const DAY_MS = 24 * 3600 * 1000;

export const listChanges: Handler<'listChanges'> = async ({ query }, { changes }) => {
  const since = query.since ? Date.parse(query.since) : Date.now() - 30 * DAY_MS;
  if (query.cursor && !(await changes.get(query.cursor))) throw HttpProblem.invalid([{ field: 'query.cursor', message: 'is no change point (give the `next` of a page)' }]);
  const page = await changes.query({
    since, limit: defaulted(query.limit, 'limit'), after: query.cursor,
    schedule: query.schedule, agent: query.agent, interface: query.interface, figure: query.figure,
  });
  return { status: 200, body: page };
};

export const acknowledgeChange: Handler<'acknowledgeChange'> = async ({ params: { id }, body, principal }, { changes }) => {
  const change = await changes.acknowledge(id, body.as, body.note ?? '', principal.name);
  if (!change) throw HttpProblem.notFound(`Change point ${id}`);
  return { status: 200, body: change };
};

export const getChange: Handler<'getChange'> = async ({ params: { id }, query }, { changes }) => {
  const change = await changes.get(id);
  if (!change) throw HttpProblem.notFound(`Change point ${id}`);
  const points = await changes.series(change);
  if (query.format && query.format !== 'json') return reply(await CHANGE_FORMATS[query.format]({ change, points }));
  return { status: 200, body: { change, points } };
};
