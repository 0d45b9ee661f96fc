/** The command line's view of the API: JSON in and out, problems turned into readable errors. */
import type { Problem } from '@niclab/shared/domain/contract';

/** An error to show as it is: the API's problem detail and the fields it names, no stack. */
export class ClientError extends Error {
  constructor(message: string, readonly exitCode = 1) {
    super(message);
  }
}

export class Api {
  constructor(readonly base: string, private readonly token?: string) {}

  private async request(method: string, path: string, body?: unknown, accept = 'application/json'): Promise<Response> {
    const headers: Record<string, string> = { accept };
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
      throw new ClientError(`cannot reach the niclab API at ${this.base} (${code}); is it running? (--api URL or NICLAB_API)`);
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
    throw new ClientError(`${problem.detail ?? problem.title ?? `${res.status} ${res.statusText}`}${fields}`);
  }

  async json<T = any>(method: string, path: string, body?: unknown): Promise<T> {
    const res = await this.request(method, path, body);
    return (res.status === 204 ? undefined : await res.json()) as T;
  }

  async text(path: string, accept = 'text/plain'): Promise<string> {
    return (await this.request('GET', path, undefined, accept)).text();
  }

  /** Server-sent events of a path, as `{event, data}` until the server ends the stream. */
  async *events(path: string): AsyncGenerator<{ event: string; data: any }> {
    const res = await this.request('GET', path, undefined, 'text/event-stream');
    const decoder = new TextDecoder();
    let buffer = '';
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (event && data) yield { event, data: JSON.parse(data) };
      }
    }
  }
}
