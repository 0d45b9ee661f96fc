import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import request from 'supertest';
import { AgentService } from '@niclab/agent/agent';
import { apiPolicy, loadPolicy, newToken, OPEN_POLICY, principalNamed } from '@niclab/api/policy';
import { ConfigError } from '@niclab/shared/runtime/config';
import { assertResponse } from '../helpers/contract.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { silentLog, startStack, testConfig, type Stack } from '../helpers/stack.js';

const dir = mkdtempSync(join(tmpdir(), 'niclab-policy-'));
const reader = newToken();
const runner = newToken();
const other = newToken();
const admin = newToken();
const limited = newToken();
const racer = newToken();
const meshy = newToken();
/** Spend requests on the rate-limit test only, so it knows each one's count from the first request. */
const floods = [newToken(), newToken()];
const REQUESTS_PER_MINUTE = 400;
const lo = (agent: string) => ({ agent, interface: 'lo' });
const spec = (extra: Record<string, unknown> = {}) => ({ engine: 'builtin', duration: 1, flows: [{ from: lo('r1'), to: lo('r1') }], ...extra });

function policyFile(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

const POLICY = `
# niclab access policy of the tests
anonymous: none
metrics: read
requestsPerMinute: ${REQUESTS_PER_MINUTE}
limits:
  maxDurationSeconds: 30
tokens:
  - { name: reader, sha256: ${reader.sha256}, scopes: [read] }
  - { name: runner, sha256: ${runner.sha256}, scopes: [run] }
  - { name: other, sha256: ${other.sha256}, scopes: [run] }
  - { name: admin, sha256: ${admin.sha256}, scopes: [admin] }
  - name: limited
    sha256: ${limited.sha256}
    scopes: [run]
    limits: { maxDurationSeconds: 5, maxStreams: 2, maxUdpBitsPerSecond: 10000000, maxRunsPerJob: 4, maxConcurrentJobs: 2, agentLabels: { rack: r1 }, interfaces: [lo] }
  - { name: racer, sha256: ${racer.sha256}, scopes: [run], limits: { maxConcurrentJobs: 3 } }
  - { name: meshy, sha256: ${meshy.sha256}, scopes: [run], limits: { maxRunsPerJob: 2 } }
  - { name: flood1, sha256: ${floods[0]!.sha256}, scopes: [read] }
  - { name: flood2, sha256: ${floods[1]!.sha256}, scopes: [read] }
`;

let redis: TestRedis;
let stack: Stack;
let r2: AgentService;

before(async () => {
  redis = await startTestRedis();
  // No coordinator: accepted jobs stay queued, which is what the concurrency limit counts.
  const config = testConfig(redis.url, { policyFile: policyFile('policy.yaml', POLICY), agentLabels: { rack: 'r1' } });
  stack = await startStack(config, { agents: ['r1'] });
  r2 = new AgentService({ ...config, agentId: 'r2', agentLabels: { rack: 'r2' } }, silentLog);
  await r2.start();
});
after(async () => {
  await r2?.stop();
  await stack?.close();
  await redis?.stop();
});

const as = (token: { token: string } | null, method: 'get' | 'post' | 'delete', path: string) => {
  const req = request(stack.app)[method](path);
  return token ? req.set('authorization', `Bearer ${token.token}`) : req;
};

describe('tokens and scopes', () => {
  test('no token is 401 with WWW-Authenticate; an unknown one too; health stays open', async () => {
    const none = await as(null, 'get', '/v1/jobs');
    assertResponse('listJobs', none);
    assert.equal(none.status, 401);
    assert.equal(none.body.rule, 'token');
    assert.match(none.headers['www-authenticate'] ?? '', /^Bearer/);
    const forged = await request(stack.app).get('/v1/jobs').set('authorization', `Bearer ${reader.token}x`);
    assert.equal(forged.status, 401);
    assert.match(forged.headers['www-authenticate'] ?? '', /invalid_token/);
    const basic = await request(stack.app).get('/v1/jobs').set('authorization', 'Basic dXNlcjpwYXNz');
    assert.equal(basic.status, 401);
    assert.equal((await as(null, 'get', '/healthz')).status, 200);
    assert.equal((await as(null, 'get', '/readyz')).status, 200);
    assert.equal((await as(null, 'get', '/openapi.yaml')).status, 200);
  });

  test('metrics: read in the policy puts /metrics behind a read token', async () => {
    assert.equal((await as(null, 'get', '/metrics')).status, 401);
    assert.equal((await as(reader, 'get', '/metrics')).status, 200);
  });

  test('read may read but not submit (403 naming the scope); run may submit; the job records its owner', async () => {
    assert.equal((await as(reader, 'get', '/v1/agents')).status, 200);
    const denied = await as(reader, 'post', '/v1/jobs').send(spec());
    assertResponse('createJob', denied);
    assert.equal(denied.status, 403);
    assert.equal(denied.body.rule, 'scope');
    assert.match(denied.body.detail, /"run" scope/);
    const accepted = await as(runner, 'post', '/v1/jobs').send(spec());
    assert.equal(accepted.status, 202, JSON.stringify(accepted.body));
    assert.equal(accepted.body.owner, 'runner');
  });

  test('run cancels its own jobs only; admin cancels anyone\'s', async () => {
    const mine = (await as(runner, 'post', '/v1/jobs').send(spec())).body.id;
    const theirs = (await as(runner, 'post', '/v1/jobs').send(spec())).body.id;
    const foreign = await as(other, 'delete', `/v1/jobs/${mine}`);
    assertResponse('cancelJob', foreign);
    assert.equal(foreign.status, 403);
    assert.equal(foreign.body.rule, 'owner');
    assert.equal((await as(runner, 'delete', `/v1/jobs/${mine}`)).status, 202);
    assert.equal((await as(admin, 'delete', `/v1/jobs/${theirs}`)).status, 202);
  });

  test('tuning needs admin, and so does a sweep of the MTU', async () => {
    const res = await as(runner, 'post', '/v1/jobs').send(spec({ tuning: { mtu: 9000 } }));
    assert.equal(res.status, 403);
    assert.equal(res.body.errors[0].field, 'body.tuning');
    const swept = await as(runner, 'post', '/v1/jobs').send(spec({ sweep: { mtu: [1500, 9000] } }));
    assert.equal(swept.status, 403);
    assert.equal(swept.body.errors[0].field, 'body.sweep.mtu');
  });

  test('schedules belong to their creator: another run token may not pause or delete them', async () => {
    const created = await as(runner, 'post', '/v1/schedules').send({ name: 'mine', everySeconds: 3600, spec: spec() });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    assert.equal(created.body.owner, 'runner');
    assert.equal((await as(other, 'post', '/v1/schedules/mine/pause')).status, 403);
    assert.equal((await as(other, 'delete', '/v1/schedules/mine')).status, 403);
    assert.equal((await as(reader, 'delete', '/v1/schedules/mine')).status, 403);
    assert.equal((await as(runner, 'post', '/v1/schedules/mine/pause')).status, 200);
    assert.equal((await as(admin, 'delete', '/v1/schedules/mine')).status, 204);
  });
});

describe('limits', () => {
  const cases: [string, Record<string, unknown>, number, string, string][] = [
    ['duration over the token limit', { duration: 6 }, 422, 'maxDurationSeconds', 'body.duration'],
    ['an MLRsearch whose final trials are over the token limit', { duration: 1, protocol: 'udp', udp: { packetSize: 1000, rate: { packetsPerSecond: 100 } }, search: { algorithm: 'mlrsearch', min: { packetsPerSecond: 100 }, max: { packetsPerSecond: 200 }, goals: [{ lossRatio: 0, finalTrialDuration: 6 }] } }, 422, 'maxDurationSeconds', 'body.search.goals'],
    ['streams over the limit', { streams: 3 }, 422, 'maxStreams', 'body.streams'],
    ['a swept stream count over the limit', { sweep: { streams: [1, 4] } }, 422, 'maxStreams', 'body.sweep.streams'],
    ['UDP bit rate over the limit', { protocol: 'udp', udp: { packetSize: 1000, rate: { packetsPerSecond: 2000 } } }, 422, 'maxUdpBitsPerSecond', 'body.udp.rate'],
    ['too many runs', { repeat: 5 }, 422, 'maxRunsPerJob', 'body.repeat'],
    ['a group whose pairs make too many runs', { flows: { shape: 'mesh', members: { labels: {}, interface: 'lo' } }, repeat: 3 }, 422, 'maxRunsPerJob', 'body.flows'],
    ['an agent without the token\'s label', { flows: [{ from: lo('r1'), to: lo('r2') }] }, 403, 'agents', 'body.flows[0].to.agent'],
  ];
  for (const [name, extra, status, rule, field] of cases) {
    test(`${name}: ${status} naming rule ${rule} and ${field}`, async () => {
      const res = await as(limited, 'post', '/v1/jobs').send(spec(extra));
      assertResponse('createJob', res);
      assert.equal(res.status, status, JSON.stringify(res.body));
      assert.equal(res.body.rule, rule);
      assert.equal(res.body.errors[0].field, field);
    });
  }

  test('a schedule\'s firing checks its owner\'s limits against the group as it expands then: grown past maxRunsPerJob, the firing is a failed job that says why, counted in refused', async () => {
    const members: AgentService[] = [];
    const join = async (id: string) => {
      const agent = new AgentService({ ...stack.config, agentId: id, agentLabels: { mesh: 'x' } }, silentLog);
      await agent.start();
      members.push(agent);
    };
    stack.services.schedules.start(silentLog);
    try {
      await join('m1');
      await join('m2');
      const group = { shape: 'mesh', members: { labels: { mesh: 'x' }, interface: 'lo' } };
      const created = await as(meshy, 'post', '/v1/schedules').send({ name: 'grows', everySeconds: 1, spec: spec({ flows: group }) });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      await join('m3');
      // No coordinator here: a firing that was accepted stays queued, and the schedule skips while it is; cancel those.
      const deadline = Date.now() + 30_000;
      type Fired = { id: string; status: string; error: { code: string; message: string } | null; spec: { flows: unknown[]; labels?: Record<string, string> } };
      let refused: Fired | undefined;
      while (!refused) {
        assert.ok(Date.now() < deadline, 'no firing was refused');
        const { body } = await as(meshy, 'get', '/v1/jobs?limit=50');
        const fired = (body.items as Fired[]).filter((j) => j.spec.labels?.schedule === 'grows');
        for (const job of fired.filter((j) => j.status === 'queued')) {
          assert.equal(job.spec.flows.length, 2, 'a firing with m1 and m2 only is accepted');
          await as(meshy, 'delete', `/v1/jobs/${job.id}`);
        }
        refused = fired.find((j) => j.status === 'failed');
        await new Promise((r) => setTimeout(r, 200));
      }
      assert.equal(refused.error?.code, 'over_limit');
      assert.match(refused.error!.message, /maxRunsPerJob/);
      assert.match(refused.error!.message, /body\.flows its group expands to 6 pairs, the job makes up to 6 runs; the limit is 2/);
      assert.equal(refused.spec.flows.length, 6, 'the failed job shows the expansion it refused');
      const schedule = await as(meshy, 'get', '/v1/schedules/grows');
      assertResponse('getSchedule', schedule);
      assert.ok(schedule.body.refused >= 1, JSON.stringify(schedule.body));
      assert.ok(schedule.body.firings >= schedule.body.refused);
      const metrics = await as(reader, 'get', '/metrics');
      const counted = /^niclab_schedule_firings_total\{outcome="refused"\} (\d+)$/m.exec(metrics.text);
      assert.ok(counted && Number(counted[1]) >= schedule.body.refused, `refused firings on /metrics (the schedule fires on meanwhile): ${counted?.[0]} (schedule: ${schedule.body.refused})`);
    } finally {
      await as(meshy, 'delete', '/v1/schedules/grows');
      for (const agent of members) await agent.stop();
    }
  });

  test('the policy-wide limit applies to tokens without their own', async () => {
    const res = await as(runner, 'post', '/v1/jobs').send(spec({ duration: 31 }));
    assert.equal(res.status, 422);
    assert.equal(res.body.rule, 'maxDurationSeconds');
  });

  test('at most maxConcurrentJobs queued or running; a canceled one frees its place', async () => {
    const first = await as(limited, 'post', '/v1/jobs').send(spec());
    assert.equal(first.status, 202, JSON.stringify(first.body));
    assert.equal((await as(limited, 'post', '/v1/jobs').send(spec())).status, 202);
    const third = await as(limited, 'post', '/v1/jobs').send(spec());
    assert.equal(third.status, 403);
    assert.equal(third.body.rule, 'maxConcurrentJobs');
    assert.equal((await as(limited, 'delete', `/v1/jobs/${first.body.id}`)).status, 202);
    assert.equal((await as(limited, 'post', '/v1/jobs').send(spec())).status, 202);
  });
});

test('submissions racing for the last places: exactly maxConcurrentJobs get through, and the refused hold no place', async () => {
  const answers = await Promise.all(Array.from({ length: 12 }, () => as(racer, 'post', '/v1/jobs').send(spec())));
  const accepted = answers.filter((res) => res.status === 202);
  const refused = answers.filter((res) => res.status === 403);
  assert.equal(accepted.length, 3, JSON.stringify(answers.map((res) => res.status)));
  assert.equal(refused.length, 9);
  for (const res of refused) assert.equal(res.body.rule, 'maxConcurrentJobs');
  const active = await stack.services.redis.smembers(stack.services.keys.ownerActive('racer'));
  assert.deepEqual(active.sort(), accepted.map((res) => res.body.id).sort());
  // A place freed by a cancel is taken by exactly one of the next racers.
  assert.equal((await as(racer, 'delete', `/v1/jobs/${accepted[0]!.body.id}`)).status, 202);
  const next = await Promise.all(Array.from({ length: 4 }, () => as(racer, 'post', '/v1/jobs').send(spec())));
  assert.deepEqual(next.map((res) => res.status).sort(), [202, 403, 403, 403]);
});

describe('Idempotency-Key', () => {
  test('the same key and body answer the same job; another body is 422; keys are per token', async () => {
    const send = (token: { token: string }, key: string, body: object) => as(token, 'post', '/v1/jobs').set('idempotency-key', key).send(body);
    const first = await send(runner, 'nightly-2026-11-30', spec());
    assert.equal(first.status, 202);
    // The same body with its keys in another order is the same request.
    const again = await send(runner, 'nightly-2026-11-30', { flows: [{ to: lo('r1'), from: lo('r1') }], duration: 1, engine: 'builtin' });
    assertResponse('createJob', again);
    assert.equal(again.status, 202);
    assert.equal(again.body.id, first.body.id);
    assert.equal(again.headers['idempotent-replayed'], 'true');
    const changed = await send(runner, 'nightly-2026-11-30', spec({ duration: 2 }));
    assert.equal(changed.status, 422);
    assert.equal(changed.body.errors[0].field, 'header.idempotency-key');
    const otherToken = await send(other, 'nightly-2026-11-30', spec());
    assert.equal(otherToken.status, 202);
    assert.notEqual(otherToken.body.id, first.body.id);
  });

  test('concurrent duplicates make one job: the rest are 409 or the same job', async () => {
    const before = (await as(admin, 'get', '/v1/jobs?limit=200').expect(200)).body.items.length;
    const replies = await Promise.all(Array.from({ length: 8 }, () => as(runner, 'post', '/v1/jobs').set('idempotency-key', 'burst').send(spec())));
    const created = new Set(replies.filter((r) => r.status === 202).map((r) => r.body.id));
    assert.equal(created.size, 1, JSON.stringify(replies.map((r) => r.status)));
    for (const reply of replies) assert.ok(reply.status === 202 || reply.status === 409, String(reply.status));
    const afterwards = (await as(admin, 'get', '/v1/jobs?limit=200').expect(200)).body.items.length;
    assert.equal(afterwards - before, 1);
  });

  test('a request refused by validation does not use up its key', async () => {
    const bad = await as(runner, 'post', '/v1/jobs').set('idempotency-key', 'fix-me').send(spec({ flows: [{ from: lo('nope'), to: lo('r1') }] }));
    assert.equal(bad.status, 422);
    assert.equal((await as(runner, 'post', '/v1/jobs').set('idempotency-key', 'fix-me').send(spec())).status, 202);
  });

  test('a request that never answered (a failover kept its job but lost its queue entry): its key is 409 while it may still be running, then the retry takes over the job and queues it again', async () => {
    const first = await as(runner, 'post', '/v1/jobs').set('idempotency-key', 'lost-tail').send(spec());
    assert.equal(first.status, 202);
    const { redis: store, keys, jobsQueue } = stack.services;
    // What a failover between the job's write and the request's answer leaves on the new
    // master: the job, queued, with no queue entry, and the key taken but not answered.
    await jobsQueue.remove(first.body.id);
    const key = keys.idempotency('runner', createHash('sha256').update('lost-tail').digest('hex'));
    const remembered = JSON.parse((await store.get(key))!);
    assert.equal(remembered.jobId, first.body.id, 'the key names its job');
    const takenAgo = async (ms: number) => store.set(key, JSON.stringify({ ...remembered, pending: Date.now() - ms }), 'EX', 3600);
    await takenAgo(1000);
    const early = await as(runner, 'post', '/v1/jobs').set('idempotency-key', 'lost-tail').send(spec());
    assert.equal(early.status, 409, 'the first request may still be making it');
    assert.equal(early.headers['retry-after'], '1');
    await takenAgo(20_000);
    const retried = await as(runner, 'post', '/v1/jobs').set('idempotency-key', 'lost-tail').send(spec());
    assertResponse('createJob', retried);
    assert.equal(retried.status, 202);
    assert.equal(retried.body.id, first.body.id, 'the same job, not a second');
    assert.equal(retried.headers['idempotent-replayed'], 'true');
    assert.ok(await jobsQueue.getJob(first.body.id), 'queued again');
    assert.equal(JSON.parse((await store.get(key))!).pending, undefined, 'and the key answered');
  });

  test('a key that is not visible ASCII is 422 naming the header', async () => {
    const res = await as(runner, 'post', '/v1/jobs').set('idempotency-key', 'x'.repeat(201)).send(spec());
    assert.equal(res.status, 422);
    assert.equal(res.body.errors[0].field, 'header.idempotency-key');
  });
});

describe('request limits', () => {
  test('a body over NICLAB_BODY_LIMIT_BYTES is 413 problem+json', async () => {
    const res = await as(runner, 'post', '/v1/jobs').set('content-type', 'application/json').send(JSON.stringify({ ...spec(), labels: { pad: 'x'.repeat(70_000) } }));
    assert.equal(res.status, 413);
    assert.match(res.headers['content-type'] ?? '', /application\/problem\+json/);
  });

  test('a caller without a valid token is refused before its body is read: 401, not 413 or 400', async () => {
    const big = JSON.stringify({ ...spec(), labels: { pad: 'x'.repeat(70_000) } });
    for (const token of [null, { token: `${runner.token}x` }]) {
      const oversized = await as(token, 'post', '/v1/jobs').set('content-type', 'application/json').send(big);
      assert.equal(oversized.status, 401);
      const malformed = await as(token, 'post', '/v1/jobs').set('content-type', 'application/json').send('{"engine":');
      assert.equal(malformed.status, 401);
    }
    // A reader may not submit: refused for its scope before the body matters.
    assert.equal((await as(reader, 'post', '/v1/jobs').set('content-type', 'application/json').send(big)).status, 403);
  });

  test('more requests per minute than the policy allows are 429 with Retry-After; other tokens go on', async () => {
    const WINDOW_MS = 60_000;
    // The count lives in fixed clock minutes: a burst that straddles a minute boundary is sent
    // again, once, with the other token (whose count in the new minute is still 0).
    for (const [attempt, flood] of floods.entries()) {
      const window = Math.floor(Date.now() / WINDOW_MS);
      let limitedAt = 0;
      let refused: request.Response | undefined;
      let sentAt = 0;
      let answeredAt = 0;
      for (let i = 1; i <= REQUESTS_PER_MINUTE + 50 && !limitedAt; i++) {
        sentAt = Date.now();
        const res = await as(flood, 'get', '/v1/agents');
        answeredAt = Date.now();
        if (res.status === 429) [limitedAt, refused] = [i, res];
        else assert.equal(res.status, 200, `request ${i}: ${JSON.stringify(res.body)}`);
      }
      if (Math.floor(Date.now() / WINDOW_MS) !== window && attempt === 0) continue;
      assert.equal(limitedAt, REQUESTS_PER_MINUTE + 1, `a token of its own, ${REQUESTS_PER_MINUTE} a minute in the policy: limited at request ${limitedAt}`);
      assertResponse('listAgents', refused!);
      assert.equal(refused!.body.rule, 'requestsPerMinute');
      // Retry-After counts the seconds to the next minute, as the server saw the clock when the request arrived.
      const untilNext = (now: number) => Math.max(1, Math.ceil(((window + 1) * WINDOW_MS - now) / 1000));
      const retryAfter = Number(refused!.headers['retry-after']);
      assert.ok(retryAfter >= untilNext(answeredAt) && retryAfter <= untilNext(sentAt), `Retry-After ${refused!.headers['retry-after']}: the seconds left in this minute, ${untilNext(answeredAt)}-${untilNext(sentAt)}`);
      // Still limited, on any operation, for the rest of the minute.
      const again = await as(flood, 'get', '/v1/jobs');
      if (Math.floor(Date.now() / WINDOW_MS) === window) assert.equal(again.status, 429, 'the next request in the same minute');
      break;
    }
    assert.equal((await as(admin, 'get', '/v1/agents')).status, 200);
  });
});

describe('the policy file', () => {
  const refuse = (text: string, pattern: RegExp) => assert.throws(() => loadPolicy(policyFile('bad.yaml', text)), (e: Error) => e instanceof ConfigError && pattern.test(e.message));

  test('a schedule\'s owner is its token as the policy has it now (the limits a firing is held to); a token gone from the policy is no one', () => {
    const policy = loadPolicy(policyFile('policy.yaml', POLICY));
    assert.deepEqual(principalNamed(policy, 'meshy'), { name: 'meshy', scope: 'run', limits: { maxDurationSeconds: 30, maxRunsPerJob: 2 } });
    assert.equal(principalNamed(policy, 'removed'), null);
    assert.deepEqual(principalNamed(OPEN_POLICY, 'anonymous'), { name: 'anonymous', scope: 'admin', limits: {} });
  });

  test('anything wrong with it refuses the start, naming what', () => {
    refuse('tokens: [{ name: x, sha256: abc, scopes: [read] }]', /policy\.tokens\[0\]\.sha256/);
    refuse(`tokens: [{ name: x, sha256: ${reader.sha256}, scopes: [root] }]`, /policy\.tokens\[0\]\.scopes\[0\]/);
    refuse(`tokens: [{ name: x, sha256: ${reader.sha256}, scopes: [read] }, { name: x, sha256: ${admin.sha256}, scopes: [read] }]`, /used twice/);
    refuse('limits: { maxStreams: 2 }', /policy\.tokens is required/);
    refuse('tokens: [}', /not valid YAML/);
    refuse(`limits: { maxStreems: 2 }\ntokens: []`, /policy\.limits\.maxStreems is not a known field/);
    assert.throws(() => loadPolicy(join(dir, 'missing.yaml')), /cannot read/);
  });

  test('an API beyond loopback without one refuses to start, unless NICLAB_AUTH=none', () => {
    assert.throws(() => apiPolicy({ host: '0.0.0.0', policyFile: undefined, authNone: false }), /NICLAB_POLICY_FILE/);
    assert.equal(apiPolicy({ host: '0.0.0.0', policyFile: undefined, authNone: true }).enforced, false);
    assert.equal(apiPolicy({ host: '127.0.0.1', policyFile: undefined, authNone: false }).enforced, false);
    assert.throws(() => apiPolicy({ host: '0.0.0.0', policyFile: join(dir, 'policy.yaml'), authNone: true }), /choose one/);
  });
});
