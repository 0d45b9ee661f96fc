import type { Handler } from '../handler.js';
import { getAgent, listAgents } from './agents.js';
import { getHealth, getMetrics, getReady } from './health.js';
import { cancelJob, compareJobs, createJob, getJob, getRawOutput, getReport, listJobs, listRuns } from './jobs.js';

/** One handler per operationId of openapi.yaml; a test keeps the two in step. */
export const handlers: Record<string, Handler> = {
  createJob, listJobs, getJob, cancelJob, listRuns, getRawOutput, getReport, compareJobs,
  listAgents, getAgent,
  getHealth, getReady, getMetrics,
};
