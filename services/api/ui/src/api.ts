/** The public API as the page uses it: every request carries the session's token. */
import type { components } from '@niclab/shared/generated/openapi';

export type Schemas = components['schemas'];
export type Job = Schemas['Job'];
export type JobStatus = Schemas['JobStatus'];

/** A stored job's flows: a group (mesh, disjoint, star) is expanded into pairs at submission, so a job always answers a list. */
export const flowsOf = (job: Job): Schemas['Flow'][] => (Array.isArray(job.spec.flows) ? job.spec.flows : []);

const TOKEN_KEY = 'niclab.token';

/** The bearer token lives in sessionStorage: gone when the tab closes, never in a cookie. */
export const token = {
  get: (): string => sessionStorage.getItem(TOKEN_KEY) ?? '',
  set(value: string): void {
    if (value) sessionStorage.setItem(TOKEN_KEY, value);
    else sessionStorage.removeItem(TOKEN_KEY);
  },
};

/** An error answer of the API, with its problem+json body (title, detail, the fields named). */
export class ApiError extends Error {
  constructor(readonly status: number, readonly problem: { title?: string; detail?: string; errors?: { field: string; message: string }[] }) {
    super(problem.detail ?? problem.title ?? `HTTP ${status}`);
  }
}

function headers(accept: string): Record<string, string> {
  const t = token.get();
  return t ? { Accept: accept, Authorization: `Bearer ${t}` } : { Accept: accept };
}

async function send(path: string, accept: string, signal?: AbortSignal): Promise<Response> {
  const res = await fetch(path, { headers: headers(accept), signal });
  if (!res.ok) throw new ApiError(res.status, await res.json().catch(() => ({})));
  return res;
}

/** The methods the page changes things with (test/api/ui.test.ts holds each call to an operation of openapi.yaml). */
export type WriteMethod = 'POST' | 'DELETE';

/** A request that changes something (submit, cancel, pause, delete): JSON in, JSON (or nothing) out; errors as ApiError. */
export async function sendJson<T>(method: WriteMethod, path: string, body?: unknown): Promise<T> {
  const res = await fetch(path, {
    method,
    headers: { ...headers('application/json'), ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  const parsed = text ? (JSON.parse(text) as unknown) : undefined;
  if (!res.ok) throw new ApiError(res.status, (parsed ?? {}) as ApiError['problem']);
  return parsed as T;
}

/**
 * The request that makes a stored job again: its spec as stored (defaults filled in), a
 * group's flows as the group it was expanded from (`group` is the server's, read-only), its
 * labels but those a schedule's firing was given.
 */
export function repeatRequest(job: Job): Record<string, unknown> {
  const { group, labels, ...spec } = job.spec;
  // A schedule's firing is labelled by the server with its schedule; a repeat is not one.
  const { schedule: _schedule, scheduledFor: _for, ...own } = labels ?? {};
  return { ...spec, ...(Object.keys(own).length ? { labels: own } : {}), flows: group ?? spec.flows };
}

export async function getJson<T>(path: string, signal?: AbortSignal): Promise<T> {
  return (await send(path, 'application/json', signal)).json() as Promise<T>;
}

export async function getText(path: string, accept: string, signal?: AbortSignal): Promise<string> {
  return (await send(path, accept, signal)).text();
}

export const FINAL: readonly JobStatus[] = ['succeeded', 'failed', 'canceled'];

export type JobEvent = Schemas['JobEvent'];

/**
 * A job's server-sent events, read with fetch rather than EventSource, which cannot send the
 * Authorization header. Ends with the stream (after the job's final status) or the signal.
 */
export async function* jobEvents(id: string, signal: AbortSignal): AsyncGenerator<JobEvent> {
  const res = await send(`/v1/jobs/${encodeURIComponent(id)}/events`, 'text/event-stream', signal);
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = frame.split('\n').filter((line) => line.startsWith('data: ')).map((line) => line.slice(6)).join('\n');
      if (data) yield JSON.parse(data) as JobEvent;
    }
  }
}

/** Saves what a path answers as a file: a plain link could not carry the token. */
export async function download(path: string, filename: string, accept: string): Promise<void> {
  const blob = await (await send(path, accept)).blob();
  const url = URL.createObjectURL(blob);
  const a = Object.assign(document.createElement('a'), { href: url, download: filename });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
