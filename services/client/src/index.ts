/**
 * @niclab/client: niclab's API for TypeScript and JavaScript scripts, on Node's fetch.
 *
 * Requests are typed from openapi.yaml with the fields that have a default optional
 * (`generated/requests.ts`, openapi-typescript --default-non-nullable=false), so a job is
 * `{flows: [...]}` and what it leaves out the API fills in; answers are typed as the API
 * sends them, every defaulted field there (@niclab/shared's generated types, types only).
 */
import type { components as Answers } from '@niclab/shared/generated/openapi';
import { serverEvents } from '@niclab/shared/runtime/event-stream';
import type { components as Requests } from './generated/requests.js';

/** A job as a script submits it: only `flows` is required. */
export type JobSpec = Requests['schemas']['JobSpec'];
export type ScheduleInput = Requests['schemas']['ScheduleInput'];
export type Job = Answers['schemas']['Job'];
export type Report = Answers['schemas']['Report'];
export type Comparison = Answers['schemas']['Comparison'];
export type RunSummary = Answers['schemas']['RunSummary'];
export type Agent = Answers['schemas']['Agent'];
export type JobEvent = Answers['schemas']['JobEvent'];
export type Problem = Answers['schemas']['Problem'];

const TERMINAL = ['succeeded', 'failed', 'canceled'];

/** A request the API refused: its status and problem document, the fields it named in the message. */
export class NiclabError extends Error {
  constructor(readonly status: number, readonly problem: Partial<Problem>) {
    const fields = (problem.errors ?? []).map((e) => `\n  ${e.field}: ${e.message}`).join('');
    super(`${problem.detail ?? problem.title ?? `HTTP ${status}`}${fields}`);
  }
}

export interface ClientOptions {
  /** Default: NICLAB_API, else http://127.0.0.1:8080. */
  baseUrl?: string;
  /** Default: NICLAB_TOKEN. */
  token?: string;
}

export interface HistoryQuery {
  agent?: string;
  interface?: string;
  schedule?: string;
  /** `key=value` of the jobs' labels. */
  label?: string;
  /** ISO times; default: the last 24 hours. */
  from?: string;
  to?: string;
  /** Summaries a page (the API's limit, 1 to 10,000). */
  pageSize?: number;
}

export class NiclabClient {
  readonly baseUrl: string;
  private readonly token: string | undefined;

  constructor(options: ClientOptions = {}) {
    this.baseUrl = (options.baseUrl ?? process.env.NICLAB_API ?? 'http://127.0.0.1:8080').replace(/\/$/, '');
    this.token = options.token ?? process.env.NICLAB_TOKEN;
  }

  private async request(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<Response> {
    const res = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers: { accept: 'application/json', ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...(this.token ? { authorization: `Bearer ${this.token}` } : {}), ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (res.ok) return res;
    const text = await res.text();
    let problem: Partial<Problem>;
    try {
      problem = JSON.parse(text) as Problem;
    } catch {
      problem = { detail: text.trim() || res.statusText };
    }
    throw new NiclabError(res.status, problem);
  }

  private async json<T>(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<T> {
    const res = await this.request(method, path, body, headers);
    return (res.status === 204 ? undefined : await res.json()) as T;
  }

  /** Submits a job; the job as queued (202). The same `idempotencyKey` gives the same job again. */
  submit(spec: JobSpec, options: { idempotencyKey?: string } = {}): Promise<Job> {
    return this.json('POST', '/v1/jobs', spec, options.idempotencyKey ? { 'idempotency-key': options.idempotencyKey } : {});
  }

  job(id: string): Promise<Job> {
    return this.json('GET', `/v1/jobs/${id}`);
  }

  cancel(id: string): Promise<Job> {
    return this.json('DELETE', `/v1/jobs/${id}`);
  }

  async agents(): Promise<Agent[]> {
    return (await this.json<{ items: Agent[] }>('GET', '/v1/agents')).items;
  }

  report(id: string): Promise<Report> {
    return this.json('GET', `/v1/jobs/${id}/report`);
  }

  /** A report as the API renders it: `table`, `csv` or `svg`. */
  async reportText(id: string, format: 'table' | 'csv' | 'svg'): Promise<string> {
    return (await this.request('GET', `/v1/jobs/${id}/report?format=${format}`, undefined, { accept: '*/*' })).text();
  }

  compare(baseline: string, candidate: string, options: { minChangePercent?: number; metric?: string } = {}): Promise<Comparison> {
    const q = new URLSearchParams({ baseline, candidate, ...Object.fromEntries(Object.entries(options).map(([k, v]) => [k, String(v)])) });
    return this.json('GET', `/v1/compare?${q}`);
  }

  /** The job's server-sent events, each with its id, until the API ends the stream; after `lastEventId` if given. */
  async *events(id: string, lastEventId?: string): AsyncGenerator<{ event: JobEvent; id?: string }> {
    const res = await this.request('GET', `/v1/jobs/${id}/events`, undefined, { accept: 'text/event-stream', ...(lastEventId ? { 'last-event-id': lastEventId } : {}) });
    for await (const { data, id: eventId } of serverEvents(res.body as unknown as AsyncIterable<Uint8Array>)) yield { event: JSON.parse(data) as JobEvent, ...(eventId ? { id: eventId } : {}) };
  }

  /**
   * Follows the job to its final status and returns the finished job; `onEvent` hears each
   * event. A lost connection is resumed with Last-Event-ID (nothing missed) for up to
   * `patienceMs` without one.
   */
  async wait(id: string, options: { onEvent?: (event: JobEvent) => void; patienceMs?: number } = {}): Promise<Job> {
    let last: string | undefined;
    let lostSince: number | null = null;
    for (;;) {
      const stream = this.events(id, last)[Symbol.asyncIterator]();
      for (;;) {
        let next: IteratorResult<{ event: JobEvent; id?: string }>;
        try {
          next = await stream.next();
        } catch (error) {
          // A problem the API stated (a 404, a 403) stands; a lost connection is resumed from the last id.
          if (error instanceof NiclabError && error.status < 500) throw error;
          if (!(error instanceof NiclabError) && !(error instanceof TypeError) && (error as { name?: string }).name !== 'AbortError') throw error;
          break;
        }
        if (next.done) break;
        const { event, id: eventId } = next.value;
        lostSince = null;
        last = eventId ?? last;
        // The caller's own callback, outside the retry: what it throws is the caller's.
        options.onEvent?.(event);
        if (event.type === 'status' && TERMINAL.includes(event.status)) return await this.job(id);
      }
      lostSince ??= Date.now();
      if (Date.now() - lostSince > (options.patienceMs ?? 120_000)) throw new Error(`lost the niclab API at ${this.baseUrl} while following job ${id}`);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }

  /** Submits and waits: the finished job. */
  async run(spec: JobSpec, options: { onEvent?: (event: JobEvent) => void } = {}): Promise<Job> {
    return this.wait((await this.submit(spec)).id, options);
  }

  /** Every run summary of the history in the range, oldest first, page after page (the API's cursor). */
  async *results(query: HistoryQuery = {}): AsyncGenerator<RunSummary> {
    const { pageSize, ...filters } = query;
    const q = new URLSearchParams(Object.entries({ ...filters, limit: pageSize }).filter(([, v]) => v !== undefined).map(([k, v]): [string, string] => [k, String(v)]));
    for (;;) {
      const page = await this.json<{ items: RunSummary[]; next: string | null }>('GET', `/v1/results?${q}`);
      yield* page.items;
      if (!page.next) return;
      q.set('cursor', page.next);
    }
  }
}
