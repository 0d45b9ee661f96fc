import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import request from 'supertest';
import type { Express } from 'express';
import { AgentService } from '@niclab/agent/agent';
import { createApp } from '@niclab/api/app';
import { createApiServices, type ApiServices } from '@niclab/api/services';
import { silentLog, testConfig } from '../helpers/stack.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';

/**
 * A job's `file` refused with a 422 naming the field: a path that is absolute, that goes up or
 * hides, or that names characters beyond the plain ones; an agent without a file directory at
 * an end that needs one (whichever way the data go); a file block that reads and writes nothing;
 * options of the other end; file I/O beside what it cannot be (UDP, rr, streams, a flow's own test).
 */
const disk = { agent: 'fdisk', interface: 'lo' };
const plain = { agent: 'fplain', interface: 'lo' };

let redis: TestRedis;
let services: ApiServices;
let app: Express;
let dir: string;
const agents: AgentService[] = [];

before(async () => {
  redis = await startTestRedis();
  const config = testConfig(redis.url);
  dir = mkdtempSync(join(tmpdir(), 'niclab-api-files-'));
  services = createApiServices(config, silentLog);
  app = createApp(services);
  for (const [agentId, fileDir] of [['fdisk', dir], ['fplain', undefined]] as const) {
    const agent = new AgentService({ ...config, agentId, fileDir }, silentLog);
    await agent.start();
    agents.push(agent);
  }
});

after(async () => {
  for (const agent of agents) await agent.stop();
  await services?.close();
  await redis?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const post = (spec: Record<string, unknown>) => request(app).post('/v1/jobs').send({ duration: 1, flows: [{ from: disk, to: disk }], ...spec });

/** A 422 whose errors include `field` with a message matching `message`, and nothing queued. */
async function refused(spec: Record<string, unknown>, field: string, message: RegExp): Promise<void> {
  const before = await services.jobsQueue.count();
  const res = await post(spec);
  assert.equal(res.status, 422, `${JSON.stringify(spec)}: ${res.status} ${JSON.stringify(res.body)}`);
  assert.ok(res.body.errors.some((e: { field: string; message: string }) => e.field === field && message.test(e.message)), `${JSON.stringify(spec)}: wanted ${field} ${message}, got ${JSON.stringify(res.body.errors)}`);
  assert.equal(await services.jobsQueue.count(), before, 'nothing was queued');
}

describe('file I/O refused with a 422 naming the field', () => {
  test('an absolute source path', async () => {
    for (const source of ['/etc/passwd', '/srv/niclab/data.bin']) await refused({ file: { source } }, 'body.file.source', /not absolute/);
  });

  test('a source that goes up or names "." (traversal)', async () => {
    for (const source of ['..', '../x', 'a/../../etc/passwd', 'a/..', './data.bin', 'a/./b']) await refused({ file: { source } }, 'body.file.source', /must not name "\." or "\.\."/);
  });

  test('a hidden source, one starting like an option, and characters beyond the plain ones', async () => {
    for (const source of ['.niclab-fdisk@0-0-receiver.sink', '.bashrc', 'a/.hidden', '-F', 'a/--help', 'data bin', 'a//b', 'a/', 'data;id', '$(id)', 'data\nbin', 'dätä', 'x'.repeat(1025)]) {
      await refused({ file: { source } }, 'body.file.source', /a path relative to the agent's file directory, at most 1,024 characters/);
    }
  });

  test('an end whose agent has no file directory: the source at a sender, the sink at a receiver, a reverse leg\'s sender too', async () => {
    await refused({ flows: [{ from: plain, to: disk }], file: { source: 'data.bin' } }, 'body.file.source', /^agent "fplain" has no file directory \(NICLAB_FILE_DIR\) to read the source from \(the sender of flow 0\)$/);
    await refused({ flows: [{ from: disk, to: plain }], file: { sink: true } }, 'body.file.sink', /^agent "fplain" has no file directory \(NICLAB_FILE_DIR\) to write the sink in \(the receiver of flow 0\)$/);
    // Reverse: data go from `to` to `from`, so `to` reads the source.
    await refused({ direction: 'reverse', flows: [{ from: disk, to: plain }], file: { source: 'data.bin' } }, 'body.file.source', /agent "fplain" .* \(the sender of flow 0 reverse\)/);
    await refused({ sweep: { direction: ['forward', 'reverse'] }, flows: [{ from: plain, to: disk }], file: { sink: true } }, 'body.file.sink', /agent "fplain" .* \(the receiver of flow 0 reverse\)/);
  });

  test('a file block that reads and writes nothing, and each end\'s option without its end', async () => {
    for (const file of [{}, { sink: false }, { probeSeconds: 2 }]) await refused({ file }, 'body.file.sink', /give a source, a sink \(true\) or both/);
    await refused({ file: { sink: true, dropCache: true } }, 'body.file.source', /is required with dropCache/);
    await refused({ file: { source: 'data.bin', ioMode: 'dsync' } }, 'body.file.sink', /must be true with ioMode dsync/);
  });

  test('file I/O beside what it cannot be: UDP, test rr, several streams, a flow\'s own test; and sweep.io without a file', async () => {
    const file = { sink: true };
    await refused({ file, protocol: 'udp', udp: { packetSize: 1000, rate: { packetsPerSecond: 10 } } }, 'body.file', /applies to protocol "tcp" only: iperf3 refuses a file over UDP/);
    await refused({ file, test: 'rr' }, 'body.file', /applies to test "stream" only/);
    await refused({ file, test: 'probe' }, 'body.file', /applies to test "stream" only/);
    await refused({ file, streams: 2 }, 'body.file', /needs one stream a flow \(streams 1\)/);
    await refused({ file, sweep: { streams: [1, 2] } }, 'body.file', /not with a sweep of streams/);
    await refused({ file, flows: [{ from: disk, to: disk, test: { kind: 'stream', streams: 1 } }] }, 'body.file', /not beside a flow's own test/);
    await refused({ sweep: { io: ['memory', 'file'] } }, 'body.sweep.io', /needs `file`/);
  });

  test('a job that passes is stored with its defaults: a memory point beside the file point, buffered, no cache drop, 2 s probes', async () => {
    const res = await post({ flows: [{ from: disk, to: disk }], file: { source: 'sub/data-1.bin', sink: true } });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    const job = (await request(app).get(`/v1/jobs/${res.body.id}`)).body;
    assert.deepEqual(job.spec.file, { source: 'sub/data-1.bin', sink: true, ioMode: 'buffered', dropCache: false, probeSeconds: 2 });
    assert.deepEqual(job.spec.sweep, { io: ['memory', 'file'] });
    assert.equal(job.progress.runsTotal, 2);
  });
});
