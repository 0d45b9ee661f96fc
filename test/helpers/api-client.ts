import assert from 'node:assert/strict';
import { assertResponse } from './contract.js';

/** A tiny client for a running API process; every response is checked against openapi.yaml. */
export class ApiClient {
  constructor(readonly base: string, readonly token?: string) {}

  async call(operationId: string, method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> {
    const response = await fetch(this.base + path, {
      method,
      headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...(this.token ? { authorization: `Bearer ${this.token}` } : {}) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    const parsed = text ? JSON.parse(text) : undefined;
    assertResponse(operationId, { status: response.status, headers: Object.fromEntries(response.headers), body: parsed });
    return { status: response.status, body: parsed };
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

  /** Polls until the job is finished; returns it and every status seen on the way. */
  async finish(id: string, timeoutMs = 30_000): Promise<{ job: any; seen: string[] }> {
    const seen: string[] = [];
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      const { body } = await this.job(id);
      if (seen.at(-1) !== body.status) seen.push(body.status);
      if (['succeeded', 'failed', 'canceled'].includes(body.status)) return { job: body, seen };
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`job ${id} did not finish within ${timeoutMs} ms (seen ${seen.join(' -> ')})`);
  }
}
