import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { ApiClient } from '../helpers/api-client.js';
import { spawnNiclab, waitFor, type NiclabProcess, waitForApi } from '../helpers/processes.js';
import { startNamespacedAgent } from '../helpers/netns.js';
import { freePort, startTestRedis, uniquePrefix, type TestRedis } from '../helpers/redis.js';
import { NOT_ROOT } from '../helpers/skip.js';

let redis: TestRedis;
let api: NiclabProcess;
let agent: NiclabProcess;
let bare: NiclabProcess;
let client: ApiClient;
let env: Record<string, string>;
let emptyBin: string;
const lo = (agentId: string) => ({ agent: agentId, interface: 'lo' });

before(async () => {
  redis = await startTestRedis();
  const port = await freePort();
  env = { REDIS_URL: redis.url, NICLAB_PREFIX: uniquePrefix(), NICLAB_PORT: String(port), NICLAB_HEARTBEAT_SECONDS: '1', NICLAB_SETUP_SECONDS: '5' };
  api = spawnNiclab(['api'], env);
  agent = spawnNiclab(['agent', '--id', 'tools'], env);
  // An agent whose PATH has `ss` but no iperf3: a host where iperf3 is not installed.
  emptyBin = mkdtempSync(join(tmpdir(), 'niclab-bin-'));
  symlinkSync('/usr/bin/ss', join(emptyBin, 'ss'));
  bare = spawnNiclab(['agent', '--id', 'bare'], { ...env, PATH: emptyBin });
  client = new ApiClient(`http://127.0.0.1:${port}`);
  await waitForApi(client.base);
  for (const id of ['tools', 'bare']) await waitFor(`agent ${id}`, async () => (await client.call('getAgent', 'GET', `/v1/agents/${id}`)).body.online);
});

after(async () => {
  await Promise.all([agent?.stop(), bare?.stop()]);
  await api?.stop();
  await redis?.stop();
  rmSync(emptyBin, { recursive: true, force: true });
});

test('iperf3 TCP over loopback: both ends, retransmits, CPU, the exact command and version', async () => {
  const job = await client.succeed({ engine: 'iperf3', duration: 2, interval: 0.5, streams: 2, socketBuffer: 262144, flows: [{ from: lo('tools'), to: lo('tools') }] });
  const [f] = job.runs[0].flows;
  assert.ok(f.sender.bytes > 0);
  // iperf3's server stops counting with up to a socket buffer in flight (as in the engine contract).
  assert.ok(f.receiver.bytes <= f.sender.bytes && f.receiver.bytes >= f.sender.bytes * 0.99, `sent ${f.sender.bytes}, received ${f.receiver.bytes}`);
  assert.ok(f.sender.cpuSeconds > 0 && f.receiver.cpuSeconds > 0, 'CPU at both ends');
  assert.equal(f.sender.calls, null, 'iperf3 does not count TCP calls; none are invented');
  assert.equal(typeof f.retransmits, 'number');
  assert.ok(f.intervals.length >= 3);
  assert.equal(f.diagnostics.sender.command[0], 'iperf3');
  assert.ok(f.diagnostics.sender.command.includes('-P') && f.diagnostics.sender.command.includes('-w'));
  assert.match(f.diagnostics.sender.engineVersion, /^iperf 3\./);
  // -w 256 KiB: the kernel doubles what it is asked for (and caps it at wmem_max).
  assert.ok(f.diagnostics.sender.socketBuffers.sendBytes >= 262144, JSON.stringify(f.diagnostics.sender.socketBuffers));
  assert.equal(f.pathVerified, true);

  // Both ends' iperf3 JSON is kept as printed and downloadable from the run.
  for (const end of ['sender', 'receiver'] as const) {
    const link = f.diagnostics[end].rawOutput;
    assert.equal(link, `/v1/jobs/${job.id}/runs/0/flows/0/${end}/raw`);
    const res = await fetch(`${client.base}${link}`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    assert.match(res.headers.get('content-disposition') ?? '', /^attachment; filename="niclab-.*-flow0-.*\.json"$/);
    const raw = (await res.json()) as { start: { version: string }; end: Record<'sum_sent' | 'sum_received', { bytes: number }> };
    const sum = end === 'sender' ? raw.end.sum_sent : raw.end.sum_received;
    assert.equal(sum.bytes, f[end].bytes, `the ${end}'s figures come from this very output`);
    assert.ok(f.diagnostics[end].engineVersion.startsWith(raw.start.version), `${raw.start.version} vs ${f.diagnostics[end].engineVersion}`);
  }
  const missing = await fetch(`${client.base}/v1/jobs/${job.id}/runs/0/flows/1/sender/raw`);
  assert.equal(missing.status, 404);
  assert.match(missing.headers.get('content-type') ?? '', /problem\+json/);
});

test('iperf3 UDP at a packet rate: sent, received and lost as the kernel counted them, and jitter', { skip: NOT_ROOT }, async (t) => {
  // An agent in a namespace of its own: its kernel's UDP counters are this job's datagrams alone.
  const isolated = await startNamespacedAgent('tools-ns', env);
  try {
    await waitFor('agent tools-ns online', async () => (await client.call('getAgent', 'GET', '/v1/agents/tools-ns')).body.online, 30_000);
    const before = await isolated.udp();
    const job = await client.succeed({
      engine: 'iperf3', protocol: 'udp', duration: 2, interval: 1,
      udp: { packetSize: 1200, rate: { packetsPerSecond: 2000 } },
      flows: [{ from: lo('tools-ns'), to: lo('tools-ns') }],
    });
    const after = await isolated.udp();
    const [f] = job.runs[0].flows;
    assert.ok(f.udp, 'UDP figures');
    // The rate reached iperf3 as asked: its own JSON states the target it paced to.
    const raw = (await (await fetch(`${client.base}${f.diagnostics.sender.rawOutput}`)).json()) as { start: { test_start: { target_bitrate: number; blksize: number } } };
    assert.equal(raw.start.test_start.target_bitrate, 2000 * 1200 * 8);
    assert.equal(raw.start.test_start.blksize, 1200);
    // A starved iperf3 (two cores shared with the concurrent tier: a CI run's sent 3,361) falls
    // short; then the report says the sender fell short, never that the path took the rate.
    if (Math.abs(f.udp.sent - 4000) / 4000 >= 0.05) {
      t.diagnostic(`sent ${f.udp.sent} of 2000 pps x 2 s: ${f.bottleneck?.verdict}: ${f.bottleneck?.reason}`);
      assert.ok(f.udp.sent < 4000, `sent ${f.udp.sent} of 2000 pps x 2 s`);
      assert.equal(f.udp.achievedPacketsPerSecond, f.udp.sent / 2);
      assert.match(f.bottleneck?.reason ?? '', new RegExp(`(achieved|offered) ${Math.round(f.udp.sent / 2).toLocaleString('en-US')} of 2,000 pps`), JSON.stringify(f.bottleneck));
    }
    // The kernel's own counts: iperf3's UDP handshake adds a datagram each way (its client's
    // hello, its server's reply) to its data; RcvbufErrors is what the receiver's socket dropped.
    const out = after.OutDatagrams - before.OutDatagrams;
    const into = after.InDatagrams - before.InDatagrams;
    const dropped = after.RcvbufErrors - before.RcvbufErrors;
    const counts = `niclab sent ${f.udp.sent}, received ${f.udp.received}, lost ${f.udp.lost}; the kernel: out ${out}, in ${into}, RcvbufErrors ${dropped}`;
    t.diagnostic(counts);
    assert.ok(out - f.udp.sent >= 0 && out - f.udp.sent <= 4, counts);
    assert.ok(into - f.udp.received >= 0 && into - f.udp.received <= 4, counts);
    assert.ok(Math.abs(out - into - f.udp.lost) <= 4, counts);
    // On loopback a datagram is lost where the receiver's socket dropped it (a busy machine
    // starves iperf3's reader: the kernel's RcvbufErrors), or because iperf3's server stopped
    // reading at the test's end with it still queued (the kernel counts InDatagrams as they are
    // read): a fresh-clone run lost 5 so, out 4,002 and in 3,997 with RcvbufErrors 0, niclab's
    // loss the kernel's own. That tail is at most 10 ms of the rate here (20 datagrams).
    assert.ok(f.udp.lost - dropped >= -4 && f.udp.lost - dropped <= 4 + 20, counts);
    // And a loose cap, so a pacing or buffer regression that loses much is not the kernel's to excuse.
    assert.ok(f.udp.lossRatio < 0.1, `loss ${f.udp.lossRatio} on loopback: ${counts}`);
    assert.ok(f.udp.jitterSeconds >= 0);
    assert.equal(f.sender.calls, f.udp.sent, 'a UDP call is a datagram');
    assert.equal(f.retransmits, null);
  } finally {
    await isolated.stop();
  }
});

test('iperf3 absent on an agent: the submission is a 422 that says so', async () => {
  const agentInfo = (await client.call('getAgent', 'GET', '/v1/agents/bare')).body;
  assert.equal(agentInfo.engines.iperf3.available, false);
  assert.match(agentInfo.engines.iperf3.reason, /not installed/);
  const res = await client.submit({ engine: 'iperf3', duration: 1, flows: [{ from: lo('tools'), to: lo('bare') }] });
  assert.equal(res.status, 422);
  assert.equal(res.body.errors[0].field, 'body.engine');
  assert.match(res.body.errors[0].message, /bare cannot run the iperf3 engine: iperf3 is not installed/);
  // The builtin engine still runs there.
  assert.equal((await client.submit({ engine: 'builtin', duration: 1, flows: [{ from: lo('tools'), to: lo('bare') }] })).status, 202);
});

test('iperf3 refuses what it cannot do, with reasons', async () => {
  const rr = await client.submit({ engine: 'iperf3', test: 'rr', duration: 1, flows: [{ from: lo('tools'), to: lo('tools') }] });
  assert.equal(rr.status, 422);
  assert.match(rr.body.errors.map((e: { message: string }) => e.message).join('; '), /request\/response/);
  const fractional = await client.submit({ engine: 'iperf3', duration: 1.5, flows: [{ from: lo('tools'), to: lo('tools') }] });
  assert.equal(fractional.status, 422);
  assert.match(fractional.body.errors[0].message, /whole seconds/);
});
