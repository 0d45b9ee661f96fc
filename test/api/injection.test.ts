import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import request from 'supertest';
import { INJECTION } from '../helpers/injection.js';
import { stackPerFile, type Stack } from '../helpers/stack.js';

const AGENT = 'inj';
const lo = { agent: AGENT, interface: 'lo' };
let stack: Stack;
stackPerFile({ agents: [AGENT] }, (s) => (stack = s));

/** Every string that reaches an agent or a process name, and the field a 422 must name. */
const FIELDS: [string, (s: string) => Record<string, unknown>, string][] = [
  ['sender interface', (s) => ({ flows: [{ from: { ...lo, interface: s }, to: lo }] }), 'body.flows[0].from.interface'],
  ['receiver interface', (s) => ({ flows: [{ from: lo, to: { ...lo, interface: s } }] }), 'body.flows[0].to.interface'],
  ['agent', (s) => ({ flows: [{ from: { ...lo, agent: s }, to: lo }] }), 'body.flows[0].from.agent'],
  ['label name', (s) => ({ flows: [{ from: lo, to: lo }], labels: { [s]: 'x' } }), 'body.labels'],
  ['sysctl name', (s) => ({ flows: [{ from: lo, to: lo }], tuning: { sysctl: { [s]: '1' } } }), 'body.tuning.sysctl'],
  ['sysctl value', (s) => ({ flows: [{ from: lo, to: lo }], tuning: { sysctl: { 'net.core.rmem_max': s } } }), 'body.tuning.sysctl'],
  ['qdisc kind', (s) => ({ flows: [{ from: lo, to: lo }], tuning: { qdisc: { kind: s } } }), 'body.tuning.qdisc'],
  // A plain name ('a' × 16) is a fine path: that one is refused because this agent has no file directory.
  ['file source', (s) => ({ flows: [{ from: lo, to: lo }], file: { source: s } }), 'body.file.source'],
];

describe('the injection corpus is refused at the API, naming the field', () => {
  for (const [name, make, field] of FIELDS) {
    test(name, async () => {
      const before = await stack.services.jobsQueue.count();
      // 16 letters is too long for an interface, and a fine label name.
      for (const value of INJECTION.filter((v) => !(field === 'body.labels' && /^a+$/.test(v)))) {
        const res = await request(stack.app).post('/v1/jobs').set('content-type', 'application/json').send(JSON.stringify({ engine: 'builtin', duration: 1, ...make(value) }));
        assert.equal(res.status, 422, `${JSON.stringify(value)}: ${JSON.stringify(res.body)}`);
        assert.ok(res.body.errors.some((e: { field: string }) => e.field.startsWith(field)), `${JSON.stringify(value)}: ${JSON.stringify(res.body.errors)}`);
      }
      assert.equal(await stack.services.jobsQueue.count(), before, 'nothing was queued');
    });
  }

  test('labels values with control characters; path and query strings', async () => {
    for (const value of INJECTION.filter((s) => /[\u0000-\u001f]/.test(s) || s.length > 256)) {
      const res = await request(stack.app).post('/v1/jobs').set('content-type', 'application/json').send(JSON.stringify({ flows: [{ from: lo, to: lo }], labels: { note: value } }));
      assert.equal(res.status, 422, JSON.stringify(value));
    }
    for (const value of INJECTION.filter(Boolean)) {
      const agent = await request(stack.app).get(`/v1/agents/${encodeURIComponent(value)}`);
      assert.ok(agent.status === 422 || agent.status === 404, `${JSON.stringify(value)}: ${agent.status}`);
      const results = await request(stack.app).get('/v1/results').query({ interface: value });
      assert.equal(results.status, 422, `${JSON.stringify(value)}: ${results.status}`);
    }
  });
});
