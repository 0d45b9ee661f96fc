import { HttpProblem } from '@niclab/shared/problem';
import type { Handler } from '../handler.js';
import type { ScheduleInput } from '../schedules.js';

export const createSchedule: Handler = async ({ body }, { schedules }) => {
  const schedule = await schedules.create(body as ScheduleInput);
  return { status: 201, body: schedule, headers: { Location: `/v1/schedules/${schedule.name}` } };
};

export const listSchedules: Handler = async (_request, { schedules }) => ({ status: 200, body: { items: await schedules.list() } });

export const getSchedule: Handler = async ({ params }, { schedules }) => {
  const schedule = await schedules.get(params.name as string);
  if (!schedule) throw HttpProblem.notFound(`Schedule ${params.name}`);
  return { status: 200, body: schedule };
};

export const deleteSchedule: Handler = async ({ params }, { schedules }) => {
  if (!(await schedules.remove(params.name as string))) throw HttpProblem.notFound(`Schedule ${params.name}`);
  return { status: 204 };
};

const pausing = (paused: boolean): Handler => async ({ params }, { schedules }) => {
  const schedule = await schedules.setPaused(params.name as string, paused);
  if (!schedule) throw HttpProblem.notFound(`Schedule ${params.name}`);
  return { status: 200, body: schedule };
};

export const pauseSchedule = pausing(true);
export const resumeSchedule = pausing(false);
