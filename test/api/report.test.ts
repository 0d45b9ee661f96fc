import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { describe, test } from 'node:test';
import type { EndFigures, FlowResult, Job, Run } from '@niclab/shared/domain/contract';
import { endFigures } from '@niclab/shared/domain/figures';
import { buildReport, reportCsv, reportTable } from '@niclab/shared/domain/report';
import { findingText, jobFinding } from '@niclab/shared/domain/finding';
import { halfWidthPercent, summarize, tQuantile, welch } from '@niclab/shared/domain/statistics';
import { FIGURE_DOMAINS } from '@niclab/shared/domain/figure-domains';

// Reference values from scipy 1.x (scipy.stats.t.ppf, scipy.stats.ttest_ind(equal_var=False)).
describe('statistics against scipy', () => {
  test('Student t quantiles', () => {
    for (const [df, q] of [[1, 12.70620474], [2, 4.30265273], [4, 2.77644511], [10, 2.22813885], [30, 2.04227246]] as const) {
      assert.ok(Math.abs(tQuantile(0.975, df) - q) < 1e-6, `df ${df}: ${tQuantile(0.975, df)} vs ${q}`);
    }
  });

  test("Welch's t-test", () => {
    const w = welch(summarize([1, 2, 3, 4, 5]), summarize([2, 4, 6, 8, 10]));
    assert.ok(Math.abs(w.t - 1.8973665961010275) < 1e-9, `t ${w.t}`);
    assert.ok(Math.abs(w.degreesOfFreedom - 5.882352941176471) < 1e-9);
    assert.ok(Math.abs(w.pValue! - 0.10753119493062728) < 1e-6, `p ${w.pValue}`);
    assert.equal(welch(summarize([5]), summarize([6, 7])).pValue, null, 'one value is no sample');
    assert.equal(welch(summarize([5, 5]), summarize([5, 5])).pValue, 1);
    assert.equal(welch(summarize([5, 5]), summarize([6, 6])).pValue, 0);
  });

  test('summary: sample sd, 95% interval of the mean, cv', () => {
    const s = summarize([94.1, 94.3, 93.9]);
    assert.ok(Math.abs(s.mean - 94.1) < 1e-12);
    assert.ok(Math.abs(s.standardDeviation - 0.2) < 1e-12);
    const half = 4.30265273 * (0.2 / Math.sqrt(3));
    assert.ok(Math.abs(s.confidenceInterval[0] - (94.1 - half)) < 1e-6 && Math.abs(s.confidenceInterval[1] - (94.1 + half)) < 1e-6);
    assert.ok(Math.abs(s.coefficientOfVariation - 0.2 / 94.1) < 1e-12);
    assert.equal(s.intervalMethod, 't');
  });

  test("an interval is cut to its figure's domain and says so; adaptive repetition's half width is not", () => {
    const close = (a: number, b: number) => Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(b));
    // scipy.stats.t.interval(0.95, 2, loc=mean, scale=sem): -4952897062.876396, 17552897062.876396.
    const rate = summarize([1500e6, 6900e6, 10500e6], 0.95, FIGURE_DOMAINS.bitsPerSecond);
    assert.equal(rate.intervalMethod, 'clipped-t');
    assert.ok(rate.confidenceInterval[0] === 0 && close(rate.confidenceInterval[1], 17552897062.876396), JSON.stringify(rate.confidenceInterval));
    assert.ok(close(halfWidthPercent(rate), ((17552897062.876396 - 6300e6) / 6300e6) * 100), 'the uncut half width');
    // Loss ratios: (-0.0330265, 0.0530265) and (0.9469735, 1.0330265) from scipy, cut to [0, 1].
    const low = summarize([0, 0, 0.03], 0.95, FIGURE_DOMAINS.udpLossRatio);
    assert.ok(low.confidenceInterval[0] === 0 && close(low.confidenceInterval[1], 0.053026527297494616) && low.intervalMethod === 'clipped-t');
    const high = summarize([0.97, 1, 1], 0.95, FIGURE_DOMAINS.probeLossRatio);
    assert.ok(close(high.confidenceInterval[0], 0.9469734727025052) && high.confidenceInterval[1] === 1 && high.intervalMethod === 'clipped-t');
    assert.equal(summarize([1500e6, 6900e6, 10500e6]).confidenceInterval[0] < 0, true, 'unbounded: the plain t-interval');
  });
});

// A fixed 2-flow job with two runs, as seed 000 measured it (3COM and MELCO-32 into one host).
const end = (bytes: number, real: number, cpu: number, calls: number): EndFigures => endFigures(bytes, real, { user: cpu / 4, system: (cpu * 3) / 4 }, calls);
const flowResult = (flowIndex: number, from: string, sender: EndFigures, receiver: EndFigures): FlowResult => ({
  flowIndex, direction: 'forward', from: { agent: from, interface: 'eth1' }, to: { agent: 'D', interface: 'eth1' },
  sender, receiver, bitsPerSecond: receiver.realBitsPerSecond, retransmits: 0, udp: null, rr: null, intervals: [],
  nic: { from: null, to: null }, pathVerified: true, error: null, diagnostics: {},
});
const job: Job = {
  id: '00000000-0000-4000-8000-00000000000a', owner: 'anonymous', status: 'succeeded', createdAt: '2026-11-30T00:00:00.000Z', startedAt: '2026-11-30T00:00:01.000Z', finishedAt: '2026-11-30T00:02:00.000Z',
  progress: { runsDone: 2, runsTotal: 2 }, error: null, finding: null, waitingFor: null,
  spec: { engine: 'builtin', test: 'stream', retries: 0, protocol: 'tcp', flows: [{ from: { agent: 'A', interface: 'eth1' }, to: { agent: 'D', interface: 'eth1' } }, { from: { agent: 'B', interface: 'eth1' }, to: { agent: 'D', interface: 'eth1' } }], duration: 60, bufferLength: 4096, streams: 1, noDelay: false, direction: 'forward', interval: 1, repeat: 2 },
};
const run = (index: number, a: [EndFigures, EndFigures], b: [EndFigures, EndFigures]): Run => ({
  id: `00000000-0000-4000-8000-00000000010${index}`, jobId: job.id, index, point: {}, repetition: index + 1, status: 'succeeded',
  startedAt: null, finishedAt: null, error: null, flows: [flowResult(0, 'A', ...a), flowResult(1, 'B', ...b)],
});
const runs = [
  run(0, [end(419430400, 62.43, 1.06, 102400), end(419430400, 62.45, 3.43, 287331)], [end(419430400, 70.97, 1.24, 102400), end(419430400, 70.98, 3.17, 287365)]),
  run(1, [end(419430400, 62.41, 1.08, 102400), end(419430400, 62.44, 3.41, 287100)], [end(419430400, 70.95, 1.22, 102400), end(419430400, 70.97, 3.19, 287400)]),
];

describe('report formats', () => {
  const golden = new URL('../fixtures/report-2flow.txt', import.meta.url);
  test('table: nttcp columns with a local and a remote line per flow, as the golden file', () => {
    const text = reportTable(job, runs, buildReport(job, runs));
    if (process.env.UPDATE_GOLDEN) writeFileSync(golden, text);
    assert.equal(text, readFileSync(golden, 'utf8'));
  });

  test('table: per UDP leg its crude figures, where the lost datagrams went and the verdict', () => {
    const udpJob: Job = { ...job, spec: { ...job.spec, protocol: 'udp', flows: [job.spec.flows[0]!], repeat: 1 } };
    const f = flowResult(0, 'A', runs[0]!.flows[0]!.sender!, runs[0]!.flows[0]!.receiver!);
    const udpFlow: FlowResult = {
      ...f, udp: { sent: 80_000, received: 71_096, lost: 8_904, outOfOrder: 3, duplicates: 0, jitterSeconds: 0.000125, lossRatio: 8_904 / 80_000 },
      lossAttribution: { lost: 8_904, senderSocket: 0, senderNic: 0, network: 0, receiverNic: 0, receiverBacklog: 0, receiverSocketBuffer: 8_905, unexplained: -1, overlapped: false },
      bottleneck: { verdict: 'receiver socket buffer', reason: 'receiver socket buffer: 8,905 of 8,904 lost datagrams (UdpRcvbufErrors); SO_RCVBUF 131,072 B', evidence: {}, confident: true },
    };
    const udpRuns = [{ ...runs[0]!, flows: [udpFlow] }];
    const text = reportTable(udpJob, udpRuns, buildReport(udpJob, udpRuns));
    assert.match(text, /run\s+flow\s+sent\s+received\s+lost\s+loss %\s+out-of-order\s+jitter ms\n\s*0\s+0\s+80000\s+71096\s+8904\s+11\.130\s+3\s+0\.125/);
    assert.match(text, /^run 0 flow 0: where lost: receiver socket buffer 8,905, unexplained -1$/m);
    assert.match(text, /^run 0 flow 0: bottleneck receiver socket buffer: 8,905 of 8,904 lost datagrams \(UdpRcvbufErrors\); SO_RCVBUF 131,072 B$/m);
  });

  test("every figure's interval in the report is within its domain: a noisy throughput and a loss from 0 stop at 0, and say so", () => {
    const udpJob: Job = { ...job, spec: { ...job.spec, protocol: 'udp', flows: [job.spec.flows[0]!], repeat: 3 } };
    const f = runs[0]!.flows[0]!;
    const noisy = [[1500e6, 0], [6900e6, 0], [10500e6, 300]].map(([bits, lost], i) => ({
      ...runs[0]!, index: i, repetition: i + 1,
      flows: [{ ...f, bitsPerSecond: bits!, udp: { sent: 10_000, received: 10_000 - lost!, lost: lost!, outOfOrder: 0, duplicates: 0, jitterSeconds: 1e-4, lossRatio: lost! / 10_000 } }],
    }));
    const report = buildReport(udpJob, noisy);
    const [leg] = report.points[0]!.flows;
    assert.deepEqual([leg!.bitsPerSecond!.confidenceInterval[0], leg!.bitsPerSecond!.intervalMethod], [0, 'clipped-t']);
    assert.deepEqual([report.points[0]!.total.bitsPerSecond!.confidenceInterval[0], report.points[0]!.total.bitsPerSecond!.intervalMethod], [0, 'clipped-t']);
    assert.deepEqual([leg!.udpLossRatio!.confidenceInterval[0], leg!.udpLossRatio!.intervalMethod], [0, 'clipped-t']);
    assert.match(reportTable(udpJob, noisy, report), /^total Mbit\/s: mean 6300\.00, sd [\d.]+, 95% CI 0\.00-17552\.90 \(clipped-t\), cv/m);
    assert.ok(reportCsv(report).split('\n').some((l) => /^0,forward,A:eth1,D:eth1,bitsPerSecond,3,6300000000,[\d.]+,1500000000,10500000000,0,17552897062\.8\d+,[\d.]+,clipped-t$/.test(l)));
  });

  test('csv: one header row, then a row per flow (and total) and metric', () => {
    const lines = reportCsv(buildReport(job, runs)).trimEnd().split('\n');
    assert.equal(lines[0], 'flow,direction,from,to,metric,n,mean,standardDeviation,min,max,ciLow,ciHigh,coefficientOfVariation,ciMethod');
    assert.ok(lines.slice(1).every((l) => l.split(',').length === 14));
    const total = lines.find((l) => l.startsWith('total,,,,bitsPerSecond,'))!.split(',');
    const sums = runs.map((r) => r.flows[0]!.bitsPerSecond! + r.flows[1]!.bitsPerSecond!);
    assert.equal(Number(total[6]), (sums[0]! + sums[1]!) / 2);
  });
});

describe('comparison', () => {
  const env = { kernel: '6.1.0', driver: 'mlx5_core', firmware: '16.35.2000', mtu: 9000, speedBitsPerSecond: 100e9, rmemMax: 212992, wmemMax: 212992 };
  const withEnv = (r: Run, kernel: string, engineVersion: string): Run => ({
    ...r,
    flows: r.flows.map((f) => ({ ...f, diagnostics: { sender: { agent: 'A', interface: 'eth1', address: '198.18.0.1', command: [], engineVersion, environment: { ...env, kernel } }, receiver: { agent: 'D', interface: 'eth1', address: '198.18.0.4', command: [], engineVersion, environment: env } } })),
  });
  test('environment differences the user did not vary are flagged; an engine change explains its version', async () => {
    const { compareJobs } = await import('@niclab/shared/domain/compare');
    const patched = runs.map((r) => withEnv(r, '6.1.0-patched', 'niclab builtin'));
    const stock = runs.map((r) => withEnv(r, '6.1.0', 'niclab builtin'));
    const c = compareJobs(job, stock, job, patched);
    assert.deepEqual(c.environmentDifferences, [{ where: 'flow 0 sender', field: 'kernel', baseline: '6.1.0', candidate: '6.1.0-patched', variedByUser: false }, { where: 'flow 1 sender', field: 'kernel', baseline: '6.1.0', candidate: '6.1.0-patched', variedByUser: false }]);
    assert.equal(c.points[0]!.environmentFlagged, true);
    assert.equal(c.points[0]!.verdict, 'no significant change', 'the same figures');
    const iperf = { ...job, spec: { ...job.spec, engine: 'iperf3' as const } };
    const other = compareJobs(job, stock, iperf, runs.map((r) => withEnv(r, '6.1.0', 'iperf 3.12')));
    assert.deepEqual(other.variedByUser, ['engine']);
    assert.ok(other.environmentDifferences.every((d) => d.field === 'engineVersion' && d.variedByUser));
    assert.equal(other.points[0]!.environmentFlagged, false);
  });
});

describe("a job's finding, for the job list", () => {
  const bottleneck = (verdict: 'link' | 'receiver CPU') => ({ verdict, reason: `${verdict}: synthetic`, evidence: {}, confident: true });
  const sweepJob: Job = { ...job, spec: { ...job.spec, flows: [job.spec.flows[0]!], sweep: { bufferLength: [4096, 65536] } } };
  const at = (index: number, bufferLength: number, bits: number, verdict: 'link' | 'receiver CPU'): Run => ({
    ...runs[0]!, id: `00000000-0000-4000-8000-00000000020${index}`, index, point: { bufferLength }, repetition: 1,
    flows: [{ ...runs[0]!.flows[0]!, bitsPerSecond: bits, bottleneck: bottleneck(verdict) }],
  });
  const swept = [at(0, 4096, 100e6, 'receiver CPU'), at(1, 65536, 300e6, 'receiver CPU'), at(2, 4096, 110e6, 'receiver CPU'), at(3, 65536, 320e6, 'link'), at(4, 65536, 310e6, 'link')];

  test("a sweep's best point: its total mean, where, and the verdict most of its legs gave", () => {
    const found = jobFinding(sweepJob, swept)!;
    assert.deepEqual(found, { from: 'point', figure: 'bitsPerSecond', unit: 'bits/s', value: (300e6 + 320e6 + 310e6) / 3, point: { bufferLength: 65536 }, verdict: 'link', reason: 'link: synthetic' });
    assert.deepEqual(findingText(found), { found: '310.00 Mbit/s at bufferLength=65536', verdict: 'link' });
  });

  test('a round trip is best when lowest; nothing measured is no finding', () => {
    const rttJob: Job = { ...sweepJob, spec: { ...sweepJob.spec, test: 'probe' } };
    const probe = (run: Run, seconds: number): Run => ({ ...run, flows: [{ ...run.flows[0]!, bottleneck: null, probe: { loaded: { rttSeconds: { p50: seconds } } } } as unknown as FlowResult] });
    const report = buildReport(rttJob, [probe(swept[0]!, 0.002), probe(swept[1]!, 0.001)]);
    assert.equal(report.headline.name, 'rttP50Seconds');
    const found = jobFinding(rttJob, [probe(swept[0]!, 0.002), probe(swept[1]!, 0.001)]);
    assert.deepEqual([found?.value, found?.point, found?.verdict], [report.points.find((p) => p.point.bufferLength === 65536)!.total.rttP50Seconds!.mean, { bufferLength: 65536 }, null]);
    assert.equal(jobFinding(sweepJob, swept.map((r) => ({ ...r, status: 'failed', flows: [], error: { code: 'engine_failed', message: 'x' } }))), null);
    assert.deepEqual(findingText(null), { found: '-', verdict: '-' });
  });
});
