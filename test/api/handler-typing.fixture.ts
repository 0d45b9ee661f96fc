/**
 * Compiled, never run, by handler-typing.test.ts (and by `npm run typecheck`): each
 * `@ts-expect-error` marks a mistake the handler types must refuse. Should one compile, tsc
 * reports the directive unused and the test fails.
 */
import type { Handler, Handlers } from '@niclab/api/handler';
import { handlers } from '@niclab/api/handlers/index';
import { getJob, listRuns } from '@niclab/api/handlers/jobs';
import { pauseSchedule } from '@niclab/api/handlers/schedules';
import type { Job } from '@niclab/shared/domain/contract';

declare const job: Job;

// The real map compiles: every operation has its handler, each under its own name.
export const all: Handlers = handlers;

// A handler registered under another operation, even one that takes and answers the same.
// @ts-expect-error listRuns answers {items}, getJob a Job
export const swapped: Handlers = { ...handlers, getJob: listRuns };
// @ts-expect-error same shapes, another operation
export const twin: Handlers = { ...handlers, getSchedule: pauseSchedule };
// @ts-expect-error
export const missing: Handlers = { ...handlers, getJob: undefined };
export const same: Handlers = { ...handlers, getJob };

// A status the contract does not declare for the operation.
// @ts-expect-error createJob answers 202, not 201
export const wrongStatus: Handler<'createJob'> = async () => ({ status: 201, body: job });
// A body the contract does not declare for the status.
// @ts-expect-error a Job where the contract says {items: Run[]}
export const wrongBody: Handler<'listRuns'> = async () => ({ status: 200, body: job });
// @ts-expect-error 204 has no body
export const bodyOn204: Handler<'deleteSchedule'> = async () => ({ status: 204, body: job });
// @ts-expect-error getJob declares no text/csv
export const wrongMediaType: Handler<'getJob'> = async () => ({ status: 200, raw: { contentType: 'text/csv', text: '' } });
export const declaredMediaType: Handler<'getReport'> = async () => ({ status: 200, raw: { contentType: 'text/csv; charset=utf-8', text: '' } });
// @ts-expect-error failures are thrown as HttpProblem, not returned
export const returnedProblem: Handler<'getJob'> = async () => ({ status: 404, body: { type: 'x', title: 'x', status: 404 } });

// Inputs read as the contract types them, and only what it declares.
export const inputs: Handler<'getRawOutput'> = async ({ params, query, body }) => {
  const index: number = params.index;
  const end: 'sender' | 'receiver' = params.end;
  // @ts-expect-error getRawOutput has no query parameters
  void query.format;
  // @ts-expect-error nor a body
  void body.spec;
  void index, end;
  return { status: 200, raw: { contentType: 'application/json', text: '{}' } };
};
export const submitted: Handler<'createJob'> = async ({ body, headers, params }) => {
  const duration: number = body.duration;
  const key: string | undefined = headers['idempotency-key'];
  // @ts-expect-error createJob has no path parameters
  void params.id;
  void duration, key;
  return { status: 202, body: job };
};
