import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { command } from '@niclab/shared/runtime/command';
import { bareIperf3, flow, mbit, NOT_ROOT, startTestLab, type TestLab } from '../helpers/lab.js';
import { irttDuring, quantile, startIrttServer, type RttSample } from '../helpers/irtt.js';

/**
 * The queue of a shaped link, varied through a job's `tuning.qdisc` (admin), as seed 004 varied
 * txqueuelen without measuring latency: 4 TCP streams and one rr flow A->B per run, the rr flow
 * idle for 2 s first, 4 runs a side, A's and B's eth1 shaped by tbf at 100 Mbit/s. The qdisc
 * goes in as tbf's child, so it is the link's queue. Short: bfifo 187,500 B (15 ms of the link; 62,500 B cost 5% of the throughput and 125,000 B 4%, while at 250,000 B the long queue's p99 was no longer significantly worse).
 * Long: pfifo without a limit, which takes txqueuelen (1000 packets, 1.5 MB and more: 120 ms
 * and more). The lab's TCP is BBR with TSQ, which keeps only a few packets per socket queued at
 * the sender, so the long queue fills to what they queue (about 200 kB, 16 ms), not its limit;
 * the short one cuts that. txqueuelen 1000 against 10000 is the same on this link for that
 * reason (both far above what is queued): measured with bare tools (iperf3 -P 4, pfifo child 1000 / 10000 packets): irtt p50 15.3 / 15.6 ms, p99 87 / 79 ms, 94.9 / 94.3 Mbit/s.
 * Every figure is checked against irtt on the same path at the same time, and the queue against
 * the kernel's own count (`tc -s qdisc` backlog and drops of that child).
 */
const RATE = '100mbit';
const DURATION = 4;
const IDLE = 2;
const REPEAT = 4;
const SHORT_BYTES = 187_500;
const SHORT = { qdisc: { kind: 'bfifo', limit: SHORT_BYTES } };
const LONG = { qdisc: { kind: 'pfifo' } };
const FQ_CODEL = { qdisc: { kind: 'fq_codel' } };

/** Why this kernel cannot run the fq_codel side, or false: tried on loopback in a namespace of its own. */
function kernelLacks(kind: string): string | false {
  if (process.getuid?.() !== 0) return false;
  const ns = `q${randomBytes(4).toString('hex')}`;
  spawnSync('ip', ['netns', 'add', ns]);
  const tried = spawnSync('tc', ['-n', ns, 'qdisc', 'add', 'dev', 'lo', 'root', kind], { encoding: 'utf8' });
  spawnSync('ip', ['netns', 'del', ns]);
  return tried.status === 0 ? false : `needs a kernel with the ${kind} qdisc (tc: ${tried.stderr.trim()})`;
}
/**
 * This machine's kernel (and so CI's) has no fq_codel: there the fq_codel side cannot be measured,
 * and what is proven instead is that asking for it is refused clearly and changes nothing. CI
 * may leave nothing out, and the refusal is behaviour a lab with such a kernel meets.
 */
const NO_FQ_CODEL = kernelLacks('fq_codel');

/** The kernel's view of the qdisc under A's tbf: its kind and handle, and its counts. */
interface QueueSample { kind: string; handle: string; backlog: number; qlen: number; drops: number }
interface Side { jobId: string; runs: any[]; irtt: RttSample[]; queue: QueueSample[] }

describe('the queue of a shaped link through tuning.qdisc: a longer queue, a longer loaded round trip at the same throughput', { skip: NOT_ROOT }, () => {
  let t: TestLab;
  let server: ChildProcess | undefined;
  let tbf = '';
  let tbfB = '';
  let before_: Record<'A' | 'B', string>;
  const sides: Partial<Record<'short' | 'long' | 'fqCodel', Side>> = {};
  let refused: any;

  const setup = (namespace: string) => command('tc', ['-n', namespace, '-j', 'qdisc', 'show', 'dev', 'eth1', 'invisible']);

  /** The kernel's count of A's qdisc under tbf every 100 ms while `work` runs. */
  const watchQueue = async <T>(work: Promise<T>): Promise<[T, QueueSample[]]> => {
    const samples: QueueSample[] = [];
    let done = false;
    const watching = (async () => {
      while (!done) {
        const all = JSON.parse(await command('tc', ['-n', t.lab.hosts[0]!.namespace, '-s', '-j', 'qdisc', 'show', 'dev', 'eth1'])) as { kind: string; handle: string; parent?: string; backlog: number; qlen: number; drops: number }[];
        const child = all.find((q) => q.parent === `${tbf}1`);
        if (child) samples.push({ kind: child.kind, handle: child.handle, backlog: child.backlog, qlen: child.qlen, drops: child.drops });
        await new Promise((r) => setTimeout(r, 100));
      }
    })();
    try {
      return [await work, samples];
    } finally {
      done = true;
      await watching;
    }
  };

  const measure = async (name: string, tuning: object): Promise<Side> => {
    const [a, b] = t.lab.hosts;
    const rr = { ...flow('A', 'B'), test: { kind: 'rr', engine: 'builtin', streams: 1, noDelay: true } };
    // irtt on the same path for as long as the job runs.
    const [[job, queue], irtt] = await irttDuring(a!, b!, () => watchQueue(t.client.succeed({ engine: 'builtin', streams: 4, duration: DURATION, idleBaseline: IDLE, repeat: REPEAT, retries: 2, labels: { queue: name }, tuning, flows: [flow('A', 'B'), rr] }, 180_000)));
    return { jobId: job.id, runs: job.runs, irtt, queue };
  };

  before(async () => {
    t = await startTestLab(2, `A=${RATE},B=${RATE}`);
    before_ = { A: await setup(t.lab.hosts[0]!.namespace), B: await setup(t.lab.hosts[1]!.namespace) };
    const rootTbf = (setupJson: string) => (JSON.parse(setupJson) as { kind: string; handle: string; root?: boolean }[]).find((q) => q.root && q.kind === 'tbf')!.handle;
    [tbf, tbfB] = [rootTbf(before_.A), rootTbf(before_.B)];
    server = await startIrttServer(t.lab.hosts[1]!);
    sides.short = await measure('short', SHORT);
    sides.long = await measure('long', LONG);
    if (!NO_FQ_CODEL) sides.fqCodel = await measure('fq_codel', FQ_CODEL);
    else refused = (await t.client.finish((await t.client.submit({ engine: 'builtin', duration: 1, tuning: FQ_CODEL, flows: [flow('A', 'B')] })).body.id, 60_000)).job;
  });
  after(async () => {
    if (server?.pid) process.kill(server.pid, 'SIGTERM');
    await t?.close();
  });

  /** irtt's loaded round trips: inside each run's load (it ends when the stream sender ends). */
  const irttLoaded = (side: Side) => side.runs.flatMap((run) => {
    const loadEnd = Date.parse(run.flows[0].diagnostics.sender.engineEndedAt);
    const loadStart = loadEnd - DURATION * 1000;
    return side.irtt.filter((s) => s.at >= loadStart + 500 && s.at <= loadEnd - 200).map((s) => s.rttMs);
  });

  test('the qdisc is in force under tbf in every run, read back in its result, and the setup is exactly as before afterwards', async (ctx) => {
    for (const [name, side, kind, options] of [['short', sides.short!, 'bfifo', { limit: SHORT_BYTES }], ['long', sides.long!, 'pfifo', { limit: 1000 }]] as const) {
      for (const run of side.runs) {
        const [stream, rr] = run.flows;
        ctx.diagnostic(`${name}: ${mbit(stream.bitsPerSecond).toFixed(1)} Mbit/s, rr idle p50/p99 ${(rr.rr.idle.rttSeconds.p50 * 1e3).toFixed(3)}/${(rr.rr.idle.rttSeconds.p99 * 1e3).toFixed(3)} ms, loaded p50/p99 ${(rr.rr.rttSeconds.p50 * 1e3).toFixed(2)}/${(rr.rr.rttSeconds.p99 * 1e3).toFixed(2)} ms, bottleneck ${stream.bottleneck?.verdict}`);
        for (const [end, handle] of [['sender', tbf], ['receiver', tbfB]] as const) assert.deepEqual({ ...stream.diagnostics[end].tuning.qdisc, handle: undefined }, { kind, handle: undefined, parent: `${handle}1`, options });
      }
      // The kernel saw it there during the job (samples with our child in it), under the handle the
      // sender's result names: the kind and handle A's kernel showed under its tbf while the runs ran.
      assert.ok(side.queue.length > 20, `${side.queue.length} samples of the child qdisc`);
      const seen = [...new Set(side.queue.filter((q) => q.kind === kind).map((q) => q.handle))];
      const reported = [...new Set(side.runs.map((run) => run.flows[0].diagnostics.sender.tuning.qdisc.handle as string))];
      assert.ok(reported.every((h) => seen.includes(h)), `A's results name the handles ${reported.join(', ')}; A's kernel showed ${kind} under ${seen.join(', ')}`);
    }
    assert.equal(await setup(t.lab.hosts[0]!.namespace), before_.A);
    assert.equal(await setup(t.lab.hosts[1]!.namespace), before_.B);
    // And the link restored works at its rate: tbf's own child came back, not noop (which drops everything).
    const bare = await bareIperf3(t.lab.hosts[0]!, t.lab.hosts[1]!, 2, ['-P', '4']);
    assert.ok(mbit(bare.server.end.sum_received.bits_per_second) > 85, `bare iperf3 after restore: ${mbit(bare.server.end.sum_received.bits_per_second)} Mbit/s`);
  });

  test('the kernel and irtt see the queue: at most 187,500 B queued with the short one (and drops), more with the long one, and a longer round trip', (ctx) => {
    const [short, long] = [sides.short!, sides.long!];
    const max = (s: Side) => Math.max(...s.queue.map((q) => q.backlog));
    const drops = (s: Side) => s.queue[s.queue.length - 1]!.drops - s.queue[0]!.drops;
    const [shortP50, longP50, shortP99, longP99] = [quantile(irttLoaded(short), 0.5), quantile(irttLoaded(long), 0.5), quantile(irttLoaded(short), 0.99), quantile(irttLoaded(long), 0.99)];
    ctx.diagnostic(`tc backlog max short ${max(short)} B (drops ${drops(short)}), long ${max(long)} B (drops ${drops(long)}); irtt loaded p50 ${shortP50.toFixed(2)} -> ${longP50.toFixed(2)} ms, p99 ${shortP99.toFixed(2)} -> ${longP99.toFixed(2)} ms (${irttLoaded(short).length}/${irttLoaded(long).length} probes)`);
    assert.ok(max(short) <= SHORT_BYTES, `short backlog ${max(short)} B`);
    assert.ok(drops(short) > 0, 'the short queue dropped nothing: it was never the limit');
    assert.ok(max(long) > SHORT_BYTES, `long backlog ${max(long)} B`);
    // The tail is where the queues differ (BBR keeps about 200 kB queued on both, the long one lets
    // it reach 800 kB). irtt samples time, not transactions, so it sees those peaks only as often
    // as they last: its p99 went 23.0 -> 45.0 ms in one run and 23.7 -> 24.6 ms in another (p50
    // 12.8 -> 14.2 ms) while rr's per-transaction p99 doubled both times. What must hold is the
    // direction of the tail: the reference never finds the long queue's p99 quicker. Its median is
    // BBR's standing queue on both, within noise (12.21 -> 11.97 ms in the fresh-clone run at
    // f847f30, p99 15.2 -> 21.5 ms): held within 10% of the short one's, not above it.
    assert.ok(longP99 >= shortP99 && longP50 >= 0.9 * shortP50, `irtt loaded p50 ${shortP50} -> ${longP50} ms, p99 ${shortP99} -> ${longP99} ms`);
  });

  test('compare: the long queue is significantly worse on loaded RTT p99 (lower is better), at the same throughput, with the same idle RTT', async (ctx) => {
    const { body: c } = await t.client.call('compareJobs', 'GET', `/v1/compare?baseline=${sides.short!.jobId}&candidate=${sides.long!.jobId}&metric=rttP99Seconds`);
    const of = (name: string) => c.metrics.find((m: { metric: { name: string } }) => m.metric.name === name).points[0];
    for (const name of ['rttP50Seconds', 'rttP99Seconds', 'bitsPerSecond', 'idleRttP50Seconds', 'idleRttP99Seconds']) ctx.diagnostic(`${of(name).judged} (p ${of(name).pValue?.toPrecision(2)}, CI ${of(name).changePercentInterval?.map((x: number) => x.toFixed(1)).join('..')}%)`);
    assert.deepEqual(c.metric, { name: 'rttP99Seconds', unit: 's', higherIsBetter: false });
    assert.equal(c.points[0].verdict, 'worse');
    assert.match(of('rttP99Seconds').judged, /^rttP99Seconds \(lower is better\): .*: worse$/);
    // About the same throughput: the long queue is not worse, and the means are within 8%. (The 95% interval
    // of the change was -0.6..2.3% on a quiet machine; under load 10 one short run made 80.9 Mbit/s and it was
    // -5.7..17%.) The short queue drops (1,480 datagrams in one fresh-clone run), and TCP's backoff can cost it a
    // few percent: that run judged the long queue's +3.5% (92.4 -> 95.6 Mbit/s) better at p 0.04, a true
    // difference and not a failure of what this test shows.
    const bits = of('bitsPerSecond');
    assert.notEqual(bits.verdict, 'worse', bits.judged);
    assert.ok(Math.abs(bits.changePercent) < 8, bits.judged);
    assert.ok(c.variedByUser.includes('tuning'));
    const idle = of('idleRttP50Seconds');
    assert.ok(Math.abs(idle.candidate.mean - idle.baseline.mean) < 0.2e-3, `idle p50 ${idle.baseline.mean} s -> ${idle.candidate.mean} s`);
  });

  test('niclab is not what limits the load: no stream leg names a CPU as its bottleneck', () => {
    for (const side of [sides.short!, sides.long!]) {
      for (const run of side.runs) {
        const verdict = run.flows[0].bottleneck?.verdict;
        assert.ok(!['sender CPU', 'receiver CPU'].includes(verdict), `${run.id}: ${run.flows[0].bottleneck?.reason}`);
      }
    }
  });

  test('fq_codel on the sender against the long pfifo: a significantly lower loaded RTT p99 (on a kernel without fq_codel: refused, naming it)', async () => {
    if (NO_FQ_CODEL) {
      // The setup-unchanged test above compares A's and B's qdiscs after this job too.
      assert.equal(refused.status, 'failed', JSON.stringify(refused));
      assert.equal(refused.error.code, 'tuning_failed', JSON.stringify(refused.error));
      assert.match(refused.error.message, /fq_codel/);
      console.log(`fq_codel side not measured: this kernel ${NO_FQ_CODEL}; the job was refused: ${refused.error.message}`);
      return;
    }
    const { body: c } = await t.client.call('compareJobs', 'GET', `/v1/compare?baseline=${sides.long!.jobId}&candidate=${sides.fqCodel!.jobId}&metric=rttP99Seconds`);
    assert.equal(c.points[0].verdict, 'better');
    assert.ok(quantile(irttLoaded(sides.fqCodel!), 0.5) < quantile(irttLoaded(sides.long!), 0.5), 'irtt does not see fq_codel shorten the queue');
  });
});
