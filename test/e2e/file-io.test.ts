import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import request from 'supertest';
import type { Express } from 'express';
import { AgentService } from '@niclab/agent/agent';
import { createApp } from '@niclab/api/app';
import { createApiServices, type ApiServices } from '@niclab/api/services';
import { Coordinator } from '@niclab/coordinator/coordinator';
import { silentLog, testConfig, type TestConfig } from '../helpers/stack.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { waitFor } from '../helpers/processes.js';

/**
 * File I/O on loopback (JobSpec.file, as iperf3 -F): a file point beside its memory point, each
 * end's disk measured alone, the stages named; the agent's own checks when it runs (a symlink out
 * of its directory); its temporary files gone however the run ends, and at its next start.
 */
const lo = (agent: string) => ({ agent, interface: 'lo' });
// More than loopback's socket buffers hold: iperf3's server stops reading at its client's end.
const SOURCE_BYTES = 24 * 1024 * 1024;

let redis: TestRedis;
let config: TestConfig;
let services: ApiServices;
let app: Express;
let coordinator: Coordinator;
const agents: AgentService[] = [];
const dirs = { src: '', dst: '' };

async function finished(id: string, timeoutMs = 30_000): Promise<any> {
  let job: any;
  await waitFor(`job ${id} to end`, async () => {
    job = (await request(app).get(`/v1/jobs/${id}`)).body;
    return ['succeeded', 'failed', 'canceled'].includes(job.status);
  }, timeoutMs);
  return job;
}

async function submit(spec: object): Promise<string> {
  const res = await request(app).post('/v1/jobs').send(spec);
  assert.equal(res.status, 202, JSON.stringify(res.body));
  return res.body.id;
}

/** The temporary files an agent made in its directory (hidden, `.niclab-<agent>@...`). */
const leftovers = (dir: string) => readdirSync(dir).filter((name) => name.startsWith('.niclab-'));

before(async () => {
  redis = await startTestRedis();
  config = testConfig(redis.url);
  dirs.src = mkdtempSync(join(tmpdir(), 'niclab-src-'));
  dirs.dst = mkdtempSync(join(tmpdir(), 'niclab-dst-'));
  writeFileSync(join(dirs.src, 'random.bin'), randomBytes(SOURCE_BYTES));
  services = createApiServices(config, silentLog);
  app = createApp(services);
  for (const [id, fileDir] of [['fsrc', dirs.src], ['fdst', dirs.dst]] as const) {
    const agent = new AgentService({ ...config, agentId: id, fileDir }, silentLog);
    await agent.start();
    agents.push(agent);
  }
  coordinator = new Coordinator(config, silentLog);
  await coordinator.start();
});

after(async () => {
  for (const agent of agents) await agent.stop();
  await coordinator?.stop();
  await services?.close();
  await redis?.stop();
  for (const dir of Object.values(dirs)) if (dir) rmSync(dir, { recursive: true, force: true });
});

describe('file I/O on loopback', () => {
  for (const engine of ['builtin', 'iperf3'] as const) {
    test(`${engine}: a file point beside its memory point: the source read to its end, the sink written and removed, each disk alone, the stages named`, async (ctx) => {
      const id = await submit({ engine, duration: 1, flows: [{ from: lo('fsrc'), to: lo('fdst') }], file: { source: 'random.bin', sink: true, probeSeconds: 0.5 } });
      const job = await finished(id);
      assert.equal(job.status, 'succeeded', JSON.stringify(job.error ?? job.runs?.map((r: any) => r.error)));
      assert.deepEqual(job.spec.sweep.io, ['memory', 'file'], 'a memory point beside the file point, by default');
      assert.deepEqual(job.spec.file, { source: 'random.bin', sink: true, ioMode: 'buffered', dropCache: false, probeSeconds: 0.5 });
      const [memory, file] = job.runs;
      assert.deepEqual([memory.point.io, file.point.io], ['memory', 'file']);
      assert.equal(memory.flows[0].file, undefined, 'no file at the memory point');
      const f = file.flows[0];
      ctx.diagnostic(JSON.stringify({ memory: memory.flows[0].bitsPerSecond, file: f.bitsPerSecond, stages: f.file, bottleneck: f.bottleneck?.reason }));
      // The file is 24 MiB: on loopback it ends long before the run's 1 s, as iperf3 -F does.
      assert.equal(f.sender.bytes, SOURCE_BYTES, 'the sender sent the file, all of it');
      // iperf3's server stops reading when its client ends the test: what was still on the way
      // is not counted or written (its man page: the received file's length may not be correct).
      if (engine === 'builtin') assert.equal(f.receiver.bytes, SOURCE_BYTES);
      else assert.ok(f.receiver.bytes > 0 && f.receiver.bytes <= SOURCE_BYTES, `iperf3's server got ${f.receiver.bytes} B`);
      assert.ok(f.sender.realSeconds < 1, `the run ended at the file's end (${f.sender.realSeconds} s)`);
      assert.deepEqual(f.file.source, { ...f.file.source, path: 'random.bin', sizeBytes: SOURCE_BYTES, endedAtEof: true, cacheDropped: false });
      assert.deepEqual(f.file.sink, { ...f.file.sink, writtenBytes: f.receiver.bytes, removed: true }, 'the sink holds what the receiver got');
      assert.equal(f.file.ioMode, 'buffered');
      for (const disk of [f.file.source.disk, f.file.sink.disk]) assert.ok(disk.bytes > 0 && disk.seconds > 0 && Math.abs(disk.bitsPerSecond - (disk.bytes * 8) / disk.seconds) < 1e-6 * disk.bitsPerSecond);
      assert.ok(f.file.source.disk.bytes <= SOURCE_BYTES, 'the source probe reads the file, no more');
      assert.ok(f.diagnostics.sender.file.path.endsWith('/random.bin'));
      assert.match(f.diagnostics.receiver.file.path, /\/\.niclab-fdst@[0-9a-f-]+-0-receiver\.sink$/);
      assert.deepEqual(leftovers(dirs.dst), [], 'the sink and the probe files are gone');
      const report = (await request(app).get(`/v1/jobs/${id}/report`)).body;
      const [stage] = report.stages;
      assert.equal(stage.point.io, 'file');
      assert.equal(stage.network.mean, memory.flows[0].bitsPerSecond);
      assert.equal(stage.transfer.mean, f.bitsPerSecond);
      assert.equal(stage.sinkDisk.mean, f.file.sink.disk.bitsPerSecond);
      const slowest = [['source disk', stage.sourceDisk.mean], ['network', stage.network.mean], ['sink disk', stage.sinkDisk.mean]].sort((a, b) => (a[1] as number) - (b[1] as number))[0]![0];
      assert.equal(stage.slowest, slowest);
      const table = (await request(app).get(`/v1/jobs/${id}/report?format=table`)).text;
      assert.match(table, /stages, file against memory/);
      assert.match(table, new RegExp(`^io=file flow 0: ${slowest}: `, 'm'));
      const csv = (await request(app).get(`/v1/jobs/${id}/report?format=csv`)).text;
      assert.match(csv.split('\n')[0]!, /^io,flow,/);
      assert.match(csv, /\nfile,0,forward,fsrc:lo,fdst:lo,sinkDiskBitsPerSecond,1,/);
    });
  }

  test('a source that is a symlink out of the directory is refused when the run starts (file_refused), within seconds', async () => {
    symlinkSync('/etc/hostname', join(dirs.src, 'escape'));
    const t0 = Date.now();
    const id = await submit({ duration: 20, flows: [{ from: lo('fsrc'), to: lo('fdst') }], file: { source: 'escape', sink: true }, sweep: { io: ['file'] } });
    const job = await finished(id);
    const [run] = job.runs;
    assert.equal(job.status, 'failed');
    assert.equal(run.error.code, 'file_refused', JSON.stringify(run.error));
    assert.match(run.error.message, /leads out of the file directory of agent fsrc/);
    assert.ok(Date.now() - t0 < 10_000, 'the receiver did not wait out the 20 s run');
    assert.deepEqual(leftovers(dirs.dst), [], "the receiver's sink is gone");
  });

  test('a canceled run removes its sink at once', async () => {
    const id = await submit({ duration: 30, flows: [{ from: lo('fsrc'), to: lo('fdst') }], file: { sink: true }, sweep: { io: ['file'] } });
    await waitFor('the sink file', async () => leftovers(dirs.dst).length > 0, 15_000);
    assert.equal((await request(app).delete(`/v1/jobs/${id}`)).status, 202);
    await waitFor('the sink removed', async () => leftovers(dirs.dst).length === 0, 5_000);
    assert.equal((await finished(id)).status, 'canceled');
  });

  test("an agent starting again removes the temporary files its killed run left, and no other agent's", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'niclab-left-'));
    try {
      const mine = ['.niclab-fback@6c0b6f4e-0000-4000-8000-000000000001-0-receiver.sink', '.niclab-fback@6c0b6f4e-0000-4000-8000-000000000001-0-receiver.probe'];
      const others = ['.niclab-fback-b@6c0b6f4e-0000-4000-8000-000000000001-0-receiver.sink', 'data.bin'];
      for (const name of [...mine, ...others]) writeFileSync(join(dir, name), 'x');
      const agent = new AgentService({ ...config, agentId: 'fback', fileDir: dir }, silentLog);
      await agent.start();
      await agent.stop();
      assert.deepEqual(readdirSync(dir).sort(), others.sort());
      assert.ok(!mine.some((name) => existsSync(join(dir, name))));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
