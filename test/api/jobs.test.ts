import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Queue } from 'bullmq';
import request from 'supertest';
import { assertResponse } from '../helpers/contract.js';
import { AgentService } from '@niclab/agent/agent';
import { createApp } from '@niclab/api/app';
import { createApiServices } from '@niclab/api/services';
import { TERMINAL_STATUSES } from '@niclab/shared/domain/contract';
import { freePort } from '../helpers/redis.js';
import { silentLog, stackPerFile, startStack, testConfig, type Stack } from '../helpers/stack.js';

const AGENT = 'api-agent';
const lo = { agent: AGENT, interface: 'lo' };
const spec = (extra: Record<string, unknown> = {}) => ({ engine: 'builtin', protocol: 'tcp', duration: 1, flows: [{ from: lo, to: lo }], ...extra });

let stack: Stack;
// No coordinator: accepted jobs stay queued, so what the API stored can be read back unchanged.
stackPerFile({ agents: [AGENT] }, (s) => (stack = s));

async function post(body: unknown) {
  return request(stack.app).post('/v1/jobs').set('content-type', 'application/json').send(JSON.stringify(body));
}

describe('POST /v1/jobs', () => {
  test('accepts a valid job with 202, fills in defaults and says where it lives', async () => {
    const res = await post(spec());
    assertResponse('createJob', res);
    assert.equal(res.status, 202);
    assert.equal(res.headers.location, `/v1/jobs/${res.body.id}`);
    assert.equal(res.body.status, 'queued');
    assert.deepEqual(res.body.progress, { runsDone: 0, runsTotal: 1 });
    assert.equal(res.body.spec.bufferLength, 131072);
    assert.equal(res.body.spec.streams, 1);
    assert.equal(res.body.spec.direction, 'forward');
    assert.equal(res.body.spec.interval, 1);
  });

  test('duration 0.5, the documented minimum, is accepted alone: the default interval shrinks to it; an explicit one may not exceed it', async () => {
    const short = await post(spec({ duration: 0.5 }));
    assertResponse('createJob', short);
    assert.equal(short.status, 202, JSON.stringify(short.body));
    assert.equal(short.body.spec.interval, 0.5);
    const explicit = await post(spec({ duration: 0.5, interval: 0.25 }));
    assert.equal(explicit.body.spec.interval, 0.25);
    const tooLong = await post(spec({ duration: 0.5, interval: 1 }));
    assert.equal(tooLong.status, 422);
    assert.equal(tooLong.body.errors[0].field, 'body.interval');
  });

  test('counts runs as sweep points times repetitions', async () => {
    const res = await post(spec({ repeat: 3, sweep: { bufferLength: [1024, 8192], streams: [1, 2, 4] } }));
    assert.equal(res.status, 202);
    assert.equal(res.body.progress.runsTotal, 18);
  });
});

describe('bad input never becomes a job', () => {
  const cases: [string, unknown, number, string][] = [
    ['unknown top-level field', { ...spec(), bogus: 1 }, 422, 'body.bogus'],
    ['unknown field in an endpoint', spec({ flows: [{ from: { ...lo, port: 1 }, to: lo }] }), 422, 'body.flows[0].from.port'],
    ['negative duration', spec({ duration: -1 }), 422, 'body.duration'],
    ['absurd duration', spec({ duration: 1e9 }), 422, 'body.duration'],
    ['duration as a string', spec({ duration: '3' }), 422, 'body.duration'],
    ['no flows', spec({ flows: [] }), 422, 'body.flows'],
    ['a sysctl outside the allow-list', spec({ tuning: { sysctl: { 'net.ipv4.ip_forward': '1' } } }), 422, 'body.tuning.sysctl.net.ipv4.ip_forward'],
    ['an ethtool setting niclab does not change', spec({ tuning: { ethtool: { 'rx-flow-hash': 'on' } } }), 422, 'body.tuning.ethtool.rx-flow-hash'],
    ['an offload that is not on/off', spec({ tuning: { ethtool: { gro: 3 } } }), 422, 'body.tuning.ethtool.gro'],
    ['a qdisc outside the allow-list', spec({ tuning: { qdisc: { kind: 'netem' } } }), 422, 'body.tuning.qdisc.kind'],
    ['an MTU swept and set at once', spec({ tuning: { mtu: 4000 }, sweep: { mtu: [1500, 9000] } }), 422, 'body.tuning.mtu'],
    ['an MTU below IPv4\'s least', spec({ sweep: { mtu: [1500, 60] } }), 422, 'body.sweep.mtu[1]'],
    ['a pfifo limit of 0 packets', spec({ tuning: { qdisc: { kind: 'pfifo', limit: 0 } } }), 422, 'body.tuning.qdisc.limit'],
    ['a pfifo limit over 1,000,000 packets', spec({ tuning: { qdisc: { kind: 'pfifo', limit: 1_000_001 } } }), 422, 'body.tuning.qdisc.limit'],
    ['a bfifo limit under one full packet', spec({ tuning: { qdisc: { kind: 'bfifo', limit: 100 } } }), 422, 'body.tuning.qdisc.limit'],
    ['a limit on pfifo_fast', spec({ tuning: { qdisc: { kind: 'pfifo_fast', limit: 100 } } }), 422, 'body.tuning.qdisc.limit'],
    ['a codel target on pfifo', spec({ tuning: { qdisc: { kind: 'pfifo', target: 0.005 } } }), 422, 'body.tuning.qdisc.target'],
    ['an fq_codel target of 0', spec({ tuning: { qdisc: { kind: 'fq_codel', target: 0 } } }), 422, 'body.tuning.qdisc.target'],
    ['a qdisc with a tc word of its own', spec({ tuning: { qdisc: { kind: 'pfifo', options: 'limit 1; reboot' } } }), 422, 'body.tuning.qdisc.options'],
    // Per-end tuning and the factorial over which ends are tuned (issue 30). lo to lo: one host, one interface at both ends.
    ['a sysctl outside the allow-list in the sender\'s block', spec({ tuning: { sender: { sysctl: { 'net.ipv4.ip_forward': '1' } } } }), 422, 'body.tuning.sender.sysctl.net.ipv4.ip_forward'],
    ['one host tuned two ways at once: its sender and its receiver with different sysctls', spec({ tuning: { sender: { sysctl: { 'net.ipv4.tcp_wmem': '4096 16384 1048576' } }, receiver: { sysctl: { 'net.ipv4.tcp_rmem': '4096 131072 1048576' } } } }), 422, 'body.tuning.sender.sysctl.net.ipv4.tcp_wmem'],
    ['one interface at two MTUs at once: bidir with the sender\'s block setting one', spec({ direction: 'bidir', tuning: { sender: { mtu: 9000 } } }), 422, 'body.tuning.sender.mtu'],
    ['an MTU swept and set for one end', spec({ tuning: { receiver: { mtu: 4000 } }, sweep: { mtu: [1500, 9000] } }), 422, 'body.tuning.receiver.mtu'],
    ['a factorial without tuning', spec({ repeat: 2, factorial: {} }), 422, 'body.tuning'],
    ['a factorial without the receiver\'s block', spec({ repeat: 2, factorial: {}, tuning: { sender: { txqueuelen: 5000 } } }), 422, 'body.tuning.receiver'],
    ['a factorial with an empty block', spec({ repeat: 2, factorial: {}, tuning: { sender: {}, receiver: { txqueuelen: 5000 } } }), 422, 'body.tuning.sender'],
    ['a factorial with nothing to toggle at the receiver', spec({ repeat: 2, factorial: {}, tuning: { txqueuelen: 5000, sender: { txqueuelen: 5000 }, receiver: { txqueuelen: 5000 } } }), 422, 'body.tuning.receiver'],
    ['a factorial of one run per cell', spec({ factorial: {}, tuning: { sender: { txqueuelen: 5000 }, receiver: { txqueuelen: 5000 } } }), 422, 'body.repeat'],
    ['a factorial with adaptive repeat', spec({ repeat: { min: 2, max: 5 }, factorial: {}, tuning: { sender: { txqueuelen: 5000 }, receiver: { txqueuelen: 5000 } } }), 422, 'body.repeat'],
    ['a factorial beside a search', spec({ protocol: 'udp', udp: { packetSize: 1000, rate: { packetsPerSecond: 1000 } }, search: { target: 'ndr', max: { packetsPerSecond: 5000 } }, factorial: {} }), 422, 'body.factorial'],
    ['a factorial over a group of flows', spec({ repeat: 2, flows: { shape: 'mesh', members: { labels: {}, interface: 'lo' } }, factorial: {} }), 422, 'body.factorial'],
    ['a factorial of something other than ends', spec({ repeat: 2, factorial: { of: 'mtu' } }), 422, 'body.factorial.of'],
    ['missing flows', { engine: 'builtin' }, 422, 'body.flows'],
    ['unknown engine', spec({ engine: 'netperf' }), 422, 'body.engine'],
    ['unknown agent', spec({ flows: [{ from: lo, to: { agent: 'nobody', interface: 'lo' } }] }), 422, 'body.flows[0].to.agent'],
    ['unknown interface', spec({ flows: [{ from: { agent: AGENT, interface: 'eth99' }, to: lo }] }), 422, 'body.flows[0].from.interface'],
    ['udp without udp settings', spec({ protocol: 'udp' }), 422, 'body.udp'],
    ['interval longer than the run', spec({ interval: 5 }), 422, 'body.interval'],
    ['too many runs', spec({ repeat: 1000, sweep: { bufferLength: Array.from({ length: 20 }, (_, i) => i + 1) } }), 422, 'body.sweep'],
    ['rr sizes on a stream test', spec({ rr: { requestSize: 10 } }), 422, 'body.rr'],
    ['an rr size sweep on a stream test', spec({ sweep: { requestSize: [1, 64] } }), 422, 'body.sweep.requestSize'],
    ['rr in both directions at once', spec({ test: 'rr', direction: 'bidir' }), 422, 'body.direction'],
    ['a zero-byte rr request', spec({ test: 'rr', rr: { requestSize: 0 } }), 422, 'body.rr.requestSize'],
    ['rr over UDP with the builtin engine', spec({ test: 'rr', protocol: 'udp' }), 422, 'body.engine'],
    ['a label with a control character', spec({ labels: { note: 'a\nb' } }), 422, 'body.labels.note'],
  ];
  for (const injection of ['eth0;reboot', '$(id)', '-h', '../x', 'abcdefghijklmnop', 'eth0 ', '`id`', 'lo\u0000', '']) {
    cases.push([`interface name ${JSON.stringify(injection)}`, spec({ flows: [{ from: { agent: AGENT, interface: injection }, to: lo }] }), 422, 'body.flows[0].from.interface']);
  }
  for (const injection of ['a;b', '$(id)', '-x', '../etc']) {
    cases.push([`agent id ${JSON.stringify(injection)}`, spec({ flows: [{ from: lo, to: { agent: injection, interface: 'lo' } }] }), 422, 'body.flows[0].to.agent']);
  }

  for (const [name, body, status, field] of cases) {
    test(`${name}: ${status} naming ${field}`, async () => {
      const res = await post(body);
      assertResponse('createJob', res);
      assert.equal(res.status, status);
      assert.ok(
        res.body.errors?.some((e: { field: string }) => e.field === field),
        `expected an error for ${field}, got ${JSON.stringify(res.body.errors)}`,
      );
    });
  }

  test('malformed JSON is a 400 problem', async () => {
    const res = await request(stack.app).post('/v1/jobs').set('content-type', 'application/json').send('{"engine": ');
    assertResponse('createJob', res);
    assert.equal(res.status, 400);
    assert.match(res.body.detail, /not valid JSON/);
  });

  test('an oversized body is a 413 problem', async () => {
    const res = await post({ ...spec(), labels: { big: 'x'.repeat(stack.config.bodyLimitBytes) } });
    assertResponse('createJob', res);
    assert.equal(res.status, 413);
  });

  test('a body that is not JSON is a 415 problem', async () => {
    const res = await request(stack.app).post('/v1/jobs').set('content-type', 'text/plain').send('engine=builtin');
    assertResponse('createJob', res);
    assert.equal(res.status, 415);
  });

  test('none of the rejected requests created a job or reached an agent', async () => {
    // A stack of its own (a fresh key prefix) with a coordinator: anything accepted would run,
    // and its tasks would reach the agent.
    // The product's setup allowance (NICLAB_SETUP_SECONDS defaults to 10 s, the tests' 5): on a
    // loaded 2-core machine a receiver once took more than half of 5 s to start.
    const live = await startStack(testConfig(stack.config.redisUrl, { setupSeconds: 10 }), { agents: [AGENT], coordinator: true });
    const tasks = new Queue(live.services.keys.agentQueue(AGENT), { connection: live.services.redis, prefix: live.services.keys.bull });
    try {
      const answers: string[] = [];
      for (const [name, body, status] of cases) {
        const res = await request(live.app).post('/v1/jobs').set('content-type', 'application/json').send(JSON.stringify(body));
        if (res.status !== status) answers.push(`${name}: ${res.status}`);
      }
      // One valid job after them shows the pipeline was live: the coordinator took it and the
      // agent ran both of its ends, so whatever came before it would have run too.
      const control = await request(live.app).post('/v1/jobs').set('content-type', 'application/json').send(JSON.stringify(spec({ retries: 2 })));
      assert.equal(control.status, 202, JSON.stringify(control.body));
      let job = control.body;
      // Up to three attempts of a 1 s run with 10 s setup each, and a loaded machine's margin.
      for (const deadline = Date.now() + 60_000; !TERMINAL_STATUSES.includes(job.status) && Date.now() < deadline; await sleep(100)) {
        job = (await request(live.app).get(`/v1/jobs/${control.body.id}`)).body;
      }
      assert.equal(job.status, 'succeeded', JSON.stringify(job));
      // Every task ever added to the agent's queue (tasks leave it when done; its event log stays).
      const added = (await live.services.redis.xrange(tasks.keys.events!, '-', '+')).filter(([, fields]) => fields[fields.indexOf('event') + 1] === 'added');
      // A run made again (its `attempt` says so) sent one end more per earlier attempt, or both.
      const attempts = (await request(live.app).get(`/v1/jobs/${control.body.id}/runs`)).body.items.reduce((n: number, run: { attempt?: number }) => n + (run.attempt ?? 1), 0);
      assert.ok(added.length >= attempts + 1 && added.length <= 2 * attempts, `only the control job's receiver and sender (${attempts} attempt(s)) reached the agent, saw ${added.length} tasks`);
      const jobs = (await request(live.app).get('/v1/jobs?limit=200')).body.items.map((j: { id: string }) => j.id);
      assert.deepEqual(jobs, [control.body.id], 'no rejected request created a job');
      assert.deepEqual(answers, [], 'every case was refused as in its own test');
    } finally {
      await tasks.close();
      await live.close();
    }
  });
});

describe('GET /v1/jobs', () => {
  test('pages newest first with a cursor, without repeats, and filters by status', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await post(spec({ labels: { n: String(i) } }))).body.id);
    const seen: string[] = [];
    let cursor: string | null = null;
    do {
      const res: request.Response = await request(stack.app).get('/v1/jobs').query(cursor ? { limit: 2, cursor } : { limit: 2 });
      assertResponse('listJobs', res);
      assert.ok(res.body.items.length <= 2);
      seen.push(...res.body.items.map((j: { id: string }) => j.id));
      cursor = res.body.nextCursor;
    } while (cursor);
    assert.equal(new Set(seen).size, seen.length, 'no job appears twice');
    assert.deepEqual(seen.slice(0, 5), [...ids].reverse(), 'newest first');
    const created = seen.map((id) => id);
    assert.ok(created.length >= 5);

    await request(stack.app).delete(`/v1/jobs/${ids[0]}`);
    const canceled = await request(stack.app).get('/v1/jobs').query({ status: 'canceled' });
    assertResponse('listJobs', canceled);
    assert.ok(canceled.body.items.some((j: { id: string }) => j.id === ids[0]));
    assert.ok(canceled.body.items.every((j: { status: string }) => j.status === 'canceled'));
    const queued = await request(stack.app).get('/v1/jobs').query({ status: 'queued' });
    assert.ok(!queued.body.items.some((j: { id: string }) => j.id === ids[0]));
  });

  for (const [query, field] of [
    ['limit=0', 'query.limit'], ['limit=abc', 'query.limit'], ['limit=500', 'query.limit'],
    ['status=bogus', 'query.status'], ['cursor=$$$', 'query.cursor'], ['cursor=bm9wZQ', 'query.cursor'], ['color=red', 'query.color'],
  ] as const) {
    test(`?${query} is a 422 naming ${field}`, async () => {
      const res = await request(stack.app).get(`/v1/jobs?${query}`);
      assertResponse('listJobs', res);
      assert.equal(res.status, 422);
      assert.ok(res.body.errors.some((e: { field: string }) => e.field === field), JSON.stringify(res.body));
    });
  }
});

describe('one job', () => {
  test('GET returns the job with its runs; unknown is 404; a malformed id is 422', async () => {
    const { body: job } = await post(spec());
    const res = await request(stack.app).get(`/v1/jobs/${job.id}`);
    assertResponse('getJob', res);
    assert.equal(res.body.id, job.id);
    assert.deepEqual(res.body.runs, []);
    const runs = await request(stack.app).get(`/v1/jobs/${job.id}/runs`);
    assertResponse('listRuns', runs);
    assert.deepEqual(runs.body.items, []);

    const missing = await request(stack.app).get('/v1/jobs/00000000-0000-4000-8000-000000000000');
    assertResponse('getJob', missing);
    assert.equal(missing.status, 404);
    const bad = await request(stack.app).get('/v1/jobs/..%2Fetc');
    assert.equal(bad.status, 422);
    assert.equal(bad.headers['content-type'], 'application/problem+json; charset=utf-8');
  });

  test('DELETE cancels a queued job; a second DELETE is a 409', async () => {
    const { body: job } = await post(spec());
    const res = await request(stack.app).delete(`/v1/jobs/${job.id}`);
    assertResponse('cancelJob', res);
    assert.equal(res.status, 202);
    assert.equal(res.body.status, 'canceled');
    assert.equal(res.body.error.code, 'canceled');
    assert.ok(res.body.finishedAt);
    const again = await request(stack.app).delete(`/v1/jobs/${job.id}`);
    assertResponse('cancelJob', again);
    assert.equal(again.status, 409);
    const queue = stack.services.jobsQueue;
    assert.equal(await queue.getJob(job.id), undefined, 'the canceled job left the queue');
  });
});

describe('agents', () => {
  test('lists the registered agent with its interfaces; unknown is 404', async () => {
    const res = await request(stack.app).get('/v1/agents');
    assertResponse('listAgents', res);
    const agent = res.body.items.find((a: { id: string }) => a.id === AGENT);
    assert.ok(agent?.online);
    const loopback = agent.interfaces.find((i: { name: string }) => i.name === 'lo');
    assert.equal(loopback.operstate, 'unknown');
    assert.ok(loopback.addresses.some((a: { address: string }) => a.address === '127.0.0.1'));
    assert.equal(agent.engines.builtin.available, true);

    const one = await request(stack.app).get(`/v1/agents/${AGENT}`);
    assertResponse('getAgent', one);
    assert.equal(one.body.id, AGENT);
    const missing = await request(stack.app).get('/v1/agents/nobody');
    assertResponse('getAgent', missing);
    assert.equal(missing.status, 404);
  });

  test('each interface says which run holds its lease now, and is free again when it is released', async () => {
    const leasedBy = async () => {
      const res = await request(stack.app).get('/v1/agents');
      assertResponse('listAgents', res);
      const one = await request(stack.app).get(`/v1/agents/${AGENT}`);
      assertResponse('getAgent', one);
      const interfaces: { name: string; leasedBy: string | null }[] = res.body.items.find((a: { id: string }) => a.id === AGENT).interfaces;
      assert.deepEqual(one.body.interfaces.map((i: { leasedBy: string | null }) => i.leasedBy), interfaces.map((i) => i.leasedBy));
      return Object.fromEntries(interfaces.map((i) => [i.name, i.leasedBy]));
    };
    const before = await leasedBy();
    assert.ok(Object.keys(before).length > 0);
    assert.ok(Object.values(before).every((holder) => holder === null), JSON.stringify(before));
    const target = { agent: AGENT, interface: 'lo' };
    assert.equal(await stack.services.leases.acquire('run-held', [target]), null);
    assert.deepEqual(await leasedBy(), { ...before, lo: 'run-held' });
    await stack.services.leases.release('run-held', [target]);
    assert.deepEqual(await leasedBy(), before);
  });

  test('a stopped agent shows offline at once, and jobs naming it are refused', async () => {
    const agent = new AgentService({ ...stack.config, agentId: 'leaving' }, silentLog);
    await agent.start();
    assert.equal((await request(stack.app).get('/v1/agents/leaving')).body.online, true);
    await agent.stop();
    assert.equal((await request(stack.app).get('/v1/agents/leaving')).body.online, false);
    const res = await post(spec({ flows: [{ from: lo, to: { agent: 'leaving', interface: 'lo' } }] }));
    assert.equal(res.status, 422);
    assert.match(res.body.errors[0].message, /offline/);
  });
});

describe('health, docs and errors', () => {
  test('/healthz and /readyz are 200 with Redis up', async () => {
    const health = await request(stack.app).get('/healthz');
    assertResponse('getHealth', health);
    const ready = await request(stack.app).get('/readyz');
    assertResponse('getReady', ready);
    assert.equal(ready.status, 200);
  });

  test('/readyz is 503 when Redis is unreachable, /healthz stays 200', async () => {
    const services = createApiServices({ ...stack.config, redisUrl: `redis://127.0.0.1:${await freePort()}` }, silentLog);
    services.redis.on('error', () => undefined);
    const app = createApp(services);
    const ready = await request(app).get('/readyz');
    assertResponse('getReady', ready);
    assert.equal(ready.status, 503);
    assert.equal((await request(app).get('/healthz')).status, 200);
    services.redis.disconnect();
    await services.jobsQueue.close().catch(() => undefined);
  });

  test('/openapi.yaml serves the contract and /docs renders it from local assets', async () => {
    const spec = await request(stack.app).get('/openapi.yaml');
    assert.equal(spec.status, 200);
    assert.match(spec.text, /^openapi: 3\.1/);
    const docs = await request(stack.app).get('/docs');
    assert.equal(docs.status, 200);
    assert.match(docs.text, /swagger-ui-bundle\.js/);
    assert.doesNotMatch(docs.text, /https?:\/\//, 'no CDN');
    const bundle = await request(stack.app).get('/docs/assets/swagger-ui-bundle.js');
    assert.equal(bundle.status, 200);
    assert.ok(bundle.text.length > 100_000);
    const init = await request(stack.app).get('/docs/init.js');
    assert.match(init.text, /openapi\.yaml/);
  });

  test('unknown paths are 404 and wrong methods 405, both problem+json', async () => {
    const missing = await request(stack.app).get('/v1/nothing');
    assert.equal(missing.status, 404);
    assert.equal(missing.headers['content-type'], 'application/problem+json; charset=utf-8');
    const wrong = await request(stack.app).put('/v1/jobs');
    assert.equal(wrong.status, 405);
    assert.equal(wrong.headers.allow, 'GET, POST');
    assert.equal(wrong.body.status, 405);
  });
});
