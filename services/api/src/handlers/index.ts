import type { Handlers } from '../handler.js';
import { getAgent, listAgents, previewGroup } from './agents.js';
import { acknowledgeChange, getChange, listChanges } from './changes.js';
import { getHealth, getMetrics, getReady } from './health.js';
import { createSchedule, deleteSchedule, getSchedule, listSchedules, pauseSchedule, resumeSchedule } from './schedules.js';
import { cancelJob, compareJobs, createJob, getJob, getJobEvents, getRawOutput, getReport, listJobs, listResults, listRuns } from './jobs.js';

/** One handler per operationId of openapi.yaml, each typed by its operation; a test keeps the two in step. */
export const handlers: Handlers = {
  createJob, listJobs, getJob, cancelJob, listRuns, getRawOutput, getReport, compareJobs, listResults, getJobEvents,
  listAgents, getAgent, previewGroup,
  createSchedule, listSchedules, getSchedule, deleteSchedule, pauseSchedule, resumeSchedule,
  listChanges, getChange, acknowledgeChange,
  getHealth, getReady, getMetrics,
};
