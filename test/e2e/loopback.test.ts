import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { Keys } from '@niclab/shared/stores/keys';
import { Leases } from '@niclab/shared/stores/leases';
import { createRedis } from '@niclab/shared/runtime/redis';
import type { ApiClient } from '../helpers/api-client.js';
import { startNiclab, type TestNiclab } from '../helpers/niclab.js';
import { childPids, isAlive, spawnNiclab, waitFor, waitForApi } from '../helpers/processes.js';
import { freePort } from '../helpers/redis.js';
import { startNamespacedAgent } from '../helpers/netns.js';
import { NOT_ROOT } from '../helpers/skip.js';
import { followJob, statusChanges } from '../helpers/sse.js';

let niclab: TestNiclab;
let client: ApiClient;
let env: Record<string, string>;
const lo = (agentId: string) => ({ agent: agentId, interface: 'lo' });
const loCounter = (name: string) => Number(readFileSync(`/sys/class/net/lo/statistics/${name}`, 'utf8'));
const loCounters = () => ({ txBytes: loCounter('tx_bytes'), rxBytes: loCounter('rx_bytes') });

before(async () => {
  niclab = await startNiclab(['e2e']);
  ({ client, env } = niclab);
});

after(async () => {
  await niclab?.stop();
});

test('a TCP job over loopback goes queued -> running -> succeeded with both ends measured', async (ctx) => {
  const loBefore = loCounters();
  // The interface is held until the job's event stream is open, so the stream must carry every
  // change from queued on, whatever the load (a poll can miss a state while its request waits).
  const redis = createRedis(env.REDIS_URL!);
  const leases = new Leases(redis, new Keys(env.NICLAB_PREFIX!));
  assert.equal(await leases.acquire('loopback-test-hold', [lo('e2e')]), null);
  let stream: Awaited<ReturnType<typeof followJob>>;
  let submitted: { status: number; body: any };
  try {
    submitted = await client.submit({ engine: 'builtin', protocol: 'tcp', duration: 2, bufferLength: 65536, interval: 0.5, flows: [{ from: lo('e2e'), to: lo('e2e') }] });
    assert.equal(submitted.status, 202, JSON.stringify(submitted.body));
    stream = await followJob(client, submitted.body.id);
  } finally {
    await leases.release('loopback-test-hold', [lo('e2e')]);
    redis.disconnect();
  }
  const { job, seen } = await client.pollFinish(submitted.body.id);
  const loAfter = loCounters();
  assert.equal(job.status, 'succeeded', JSON.stringify(job.error));
  const order = ['queued', 'running', 'succeeded'];
  assert.deepEqual(seen, order.filter((s) => seen.includes(s)), `statuses in order: ${seen.join(' -> ')}`);
  const streamed = statusChanges(await stream.events);
  assert.deepEqual(streamed, order, `the event stream showed ${streamed.join(' -> ')}`);
  assert.deepEqual(job.progress, { runsDone: 1, runsTotal: 1 });
  const [run] = job.runs;
  assert.equal(run.status, 'succeeded');
  const [flow] = run.flows;
  assert.ok(flow.sender.bytes > 0);
  assert.equal(flow.receiver.bytes, flow.sender.bytes, 'sender bytes equal receiver bytes');
  assert.ok(flow.bitsPerSecond > 0);
  assert.ok(flow.sender.cpuSeconds > 0 && flow.receiver.cpuSeconds > 0, 'CPU measured at both ends');
  assert.ok(flow.intervals.length >= 3, `intervals: ${flow.intervals.length}`);
  // pathVerified against lo's counters as this test reads them itself, around the whole job: they
  // carried the flow's bytes, and the agent's deltas (taken within the job) are no more than they.
  const ours = { txBytes: loAfter.txBytes - loBefore.txBytes, rxBytes: loAfter.rxBytes - loBefore.rxBytes };
  ctx.diagnostic(`statuses polled ${seen.join(' -> ')}, streamed ${streamed.join(' -> ')}; flow ${flow.sender.bytes} B; lo tx/rx around the job ${ours.txBytes}/${ours.rxBytes} B, the agent's nic.from.txBytes ${flow.nic.from.txBytes} B, nic.to.rxBytes ${flow.nic.to.rxBytes} B`);
  assert.ok(ours.txBytes >= flow.sender.bytes && ours.rxBytes >= flow.receiver.bytes, `lo carried tx ${ours.txBytes} B, rx ${ours.rxBytes} B around a flow of ${flow.sender.bytes} B`);
  assert.equal(flow.pathVerified, true);
  for (const [end, counter] of [['from', 'txBytes'], ['to', 'rxBytes']] as const) {
    const reported = flow.nic[end][counter];
    assert.ok(reported > 0 && reported <= ours[counter], `nic.${end}.${counter} ${reported} B: a delta of lo's ${counter} within the job, which moved it by ${ours[counter]} B`);
  }
  assert.deepEqual(flow.diagnostics.receiver.address, '127.0.0.1');
  assert.ok(flow.diagnostics.sender.command.length > 0);
  assert.ok(Date.parse(run.startedAt) <= Date.parse(run.finishedAt));
  // Each end's engine ran within its run, for ~2 s (the agent's own clock, here the same host's).
  for (const end of [flow.diagnostics.sender, flow.diagnostics.receiver]) {
    const [started, ended] = [Date.parse(end.engineStartedAt), Date.parse(end.engineEndedAt)];
    assert.ok(Date.parse(run.startedAt) <= started && started < ended && ended <= Date.parse(run.finishedAt), JSON.stringify(end));
    assert.ok(ended - started >= 1900, `engine ran ${ended - started} ms`);
  }
  // The builtin engine prints no report of its own: nothing raw is kept, and asking says so.
  assert.equal(flow.diagnostics.sender.rawOutput, undefined);
  const raw = await fetch(`${client.base}/v1/jobs/${job.id}/runs/0/flows/0/sender/raw`);
  assert.equal(raw.status, 404);
  assert.match(((await raw.json()) as { detail: string }).detail, /only engines with a report of their own/);
});

test('request/response (rr) through the API: a sweep of message sizes, each with round-trip percentiles', async () => {
  // 2 s a point: a sender that came up late on a loaded machine made 1 transaction in a 1 s run.
  const job = await client.succeed({
    engine: 'builtin', test: 'rr', duration: 2, noDelay: true, rr: { requestSize: 1 },
    sweep: { responseSize: [1, 1048576] }, flows: [{ from: lo('e2e'), to: lo('e2e') }],
  });
  assert.deepEqual(job.spec.rr, { requestSize: 1, responseSize: 1 }, 'the stored job shows the defaults');
  const [small, large] = job.runs.map((run: { flows: { rr: { responseSize: number; transactions: number; transactionsPerSecond: number; rttSeconds: Record<string, number> } }[] }) => run.flows[0]!.rr);
  assert.equal(small.responseSize, 1);
  assert.equal(large.responseSize, 1048576);
  for (const rr of [small, large]) {
    assert.ok(rr.transactions > 50, `transactions ${rr.transactions}`);
    assert.ok(rr.rttSeconds.p50 <= rr.rttSeconds.p99 && rr.rttSeconds.p99 <= rr.rttSeconds.max);
  }
  // A 1 MiB response takes longer to deliver than a 1-byte one on the same path (64 KiB was within loopback's noise: 49 against 54 us once, on a loaded machine).
  assert.ok(large.rttSeconds.p50 > small.rttSeconds.p50, `p50 ${large.rttSeconds.p50} s vs ${small.rttSeconds.p50} s`);
  assert.equal(job.runs[0].flows[0].udp, null);
  // Round trips, not a load: no throughput verdict (one made up from 1-byte requests would name a limit that is not one).
  for (const run of job.runs) assert.equal(run.flows[0].bottleneck, null, JSON.stringify(run.flows[0].bottleneck));
});

test('canceling a running job ends it within 2 s, engine processes included', async () => {
  const submitted = await client.submit({ engine: 'builtin', duration: 60, flows: [{ from: lo('e2e'), to: lo('e2e') }] });
  const id = submitted.body.id;
  // Running, with both ends' engine processes started under the agent.
  const engines = await waitFor('both engine processes', () => {
    const pids = childPids(niclab.agents[0]!.pid);
    return pids.length >= 2 ? pids : null;
  }, 15_000, 20);
  assert.equal((await client.job(id)).body.status, 'running');
  const t0 = Date.now();
  const canceled = await client.call('cancelJob', 'DELETE', `/v1/jobs/${id}`);
  assert.equal(canceled.status, 202);
  assert.equal(canceled.body.status, 'canceled');
  await waitFor('engine processes to end', () => engines.every((pid) => !isAlive(pid)), 2000, 20);
  const { job } = await client.finish(id, 5000);
  assert.equal(job.status, 'canceled');
  await waitFor('the run to be recorded canceled', async () => (await client.job(id)).body.runs[0]?.status === 'canceled', 3000);
  assert.ok(Date.now() - t0 < 4000);
});

test('a job whose receiver agent is gone fails with peer_unavailable within its deadline', async () => {
  const doomed = spawnNiclab(['agent', '--id', 'doomed'], env);
  await waitFor('agent doomed to be online', async () => (await client.call('getAgent', 'GET', '/v1/agents/doomed')).body.online);
  doomed.child.kill('SIGKILL');
  await doomed.exited;
  // Still within its three heartbeats, so the API accepts the job.
  const submitted = await client.submit({ engine: 'builtin', duration: 1, flows: [{ from: lo('e2e'), to: lo('doomed') }] });
  assert.equal(submitted.status, 202, JSON.stringify(submitted.body));
  const t0 = Date.now();
  const { job } = await client.finish(submitted.body.id, 15_000);
  const elapsed = Date.now() - t0;
  assert.equal(job.status, 'failed');
  assert.ok(['peer_unavailable', 'agent_offline', 'agent_lost'].includes(job.error.code), job.error.code);
  assert.match(job.error.message, /doomed/);
  assert.ok(elapsed < (1 + Number(env.NICLAB_SETUP_SECONDS)) * 1000 + 2000, `failed after ${elapsed} ms, within duration + setup allowance (${env.NICLAB_SETUP_SECONDS} s)`);

  await waitFor('doomed to be offline', async () => !(await client.call('getAgent', 'GET', '/v1/agents/doomed')).body.online, 6000);
  const refused = await client.submit({ engine: 'builtin', duration: 1, flows: [{ from: lo('e2e'), to: lo('doomed') }] });
  assert.equal(refused.status, 422);
  assert.equal(refused.body.errors[0].field, 'body.flows[0].to.agent');
  assert.match(refused.body.errors[0].message, /offline/);
});

test('builtin UDP at a constant packet rate through the API: sent, received and lost as the kernel counted them, achieved rate reported', { skip: NOT_ROOT }, async () => {
  // An agent in a namespace of its own: its kernel's UDP counters are this job's datagrams alone.
  const isolated = await startNamespacedAgent('e2e-ns', env);
  try {
    await waitFor('agent e2e-ns online', async () => (await client.call('getAgent', 'GET', '/v1/agents/e2e-ns')).body.online, 30_000);
    const before = await isolated.udp();
    const job = await client.succeed({ engine: 'builtin', protocol: 'udp', duration: 2, udp: { packetSize: 1000, rate: { bitsPerSecond: 8_000_000 } }, flows: [{ from: lo('e2e-ns'), to: lo('e2e-ns') }] });
    const after = await isolated.udp();
    const { udp, sender, receiver } = job.runs[0].flows[0];
    assert.equal(udp.targetPacketsPerSecond, 1000, '8 Mbit/s of 1000-byte datagrams');
    assert.equal(udp.sent, 2000);
    // The kernel's own counts, beside the engines': out = the data and the sender's FINs (at most
    // 5); in = what reached the receiver's socket, its FINs among them; RcvbufErrors what it dropped.
    const out = after.OutDatagrams - before.OutDatagrams;
    const into = after.InDatagrams - before.InDatagrams;
    const dropped = after.RcvbufErrors - before.RcvbufErrors;
    const counts = `niclab sent ${udp.sent}, received ${udp.received}, lost ${udp.lost}; the kernel: out ${out}, in ${into}, RcvbufErrors ${dropped}`;
    assert.ok(out - udp.sent >= 1 && out - udp.sent <= 5, counts);
    assert.ok(into - udp.received >= 0 && into - udp.received <= 5, counts);
    // Lost is what went out and never came in, less the FINs that went out and never came in.
    assert.ok(out - into - udp.lost >= 0 && out - into - udp.lost <= 5, counts);
    // On loopback a datagram is lost only in the receiver's socket.
    assert.ok(dropped - udp.lost >= 0 && dropped - udp.lost <= 5, counts);
    assert.ok(udp.lossRatio < 0.01);
    assert.ok(Math.abs(udp.achievedPacketsPerSecond - 1000) / 1000 < 0.01);
    assert.equal(sender.calls, 2000);
    assert.equal(receiver.calls, udp.received);
    // Both ends on one kernel read one clock: the one-way delay is measured (and small on loopback).
    const delay = udp.oneWayDelaySeconds;
    assert.ok(delay.min >= 0 && delay.min <= delay.p50 && delay.p50 <= delay.p99 && delay.p99 <= delay.max, JSON.stringify(delay));
    assert.ok(delay.p50 < 0.01, `p50 ${delay.p50} s on loopback`);
  } finally {
    await isolated.stop();
  }
});

test('/metrics: two API replicas over one Redis answer the same, and the figures are the runs\' own', async () => {
  const scrape = async (base: string) => (await (await fetch(`${base}/metrics`)).text()).split('\n');
  /** A sample's value by its name and labels as written (`name{a="b"}`), 0 when absent. */
  const sample = (lines: string[], series: string) => Number(lines.find((l) => l.startsWith(`${series} `))?.split(' ')[1] ?? 0);
  const before = await scrape(client.base);
  const job = await client.succeed({ engine: 'builtin', duration: 1, labels: { schedule: 'hourly' }, flows: [{ from: lo('e2e'), to: lo('e2e') }] });
  const port = await freePort();
  const replica = spawnNiclab(['api', '--no-coordinator'], { ...env, NICLAB_PORT: String(port) });
  try {
    await waitForApi(`http://127.0.0.1:${port}`, 'the second API replica');
    // Everything but this replica's own request histogram and process metrics comes from Redis.
    const fleet = async (base: string) => {
      const res = await fetch(`${base}/metrics`);
      assert.equal(res.status, 200);
      assert.match(res.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
      return (await res.text()).split('\n').filter((l) => l.startsWith('niclab_') && !/^niclab_(http_|process_|nodejs_)/.test(l));
    };
    const [one, two] = [await fleet(client.base), await fleet(`http://127.0.0.1:${port}`)];
    assert.deepEqual(two, one);
    const labels = 'src_agent="e2e",src_interface="lo",dst_agent="e2e",dst_interface="lo",engine="builtin",protocol="tcp",test="stream",direction="forward",schedule="hourly"';
    const value = (name: string) => Number(one.find((l) => l.startsWith(`${name}{${labels}}`))?.split(' ')[1]);
    const [f] = job.runs[0].flows;
    assert.equal(value('niclab_link_throughput_bits_per_second'), f.bitsPerSecond);
    assert.equal(value('niclab_link_last_run_timestamp_seconds'), Date.parse(job.runs[0].finishedAt) / 1000);
    assert.equal(value('niclab_link_path_verified'), 1);
    assert.equal(value('niclab_link_sender_cpu_seconds_per_bit'), f.sender.cpuSeconds / (f.sender.bytes * 8));
    assert.ok(one.includes('niclab_agent_up{agent="e2e"} 1'));
    // The fleet's counters moved by this test's one job, and nothing else: every test of this
    // file runs its jobs in turn.
    for (const series of ['niclab_runs_total{outcome="succeeded"}', 'niclab_jobs_total{outcome="succeeded"}', 'niclab_job_duration_seconds_count', 'niclab_job_queue_wait_seconds_count', 'niclab_jobs{status="succeeded"}']) {
      assert.equal(sample(one, series) - sample(before, series), 1, `${series}: ${sample(before, series)} before the job, ${sample(one, series)} after`);
    }
    for (const outcome of ['failed', 'canceled']) assert.equal(sample(one, `niclab_runs_total{outcome="${outcome}"}`), sample(before, `niclab_runs_total{outcome="${outcome}"}`), outcome);
    assert.ok(one.includes('niclab_leases_held 0'), 'no run holds a lease now');
    assert.equal(sample(one, 'niclab_queue_jobs{state="active"}') + sample(one, 'niclab_queue_jobs{state="waiting"}'), 0, 'nothing left in the queue');
    // The agents and their interfaces as the kernel and the API have them.
    const online = (await client.call('listAgents', 'GET', '/v1/agents')).body.items.filter((a: { online: boolean }) => a.online).length;
    assert.equal(sample(one, 'niclab_agents{state="online"}'), online);
    assert.equal(sample(one, 'niclab_interface_mtu_bytes{agent="e2e",interface="lo"}'), Number(readFileSync('/sys/class/net/lo/mtu', 'utf8')));
    assert.ok(!one.some((l) => l.startsWith('niclab_interface_speed_bits_per_second{agent="e2e",interface="lo"}')), 'lo reports no speed, and has no series');
  } finally {
    await replica.stop();
  }
});

test('jobs waiting for one interface get it in submission order (first come first served), each run once', async () => {
  const redis = createRedis(env.REDIS_URL!);
  // Held by the test for as long as it may take to queue the four (no one renews it).
  const leases = new Leases(redis, new Keys(env.NICLAB_PREFIX!), 120_000);
  try {
    assert.equal(await leases.acquire('fifo-test-hold', [lo('e2e')]), null);
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      const submitted = await client.submit({ duration: 0.5, flows: [{ from: lo('e2e'), to: lo('e2e') }], labels: { order: String(i) } });
      assert.equal(submitted.status, 202, JSON.stringify(submitted.body));
      ids.push(submitted.body.id);
      // 150 ms apart: each job's coordinator asks every 200 ms from when it began to wait, so
      // after the release the jobs ask in the order 0, 3, 2, 1 (rotated), not 0, 1, 2, 3. Taking
      // the lease whoever asks first would not come out in submission order.
      await new Promise((resolve) => setTimeout(resolve, 150));
    }
    // All four wait in the interface's queue before it is free; they ask every 200 ms, in whatever order.
    const queued = await waitFor('the four jobs in the lease queue', async () => {
      const queue = await leases.queue(lo('e2e'));
      return queue.length === 4 ? queue : null;
    }, 30_000);
    assert.deepEqual(queued, ids, 'the queue is in submission order');
    assert.equal(await leases.release('fifo-test-hold', [lo('e2e')]), 1);
    const jobs = [];
    for (const id of ids) jobs.push((await client.finish(id, 60_000)).job);
    for (const job of jobs) assert.equal(job.status, 'succeeded', JSON.stringify(job.error));
    const started = jobs.map((j) => Date.parse(j.runs[0].startedAt));
    const order = ids.map((id, i) => ({ id, at: started[i]! })).sort((a, b) => a.at - b.at).map((x) => x.id);
    assert.deepEqual(order, ids, `runs started at ${started.join(', ')}`);
    assert.deepEqual(jobs.map((j) => j.runs.length), [1, 1, 1, 1]);
  } finally {
    redis.disconnect();
  }
});
