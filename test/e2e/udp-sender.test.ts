import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import type { ApiClient } from '../helpers/api-client.js';
import { startNiclab, type TestNiclab } from '../helpers/niclab.js';
import { childPids, waitFor } from '../helpers/processes.js';
import { followJob } from '../helpers/sse.js';

/**
 * A UDP flow's offered load through the API and real agents on loopback: what the sender says it
 * offered is checked against what its receiver counted, with the sender's process stopped
 * through the run's end, and with four streams under both engines.
 */
let niclab: TestNiclab;
let client: ApiClient;
const lo = (agent: string) => ({ agent, interface: 'lo' });
// Two agents, so the sending agent's engine process is the sender's.
const flows = [{ from: lo('tx'), to: lo('rx') }];

before(async () => {
  // A setup allowance that leaves the stopped sender's run well inside its deadline.
  niclab = await startNiclab(['tx', 'rx'], { NICLAB_SETUP_SECONDS: '10' });
  client = niclab.client;
});

after(async () => {
  await niclab?.stop();
});

/** The builtin UDP engine process among an agent's children. */
const udpEngineOf = (agentPid: number) => childPids(agentPid).find((pid) => readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('udp-child'));

/**
 * Submits a builtin UDP job and stops (SIGSTOP) its sender at the receiver's first sample with
 * data in it; `hold` says for how long, given how far into the run that was; then SIGCONT.
 */
async function stopSender(spec: object, hold: (seconds: number) => number) {
  const submitted = await client.submit(spec);
  assert.equal(submitted.status, 202, JSON.stringify(submitted.body));
  let stopped!: { resolve(at: { pid: number; seconds: number }): void; reject(error: Error): void };
  const firstSample = new Promise<{ pid: number; seconds: number }>((resolve, reject) => (stopped = { resolve, reject }));
  let pid: number | undefined;
  let stoppedAt = 0;
  const stream = await followJob(client, submitted.body.id, (e) => {
    // The receiver's first sample with data in it: the sender has been sending that long.
    if (pid !== undefined || e.event !== 'interval' || !(e.data.interval.bitsPerSecond > 0)) return;
    pid = udpEngineOf(niclab.agents[0]!.pid);
    if (pid === undefined) return;
    try {
      process.kill(pid, 'SIGSTOP');
      stoppedAt = performance.now();
      stopped.resolve({ pid, seconds: e.data.interval.end });
    } catch (error) {
      stopped.reject(error as Error);
    }
  });
  const ended = stream.events.then(() => Promise.reject(new Error('the job ended before its sender was stopped')));
  const at = await Promise.race([firstSample, ended]);
  let stallSeconds: number;
  try {
    await new Promise((r) => setTimeout(r, hold(at.seconds) * 1000));
  } finally {
    process.kill(at.pid, 'SIGCONT');
    stallSeconds = (performance.now() - stoppedAt) / 1000;
  }
  const { job } = await client.finish(submitted.body.id);
  await stream.events;
  return { job, at, stallSeconds };
}

test('a builtin UDP sender stopped (SIGSTOP) from early in the run until after its end: achieved is what its receiver counted over the run', async (ctx) => {
  const t0 = Date.now();
  const duration = 2;
  const pps = 2000;
  // Past the sender's end (its first datagram + duration), then let it run again.
  const { job, at } = await stopSender({ engine: 'builtin', protocol: 'udp', duration, interval: 0.25, udp: { packetSize: 200, rate: { packetsPerSecond: pps } }, flows }, (seconds) => duration - seconds + 0.3);
  assert.equal(job.status, 'succeeded', JSON.stringify(job.error ?? job.runs));
  const [flow] = job.runs[0].flows;
  const { udp } = flow;
  const receivedRate = udp.received / duration;
  const show = `sent ${udp.sent}, received ${udp.received}, achieved ${udp.achievedPacketsPerSecond} pps, sender ${flow.sender.realSeconds} s, stopped after ${at.seconds} s`;
  ctx.diagnostic(`${show}; job ${Date.now() - t0} ms, run ${job.runs[0].startedAt} -> ${job.runs[0].finishedAt}; ${flow.bottleneck.reason}`);
  assert.ok(udp.sent < 0.8 * pps * duration, `the stop did not stall the sender: ${show}`);
  // The independent count: the receiver's datagrams over the run's length.
  assert.ok(Math.abs(udp.achievedPacketsPerSecond - receivedRate) <= 0.02 * receivedRate, `achieved against received / duration (${receivedRate} pps): ${show}`);
  // Its seconds are the time it took, the stop included (it ran again 0.3 s after its end); the receiver's rate does not hide it either.
  assert.ok(flow.sender.realSeconds >= duration + 0.25, show);
  assert.ok(flow.bitsPerSecond <= receivedRate * 200 * 8 * 1.02, `bitsPerSecond ${flow.bitsPerSecond}: ${show}`);
  assert.notEqual(flow.bottleneck.verdict, 'sender CPU', `a stopped sender used no CPU: ${flow.bottleneck.reason}`);
});

test('a builtin UDP sender stopped mid-run catches up: every datagram sent, and the ones it sent more than 5 ms after they were due counted late', async (ctx) => {
  const duration = 3;
  const pps = 2000;
  // Two streams, so each stream's share of the schedule is what is counted late.
  const { job, at, stallSeconds } = await stopSender({ engine: 'builtin', protocol: 'udp', duration, interval: 0.25, streams: 2, udp: { packetSize: 200, rate: { packetsPerSecond: pps } }, flows }, () => 0.4);
  assert.equal(job.status, 'succeeded', JSON.stringify(job.error ?? job.runs));
  const { udp } = job.runs[0].flows[0];
  const show = `sent ${udp.sent}, received ${udp.received}, late ${udp.lateDatagrams}; stopped ${stallSeconds.toFixed(3)} s after ${at.seconds} s`;
  ctx.diagnostic(show);
  assert.ok(at.seconds + stallSeconds < duration - 0.5, `the sender had time to catch up: ${show}`);
  assert.equal(udp.sent, pps * duration, `it caught up: ${show}`);
  // The closed form: every datagram due in the stall, bar its last 5 ms, went late; catching up
  // at twice the rate, it was back on time within another stall's length.
  assert.ok(udp.lateDatagrams >= pps * (stallSeconds - 0.005) * 0.95, show);
  assert.ok(udp.lateDatagrams <= pps * 2 * stallSeconds * 1.05, show);
});

test('UDP with streams: 4 offers the flow\'s rate in all under both engines: the same datagrams sent, and received', async () => {
  const spec = { protocol: 'udp', duration: 2, interval: 1, streams: 4, udp: { packetSize: 1000, rate: { packetsPerSecond: 1000 } }, flows };
  const builtin = (await client.succeed({ ...spec, engine: 'builtin' })).runs[0].flows[0];
  const iperf3 = (await client.succeed({ ...spec, engine: 'iperf3' })).runs[0].flows[0];
  const show = `builtin sent ${builtin.udp.sent}, received ${builtin.udp.received}; iperf3 sent ${iperf3.udp.sent}, received ${iperf3.udp.received}`;
  assert.equal(builtin.udp.sent, 2000, show);
  assert.ok(Math.abs(iperf3.udp.sent - builtin.udp.sent) <= 8, show);
  for (const f of [builtin, iperf3]) {
    assert.ok(f.udp.received >= f.udp.sent - 8, `the receiver's count: ${show}`);
    assert.equal(f.udp.targetPacketsPerSecond, 1000);
    assert.ok(Math.abs(f.udp.achievedPacketsPerSecond - 1000) <= 10, `achieved ${f.udp.achievedPacketsPerSecond}: ${show}`);
    assert.equal(f.udp.duplicates, 0);
  }
  // Unstopped, the builtin sender kept its schedule: at most a busy host's few late ticks.
  assert.ok(builtin.udp.lateDatagrams <= 0.05 * builtin.udp.sent, `late ${builtin.udp.lateDatagrams}: ${show}`);
  assert.equal(iperf3.udp.lateDatagrams, undefined, 'iperf3 does not say');
  // iperf3 applies -b to each stream.
  const command: string[] = iperf3.diagnostics.sender.command;
  assert.equal(command[command.indexOf('-b') + 1], String(1000 * 1000 * 8 / 4), command.join(' '));
  assert.equal(command[command.indexOf('-P') + 1], '4');
});
