import { TERMINAL_STATUSES, type ErrorInfo, type Job } from '@niclab/shared/domain/contract';
import { enqueueJob } from '@niclab/shared/stores/job-queue';
import { HttpProblem } from '@niclab/shared/runtime/problem';
import { compareJobs as compare } from '@niclab/shared/domain/compare';
import { changesBetween } from '@niclab/shared/domain/changes/series';
import { buildReport } from '@niclab/shared/domain/report';
import { RunChannel } from '@niclab/shared/stores/run-channel';
import { historyCsv, historyOpenMetrics } from '@niclab/shared/stores/results';
import { defaulted, type Handler } from '../handler.js';
import { mayManage } from '../access.js';
import { idempotent } from '../idempotency.js';
import { submitJob } from '../submission.js';
import { replicated } from '../durability.js';
import { withRawLinks } from '../raw-links.js';
import { COMPARISON_FORMATS, REPORT_FORMATS, reply } from '../formats.js';

export const createJob: Handler<'createJob'> = async ({ body, headers, principal }, services) => {
  const submit = async (id?: string) => {
    const outcome = await submitJob(services, body, { principal, id });
    if ('errors' in outcome) throw HttpProblem.invalid(outcome.errors, 'The job cannot run as specified.');
    return outcome.job;
  };
  // A job still queued is queued again by its id: nothing when its entry is there, the entry back when a failover lost it.
  const requeue = async (job: Job) => void (job.status === 'queued' && (await enqueueJob(services.jobsQueue, job.id)));
  const key = headers['idempotency-key'];
  const { job, replayed } = key !== undefined ? await idempotent({ ...services, requeue }, principal.name, key, body, submit) : { job: await submit(), replayed: false };
  await replicated(services, ['job', job.id]);
  return { status: 202, body: job, headers: { Location: `/v1/jobs/${job.id}`, ...(replayed ? { 'Idempotent-Replayed': 'true' } : {}) } };
};

export const listJobs: Handler<'listJobs'> = async ({ query }, { store }) => {
  const page = await store.list({ status: query.status, limit: defaulted(query.limit, 'limit'), cursor: query.cursor });
  if (!page) throw HttpProblem.invalid([{ field: 'query.cursor', message: 'is not a cursor this API returned' }]);
  return { status: 200, body: page };
};

export const getJob: Handler<'getJob'> = async ({ params: { id } }, { store }) => {
  const job = await store.get(id);
  if (!job) throw HttpProblem.notFound(`Job ${id}`);
  return { status: 200, body: { ...job, runs: withRawLinks(await store.listRuns(id)) } };
};

export const listRuns: Handler<'listRuns'> = async ({ params: { id } }, { store }) => {
  if (!(await store.get(id))) throw HttpProblem.notFound(`Job ${id}`);
  return { status: 200, body: { items: withRawLinks(await store.listRuns(id)) } };
};

export const getReport: Handler<'getReport'> = async ({ params: { id }, query }, { store }) => {
  const job = await store.get(id);
  if (!job) throw HttpProblem.notFound(`Job ${id}`);
  const runs = await store.listRuns(id);
  const report = buildReport(job, runs);
  if (query.format && query.format !== 'json') return reply(await REPORT_FORMATS[query.format]({ id, job, runs, report }));
  return { status: 200, body: report };
};

export const compareJobs: Handler<'compareJobs'> = async ({ query }, { store, changes }) => {
  const [baseline, candidate] = await Promise.all([store.get(query.baseline), store.get(query.candidate)]);
  if (!baseline) throw HttpProblem.notFound(`Job ${query.baseline}`);
  if (!candidate) throw HttpProblem.notFound(`Job ${query.candidate}`);
  // A group's runs are different links, not repetitions of one: their statistics would mix hosts.
  const grouped = ([['baseline', baseline], ['candidate', candidate]] as const).filter(([, job]) => job.spec.group);
  if (grouped.length > 0) throw HttpProblem.invalid(grouped.map(([field, job]) => ({ field: `query.${field}`, message: `job ${job.id} is a ${job.spec.group!.shape} group: its pairs are different links, so it has no A/B figure; compare one pair's jobs, or read the group's matrix report` })));
  const [baseRuns, candRuns] = await Promise.all([store.listRuns(baseline.id), store.listRuns(candidate.id)]);
  const compared = compare(baseline, baseRuns, candidate, candRuns, defaulted(query.minChangePercent, 'minChangePercent'), query.metric);
  // The history's known steps between the two: a step after the earlier job was found after it was made.
  const since = Math.min(...[baseline, candidate].map((j) => Date.parse(j.createdAt)));
  const comparison = { ...compared, changesBetween: changesBetween({ job: baseline, runs: baseRuns }, { job: candidate, runs: candRuns }, (await changes.query({ since, limit: 1000 })).items) };
  if (query.format && query.format !== 'json') return reply(await COMPARISON_FORMATS[query.format]({ baseline, candidate, comparison }));
  return { status: 200, body: comparison };
};

export const getRawOutput: Handler<'getRawOutput'> = async ({ params: { id, index, flow, end } }, { store, redis, keys }) => {
  if (!(await store.get(id))) throw HttpProblem.notFound(`Job ${id}`);
  const run = await store.getRun(id, index);
  if (!run) throw HttpProblem.notFound(`Run ${index} of job ${id}`);
  if (flow >= run.flows.length) throw HttpProblem.notFound(`Flow ${flow} of run ${index} (it has ${run.flows.length})`);
  // The run's flows are its legs, in order: flow index i is leg i.
  const text = await new RunChannel(redis, keys, run.id).readRaw(flow, end);
  if (text === null) throw HttpProblem.notFound(`Raw output of the ${end} of flow ${flow} in run ${index} (only engines with a report of their own, such as iperf3, keep one)`);
  const filename = `niclab-${id}-run${index}-flow${flow}-${end}.json`;
  return { status: 200, raw: { contentType: 'application/json', text }, headers: { 'Content-Disposition': `attachment; filename="${filename}"` } };
};

export const cancelJob: Handler<'cancelJob'> = async ({ params: { id }, principal }, { store, cancels, jobsQueue, log }) => {
  const job = await store.get(id);
  if (!job) throw HttpProblem.notFound(`Job ${id}`);
  if (!mayManage(principal, job.owner)) throw new HttpProblem(403, 'forbidden', `Job ${id} belongs to ${job.owner}; cancelling another's job needs the "admin" scope.`, [], { rule: 'owner' });
  const error: ErrorInfo = { code: 'canceled', message: 'Canceled by request.' };
  if (TERMINAL_STATUSES.includes(job.status) || !(await store.transition(id, ['queued', 'running'], 'canceled', { finishedAt: new Date().toISOString(), error }))) {
    const now = await store.get(id);
    throw new HttpProblem(409, 'job-finished', `Job ${id} is already ${now?.status ?? job.status}.`);
  }
  // Coordinators and agents stop its run and end its processes; a job still waiting leaves the queue.
  await cancels.publish({ jobId: id, ...error });
  await jobsQueue.remove(id).catch(() => undefined);
  log.info({ jobId: id, was: job.status, by: principal.name }, 'job canceled');
  const canceled = await store.get(id);
  // Only if the job's record expired in between: the contract has no 202 without a job.
  if (!canceled) throw HttpProblem.notFound(`Job ${id}`);
  return { status: 202, body: canceled };
};

export const listResults: Handler<'listResults'> = async ({ query }, { results }) => {
  const to = query.to ? Date.parse(query.to) : Date.now();
  const from = query.from ? Date.parse(query.from) : to - 24 * 3600 * 1000;
  if (from > to) throw HttpProblem.invalid([{ field: 'query.from', message: 'must not be after to' }]);
  const found = await results.query({
    from, to, limit: defaulted(query.limit, 'limit'), after: query.cursor,
    agent: query.agent, interface: query.interface, schedule: query.schedule, label: query.label,
  });
  if (!found) throw new HttpProblem(404, 'not-found', `The cursor's run ${query.cursor} is not in the history read: its summary expired, or it is no run of these filters; start again from a \`from\`.`);
  const headers: Record<string, string> = {};
  if (found.next) {
    const next = new URLSearchParams(Object.entries({ ...query, cursor: found.next }).map(([k, v]): [string, string] => [k, String(v)]));
    Object.assign(headers, { Link: `</v1/results?${next}>; rel="next"`, 'X-Next-Cursor': found.next });
  }
  const format = defaulted(query.format, 'format');
  if (format === 'csv') return { status: 200, raw: { contentType: 'text/csv; charset=utf-8', text: historyCsv(found.items) }, headers };
  if (format === 'openmetrics') return { status: 200, raw: { contentType: 'application/openmetrics-text; version=1.0.0; charset=utf-8', text: historyOpenMetrics(found.items) }, headers };
  if (format === 'jsonl') return { status: 200, raw: { contentType: 'application/x-ndjson; charset=utf-8', text: found.items.map((s) => `${JSON.stringify(s)}\n`).join('') }, headers };
  return { status: 200, body: found, headers };
};

export const getJobEvents: Handler<'getJobEvents'> = async ({ params: { id }, headers }, { store, events }) => {
  if (!(await store.get(id))) throw HttpProblem.notFound(`Job ${id}`);
  const current = async () => {
    const job = await store.get(id);
    return job && { type: 'status' as const, status: job.status, progress: job.progress, error: job.error };
  };
  return { status: 200, events: events.stream(id, headers['last-event-id'], current) };
};
