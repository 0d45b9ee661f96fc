import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { command } from '@niclab/shared/runtime/command';
import { bareIperf3, flow, mbit, NOT_ROOT, startTestLab, type TestLab } from '../helpers/lab.js';
import { terminate, waitFor } from '../helpers/processes.js';
import { freePort } from '../helpers/redis.js';

// Seed 003: "If I adjusted the buffer sizes on one system only, then the throughput was
// drastically reduced." Here both hosts are found with small TCP buffers (256 KiB at most); the
// factorial's tuning grows the sender's tcp_wmem and the receiver's tcp_rmem to 1 MiB, on a path
// whose round trip (about 50 ms) makes the window the limit: the sender's send buffer bounds
// what it has in flight, the receiver's receive buffer the window it offers, so each end's
// tuning does little alone and much with the other's.
//
// The kernel has no netem, so the delay is a queue: B's egress (the ACK path, B to A) through a
// 10 Mbit/s tbf whose 62,500-byte queue a bare `iperf3 -u` flood from B to A keeps full, so every
// ACK waits about 62,500 B / 1.25 MB/s = 50 ms. The flood runs at 20 Mbit/s (a drained queue
// refills within 50 ms) at SCHED_FIFO priority: on a busy machine a descheduled flood let the
// queue drain and a run's round trip fall (one 2 s run of 12 made 21 Mbit/s instead of 28).
// ACKs that find the queue full are lost; they are cumulative, and an ACK is small enough to fit
// where a flood datagram does not.
const AS_FOUND = { 'net.ipv4.tcp_rmem': '4096 131072 262144', 'net.ipv4.tcp_wmem': '4096 16384 262144' };
const SENDER = { 'net.ipv4.tcp_wmem': '4096 16384 1048576' };
const RECEIVER = { 'net.ipv4.tcp_rmem': '4096 131072 1048576' };
const CELLS = ['none', 'sender', 'receiver', 'both'] as const;
type Cell = (typeof CELLS)[number];
const SECONDS = 2;

const sysctl = async (namespace: string, name: string) => (await command('ip', ['netns', 'exec', namespace, 'sysctl', '-n', name])).trim().replace(/\s+/g, ' ');
const setSysctls = (namespace: string, values: Record<string, string>) =>
  Promise.all(Object.entries(values).map(([name, value]) => command('ip', ['netns', 'exec', namespace, 'sysctl', '-q', '-w', `${name}=${value}`])));

/** A process in a namespace, its output kept for a failure's message. */
function inNamespace(namespace: string, argv: string[]): ChildProcess & { output: () => string } {
  const child = spawn('ip', ['netns', 'exec', namespace, ...argv], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout.on('data', (c: Buffer) => (output += c));
  child.stderr.on('data', (c: Buffer) => (output += c));
  return Object.assign(child, { output: () => output });
}

/** The mean round trip of `ping` from A to B (its echo replies leave B through the tbf). */
async function roundTripMs(from: string, to: string): Promise<number> {
  const out = await command('ip', ['netns', 'exec', from, 'ping', '-4', '-n', '-q', '-c', '5', '-i', '0.2', '-W', '1', to]);
  return Number(/= [\d.]+\/([\d.]+)\//.exec(out)![1]);
}

describe('each end tuned on its own: a factorial on a path where each end limits the other', { skip: NOT_ROOT }, () => {
  let t: TestLab;
  const started: ChildProcess[] = [];
  const saved: [string, Record<string, string>][] = [];
  before(async () => {
    t = await startTestLab(2, 'none');
    const [a, b] = t.lab.hosts as [(typeof t.lab.hosts)[0], (typeof t.lab.hosts)[0]];
    for (const ns of [a.namespace, b.namespace]) {
      saved.push([ns, Object.fromEntries(await Promise.all(Object.keys(AS_FOUND).map(async (name) => [name, await sysctl(ns, name)] as const)))]);
      await setSysctls(ns, AS_FOUND);
    }
    await command('tc', ['-n', b.namespace, 'qdisc', 'replace', 'dev', 'eth1', 'root', 'tbf', 'rate', '10mbit', 'burst', '16kb', 'limit', '62500']);
    const port = String(await freePort());
    const server = inNamespace(a.namespace, ['iperf3', '-s', '-p', port, '-B', a.address]);
    started.push(server);
    await waitFor('the flood server to listen', async () => (await command('ip', ['netns', 'exec', a.namespace, 'ss', '-Hltn', `sport = :${port}`])).trim(), 5000, 20);
    const flood = inNamespace(b.namespace, ['chrt', '-f', '10', 'iperf3', '-u', '-c', a.address, '-B', b.address, '-p', port, '-b', '20M', '-l', '1400', '-t', '300']);
    started.push(flood);
    // The queue full: a round trip of about 50 ms, as the test's own ping finds it.
    const rtt = await waitFor('the ACK path to be delayed', async () => {
      const ms = await roundTripMs(a.namespace, b.address);
      return ms > 40 ? ms : null;
    }, 10_000, 200).catch((error: Error) => assert.fail(`${error.message}; flood: ${flood.output()}`));
    assert.ok(rtt < 60, `a round trip of ${rtt} ms`);
  });
  after(async () => {
    for (const child of started) await terminate(child);
    if (t) {
      await command('tc', ['-n', t.lab.hosts[1]!.namespace, 'qdisc', 'del', 'dev', 'eth1', 'root']).catch(() => undefined);
      for (const [ns, values] of saved) await setSysctls(ns, values);
    }
    await t?.close();
  });

  test('the interaction shows (both far above the one-end cells), each end read back its own tuning, and bare iperf3 with the same sysctls by hand agrees within 5% on each cell', async (ctx) => {
    const [a, b] = t.lab.hosts as [(typeof t.lab.hosts)[0], (typeof t.lab.hosts)[0]];
    const job = await t.client.succeed({
      engine: 'iperf3', duration: SECONDS, repeat: 2, factorial: { of: 'ends' },
      tuning: { sender: { sysctl: SENDER }, receiver: { sysctl: RECEIVER } }, flows: [flow('A', 'B')],
    }, 120_000);
    // The cells in rotation: none, sender, receiver, both; then sender, receiver, both, none.
    assert.deepEqual(job.runs.map((r: { point: { tuned: Cell } }) => r.point.tuned), ['none', 'sender', 'receiver', 'both', 'sender', 'receiver', 'both', 'none']);
    // Each end's own tuning, as it read it back: the sender's block at the sender only, the receiver's at the receiver only.
    for (const run of job.runs) {
      const { sender, receiver } = run.flows[0].diagnostics;
      const cell: Cell = run.point.tuned;
      assert.deepEqual(sender.tuning, cell === 'sender' || cell === 'both' ? { sysctl: SENDER } : undefined, `the sender's tuning in a ${cell} run`);
      assert.deepEqual(receiver.tuning, cell === 'receiver' || cell === 'both' ? { sysctl: RECEIVER } : undefined, `the receiver's tuning in a ${cell} run`);
    }
    // Put back: both hosts as found.
    for (const ns of [a.namespace, b.namespace]) for (const [name, value] of Object.entries(AS_FOUND)) assert.equal(await sysctl(ns, name), value, `${ns} ${name} restored`);

    ctx.diagnostic(`runs (cell: Mbit/s, receiver bytes over seconds): ${job.runs.map((r: any) => `${r.point.tuned}: ${mbit(r.flows[0].bitsPerSecond).toFixed(2)} (${r.flows[0].receiver.bytes} B / ${r.flows[0].receiver.realSeconds.toFixed(3)} s)`).join('; ')}`);
    const { body: report } = await t.client.call('getReport', 'GET', `/v1/jobs/${job.id}/report`);
    const [factorial] = report.factorials;
    const mean = (cell: Cell) => factorial.cells.find((c: { tuned: Cell }) => c.tuned === cell).mean as number;
    // The reference: bare iperf3 on the same path, the same sysctls set by hand for each cell, in
    // the job's own order (two repetitions, rotated), each cell's mean beside niclab's.
    const bareRuns: Record<Cell, number[]> = { none: [], sender: [], receiver: [], both: [] };
    for (const cell of job.runs.map((r: { point: { tuned: Cell } }) => r.point.tuned) as Cell[]) {
      await setSysctls(a.namespace, { ...AS_FOUND, ...(cell === 'sender' || cell === 'both' ? SENDER : {}) });
      await setSysctls(b.namespace, { ...AS_FOUND, ...(cell === 'receiver' || cell === 'both' ? RECEIVER : {}) });
      try {
        bareRuns[cell].push((await bareIperf3(a, b, SECONDS)).server.end.sum_received.bits_per_second as number);
      } finally {
        await setSysctls(a.namespace, AS_FOUND);
        await setSysctls(b.namespace, AS_FOUND);
      }
    }
    const bare = Object.fromEntries(CELLS.map((c) => [c, bareRuns[c].reduce((x, y) => x + y, 0) / bareRuns[c].length])) as Record<Cell, number>;
    ctx.diagnostic(`bare iperf3 runs (Mbit/s): ${CELLS.map((c) => `${c} ${bareRuns[c].map((v) => mbit(v).toFixed(2)).join(', ')}`).join('; ')}`);
    const table = await (await fetch(`${t.client.base}/v1/jobs/${job.id}/report?format=table`)).text();
    ctx.diagnostic(table.slice(table.indexOf('factorial')));
    const interval = (c: { estimate: number; confidenceInterval: [number, number] }) => `${mbit(c.estimate).toFixed(2)} [${mbit(c.confidenceInterval[0]).toFixed(2)}, ${mbit(c.confidenceInterval[1]).toFixed(2)}]`;
    ctx.diagnostic(`cells (niclab mean / bare iperf3, Mbit/s): ${CELLS.map((c) => `${c} ${mbit(mean(c)).toFixed(2)} / ${mbit(bare[c]).toFixed(2)}`).join('; ')}`);
    ctx.diagnostic(`effects (Mbit/s, 95% CI): sender ${interval(factorial.effects.sender)}, receiver ${interval(factorial.effects.receiver)}, interaction ${interval(factorial.effects.interaction)}`);
    for (const cell of CELLS) {
      const ratio = mean(cell) / bare[cell];
      assert.ok(Math.abs(ratio - 1) <= 0.05, `${cell}: niclab ${mbit(mean(cell)).toFixed(2)} Mbit/s against bare iperf3's ${mbit(bare[cell]).toFixed(2)} (${ratio.toFixed(3)})`);
    }
    // The interaction: tuning both ends is far above tuning either alone, which stays near none.
    const oneEnd = Math.max(mean('sender'), mean('receiver'));
    assert.ok(mean('both') > 2 * oneEnd, `both ${mbit(mean('both')).toFixed(2)} Mbit/s against one end's best ${mbit(oneEnd).toFixed(2)}`);
    for (const cell of ['sender', 'receiver'] as const) assert.ok(mean(cell) < 1.5 * mean('none'), `${cell} alone ${mbit(mean(cell)).toFixed(2)} Mbit/s near none's ${mbit(mean('none')).toFixed(2)}`);
    assert.equal(factorial.effects.interaction.significant, true);
    assert.ok(factorial.effects.interaction.confidenceInterval[0] > 0, 'a positive interaction: each end\'s tuning needs the other\'s');
    assert.deepEqual(factorial.harmedBy, [], 'tuning one end alone harms nothing here');
    assert.match(table, /verdict: tuning the sender alone .*the two ends' tunings interact/);
  });
});
