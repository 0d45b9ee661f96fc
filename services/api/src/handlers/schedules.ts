import { replicated } from '../durability.js';
import { HttpProblem } from '@niclab/shared/runtime/problem';
import { mayManage } from '../access.js';
import type { Handler } from '../handler.js';
import type { Principal } from '../policy.js';
import type { ApiServices } from '../services.js';

export const createSchedule: Handler<'createSchedule'> = async ({ body, principal }, services) => {
  const schedule = await services.schedules.create(body, principal);
  await replicated(services, ['schedule', schedule.name]);
  return { status: 201, body: schedule, headers: { Location: `/v1/schedules/${schedule.name}` } };
};

export const listSchedules: Handler<'listSchedules'> = async (_request, { schedules }) => ({ status: 200, body: { items: await schedules.list() } });

export const getSchedule: Handler<'getSchedule'> = async ({ params: { name } }, { schedules }) => {
  const schedule = await schedules.get(name);
  if (!schedule) throw HttpProblem.notFound(`Schedule ${name}`);
  return { status: 200, body: schedule };
};

/** A schedule the caller may change: its own, or any with the admin scope. */
async function managed(name: string, principal: Principal, { schedules }: ApiServices) {
  const schedule = await schedules.get(name);
  if (!schedule) throw HttpProblem.notFound(`Schedule ${name}`);
  if (!mayManage(principal, schedule.owner)) throw new HttpProblem(403, 'forbidden', `Schedule ${schedule.name} belongs to ${schedule.owner}; changing another's schedule needs the "admin" scope.`, [], { rule: 'owner' });
  return schedule;
}

export const deleteSchedule: Handler<'deleteSchedule'> = async ({ params: { name }, principal }, services) => {
  const schedule = await managed(name, principal, services);
  if (!(await services.schedules.remove(schedule.name))) throw HttpProblem.notFound(`Schedule ${schedule.name}`);
  return { status: 204 };
};

// One body serves both: the two operations take and answer the same.
const pausing = (paused: boolean): Handler<'pauseSchedule'> & Handler<'resumeSchedule'> => async ({ params: { name }, principal }, services) => {
  const schedule = await services.schedules.setPaused((await managed(name, principal, services)).name, paused);
  if (!schedule) throw HttpProblem.notFound(`Schedule ${name}`);
  return { status: 200, body: schedule };
};

export const pauseSchedule = pausing(true);
export const resumeSchedule = pausing(false);
