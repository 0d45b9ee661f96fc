import assert from 'node:assert/strict';
import { assertResponse } from './contract.js';
import { TERMINAL_STATUSES } from '@niclab/shared/domain/contract';
import { followJob } from './sse.js';

const isTerminal = (status: string) => (TERMINAL_STATUSES as readonly string[]).includes(status);
/** A list of statuses and the function that adds one when it differs from the last. */
const statusLog = () => {
  const seen: string[] = [];
  return { seen, note: (status: string) => void (seen.at(-1) !== status && seen.push(status)) };
};

/** A tiny client for a running API process; every response is checked against openapi.yaml. */
export class ApiClient {
  constructor(readonly base: string, readonly token?: string) {}

  async call(operationId: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any; headers: Record<string, string> }> {
    const response = await fetch(this.base + path, {
      method,
      headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...(this.token ? { authorization: `Bearer ${this.token}` } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    const parsed = text ? JSON.parse(text) : undefined;
    const headers = Object.fromEntries(response.headers);
    assertResponse(operationId, { status: response.status, headers, body: parsed });
    return { status: response.status, body: parsed, headers };
  }

  job(id: string) {
    return this.call('getJob', 'GET', `/v1/jobs/${id}`);
  }

  submit(spec: unknown) {
    return this.call('createJob', 'POST', '/v1/jobs', spec);
  }

  /** Submits a job that must be accepted and succeed; returns the finished job. */
  async succeed(spec: unknown, timeoutMs = 30_000): Promise<any> {
    const submitted = await this.submit(spec);
    assert.equal(submitted.status, 202, JSON.stringify(submitted.body));
    const { job } = await this.finish(submitted.body.id, timeoutMs);
    assert.equal(job.status, 'succeeded', JSON.stringify(job.error ?? job.runs));
    return job;
  }

  /**
   * Waits until the job is finished; returns it and every status seen on the way. It waits on
   * the job's event stream (the API ends it after the final status), then reads the job once: a
   * read every 50 ms of a rate search's growing job, each checked against the contract, took a
   * third of that test's CPU, the API's and its own. Where the stream breaks (an API restarted)
   * it reads the job and follows again.
   */
  async finish(id: string, timeoutMs = 30_000): Promise<{ job: any; seen: string[] }> {
    const { seen, note } = statusLog();
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      try {
        const { events } = await followJob(this, id, (e) => e.event === 'status' && note(e.data.status), AbortSignal.timeout(Math.max(1, deadline - Date.now())));
        await events;
      } catch {
        // the stream broke or the time is up: the job's own state says which
      }
      const { body } = await this.job(id);
      note(body.status);
      if (isTerminal(body.status)) return { job: body, seen };
      await new Promise((r) => setTimeout(r, 100));
    }
    throw new Error(`job ${id} did not finish within ${timeoutMs} ms (seen ${seen.join(' -> ')})`);
  }

  /**
   * What a job is doing, for an error message: its status, each run's status and error, and the
   * last log lines of the processes named, so a wait that timed out on CI says what happened.
   */
  async explain(id: string, processes: Record<string, { output(): string }> = {}): Promise<string> {
    const { body } = await this.job(id);
    const runs = (body.runs ?? []).map((run: any) => `${run.status}${run.error ? ` ${run.error.code}: ${run.error.message}` : ''}`);
    const logs = Object.entries(processes).map(([name, p]) => `--- ${name}:\n${p.output().trimEnd().split('\n').slice(-15).join('\n')}`);
    return [`job ${id} is ${body.status}${body.error ? ` (${body.error.code}: ${body.error.message})` : ''}, runs [${runs.join('; ')}]`, ...logs].join('\n');
  }

  /** Polls GET /v1/jobs/{id} every 50 ms until the job is finished: the statuses as reads see them, apart from its event stream. */
  async pollFinish(id: string, timeoutMs = 30_000): Promise<{ job: any; seen: string[] }> {
    const { seen, note } = statusLog();
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const { body } = await this.job(id);
      note(body.status);
      if (isTerminal(body.status)) return { job: body, seen };
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`job ${id} did not finish within ${timeoutMs} ms (seen ${seen.join(' -> ')})`);
  }
}
