import { HttpProblem } from '@niclab/shared/runtime/problem';
import { mayManage } from '../access.js';
import type { Handler, ValidatedRequest } from '../handler.js';
import type { ScheduleInput } from '../schedules.js';
import type { ApiServices } from '../services.js';

export const createSchedule: Handler = async ({ body, principal }, { schedules }) => {
  const schedule = await schedules.create(body as ScheduleInput, principal);
  return { status: 201, body: schedule, headers: { Location: `/v1/schedules/${schedule.name}` } };
};

export const listSchedules: Handler = async (_request, { schedules }) => ({ status: 200, body: { items: await schedules.list() } });

export const getSchedule: Handler = async ({ params }, { schedules }) => {
  const schedule = await schedules.get(params.name as string);
  if (!schedule) throw HttpProblem.notFound(`Schedule ${params.name}`);
  return { status: 200, body: schedule };
};

/** A schedule the caller may change: its own, or any with the admin scope. */
async function managed({ params, principal }: ValidatedRequest, { schedules }: ApiServices) {
  const schedule = await schedules.get(params.name as string);
  if (!schedule) throw HttpProblem.notFound(`Schedule ${params.name}`);
  if (!mayManage(principal, schedule.owner)) throw new HttpProblem(403, 'forbidden', `Schedule ${schedule.name} belongs to ${schedule.owner}; changing another's schedule needs the "admin" scope.`, [], { rule: 'owner' });
  return schedule;
}

export const deleteSchedule: Handler = async (request, services) => {
  const schedule = await managed(request, services);
  if (!(await services.schedules.remove(schedule.name))) throw HttpProblem.notFound(`Schedule ${schedule.name}`);
  return { status: 204 };
};

const pausing = (paused: boolean): Handler => async (request, services) => {
  const schedule = await services.schedules.setPaused((await managed(request, services)).name, paused);
  if (!schedule) throw HttpProblem.notFound(`Schedule ${request.params.name}`);
  return { status: 200, body: schedule };
};

export const pauseSchedule = pausing(true);
export const resumeSchedule = pausing(false);
