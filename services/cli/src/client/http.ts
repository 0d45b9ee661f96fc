/** The command line's view of the API: JSON in and out, problems turned into readable errors. */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { TERMINAL_STATUSES, type JobStatus, type Problem } from '@niclab/shared/domain/contract';
import { serverEvents } from '@niclab/shared/runtime/event-stream';

/** An error to show as it is: the API's problem detail and the fields it names, no stack. */
export class ClientError extends Error {
  /** `retriable`: the API could not be reached or answered 5xx, so trying again may succeed. */
  constructor(message: string, readonly exitCode = 1, readonly retriable = false) {
    super(message);
  }
}

/** One server-sent event: its name, its data, its id if it had one. */
export interface ServerEvent { event: string; data: any; id?: string }

export class Api {
  constructor(readonly base: string, private readonly token?: string) {}

  private async request(method: string, path: string, body?: unknown, accept = 'application/json', extra: Record<string, string> = {}): Promise<Response> {
    const headers: Record<string, string> = { accept, ...extra };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (this.token) headers.authorization = `Bearer ${this.token}`;
    let res: Response;
    try {
      res = await fetch(new URL(path, this.base), { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    } catch (error) {
      const cause = (error as { cause?: { code?: string; message?: string } }).cause;
      const code = cause?.code ?? (error as Error).message;
      if (/CERT|SELF_SIGNED|UNABLE_TO_VERIFY|ERR_TLS/.test(code)) {
        throw new ClientError(`the niclab API at ${this.base} has a certificate this machine does not trust (${code}: ${cause?.message ?? ''}); give its CA certificate with NODE_EXTRA_CA_CERTS=FILE`);
      }
      throw new ClientError(`cannot reach the niclab API at ${this.base} (${code}); is it running? (--api URL or NICLAB_API)`, 1, true);
    }
    if (res.ok) return res;
    const text = await res.text();
    let problem: Partial<Problem> = {};
    try {
      problem = JSON.parse(text) as Problem;
    } catch {
      // not a problem document: say what came back
    }
    const fields = (problem.errors ?? []).map((e) => `\n  ${e.field}: ${e.message}`).join('');
    // 5xx, or a 409 for a request with this Idempotency-Key still being handled: trying again may succeed.
    const retriable = res.status >= 500 || (res.status === 409 && /idempotency-in-progress$/.test(problem.type ?? ''));
    throw new ClientError(`${problem.detail ?? problem.title ?? `${res.status} ${res.statusText}`}${fields}`, 1, retriable);
  }

  async json<T = any>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await this.request(method, path, body);
    return (res.status === 204 ? undefined : await res.json()) as T;
  }

  /**
   * Submits a job with an Idempotency-Key of its own, and sends it again with that key while the
   * API cannot be reached or answers 5xx (a 503 while a replica confirms nothing, a failover),
   * for up to `patienceMs`: a retry never makes a second job.
   */
  async submit<T>(spec: unknown, patienceMs = 30_000): Promise<T> {
    const key = randomUUID();
    const started = Date.now();
    for (;;) {
      try {
        const res = await this.request('POST', '/v1/jobs', spec, 'application/json', { 'idempotency-key': key });
        return (await res.json()) as T;
      } catch (error) {
        if (!(error instanceof ClientError) || !error.retriable || Date.now() - started > patienceMs) throw error;
        await sleep(1000);
      }
    }
  }

  async text(path: string, accept = 'text/plain'): Promise<string> {
    return (await this.request('GET', path, undefined, accept)).text();
  }

  /** A page of a list as text, with the next page's cursor (its `X-Next-Cursor` header) or null. */
  async page(path: string, accept: string): Promise<{ text: string; next: string | null }> {
    const res = await this.request('GET', path, undefined, accept);
    return { text: await res.text(), next: res.headers.get('x-next-cursor') };
  }

  /** Server-sent events of a path, as `{event, data, id}` until the server ends the stream; from after `lastEventId` if given. */
  async *events(path: string, lastEventId?: string): AsyncGenerator<ServerEvent> {
    const res = await this.request('GET', path, undefined, 'text/event-stream', lastEventId ? { 'last-event-id': lastEventId } : {});
    for await (const { event, data, id } of serverEvents(res.body as unknown as AsyncIterable<Uint8Array>)) yield { event, data: JSON.parse(data), ...(id ? { id } : {}) };
  }

  /**
   * A job's events until its final status, through lost connections (an API restarted, a proxy
   * that cut the stream): each reconnect sends the last id seen as Last-Event-ID, and the API
   * resends what came in between. Gives up after `patienceMs` without a connection.
   */
  async *jobEvents(jobId: string, patienceMs = 120_000): AsyncGenerator<ServerEvent> {
    let last: string | undefined;
    let lostSince: number | null = null;
    for (;;) {
      try {
        for await (const e of this.events(`/v1/jobs/${jobId}/events`, last)) {
          lostSince = null;
          if (e.id) last = e.id;
          yield e;
          if (e.event === 'status' && TERMINAL_STATUSES.includes(e.data.status as JobStatus)) return;
        }
      } catch (error) {
        // A problem the API stated (a 404, a 403) stands; a lost connection is tried again.
        if (error instanceof ClientError && !error.retriable) throw error;
      }
      lostSince ??= Date.now();
      if (Date.now() - lostSince > patienceMs) throw new ClientError(`lost the niclab API at ${this.base} for ${Math.round(patienceMs / 1000)} s while following job ${jobId}`, 1, true);
      await sleep(250);
    }
  }
}
