/**
 * Every chart type, from a report (or comparison) built by hand, rendered to SVG by the API's
 * renderer and read back by structure: how many marks, their values, the axis titles.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Comparison } from '@niclab/shared/domain/compare';
import type { Job, JobSpec, Run } from '@niclab/shared/domain/contract';
import { comparisonChart, reportChart, reportChartKind } from '@niclab/shared/domain/plots';
import { matrixTable } from '@niclab/shared/domain/matrix-report';
import type { Report } from '@niclab/shared/domain/report';
import { renderSvg } from '../../services/api/src/render-svg.js';
import { axisTitles, chartTitle, markItems, markPositions, parseSvg, texts } from '../helpers/svg.js';
import { compareJobs } from '@niclab/shared/domain/compare';
import { buildReport } from '@niclab/shared/domain/report';
import { drive } from '../helpers/search-path.js';

type ReportPoint = Report['points'][number];
type Leg = ReportPoint['flows'][number];
type Summary = NonNullable<Leg['bitsPerSecond']>;

const A = { agent: 'A', interface: 'eth1' };
const B = { agent: 'B', interface: 'eth1' };
const C = { agent: 'C', interface: 'eth1' };

function jobOf(id: string, spec: Partial<JobSpec>): Job {
  return { id, status: 'succeeded', spec: { engine: 'builtin', protocol: 'tcp', test: 'stream', flows: [{ from: A, to: B }], ...spec } } as unknown as Job;
}

/** A summary of mean `mean` whose 95% interval is ±`half`. */
const summary = (mean: number, half: number, n = 3): Summary => ({ n, mean, standardDeviation: half / 2, min: mean - half, max: mean + half, confidenceInterval: [mean - half, mean + half], intervalMethod: 't', coefficientOfVariation: half / 2 / mean });

function leg(flowIndex: number, from: typeof A, bitsPerSecond: Summary | null): Leg {
  return { flowIndex, direction: 'forward', test: 'stream', from, to: B, bitsPerSecond, retransmits: null, udpLossRatio: null, jitterSeconds: null, transactionsPerSecond: null, rttP50Seconds: null, rttP99Seconds: null, idleRttP50Seconds: null, idleRttP99Seconds: null, senderCpuSeconds: null, receiverCpuSeconds: null, senderServiceDemand: null, receiverServiceDemand: null, sourceDiskBitsPerSecond: null, sinkDiskBitsPerSecond: null };
}

function point(p: ReportPoint['point'], flows: Leg[], succeeded = 3): ReportPoint {
  return { point: p, runs: { succeeded, failed: 0 }, stoppedBy: 'fixed', halfWidthPercent: null, flows, total: { bitsPerSecond: null, retransmits: null, transactionsPerSecond: null } };
}

function report(dimensions: string[], points: ReportPoint[], extra: Partial<Report> = {}): Report {
  return { jobId: 'j', status: 'succeeded', headline: { name: 'bitsPerSecond', unit: 'bit/s' }, confidence: 0.95, dimensions: dimensions as Report['dimensions'], points, failedRuns: [], ...extra };
}

const draw = async (spec: Record<string, unknown>) => parseSvg(await renderSvg(spec));
const num = (s: string | undefined) => Number(String(s).replace(/,/g, ''));

test('a sweep: throughput with its interval against the last swept field in KiB, a line per value of the other field', async () => {
  const job = jobOf('sweep-job', { sweep: { bufferLength: [8192, 131072], socketBuffer: [65536, 262144, 1048576] } });
  const mbit = (b: number, w: number) => (b === 8192 ? 300 : 900) + w / 4096; // Mbit/s, a distinct value per point
  const points = [8192, 131072].flatMap((b) => [65536, 262144, 1048576].map((w) => point({ bufferLength: b, socketBuffer: w }, [leg(0, A, summary(mbit(b, w) * 1e6, 20e6))])));
  const r = report(['bufferLength', 'socketBuffer'], points);
  assert.equal(reportChartKind(r), 'sweep');
  const svg = await draw(reportChart(job, [], r));
  assert.deepEqual(axisTitles(svg), ['socket buffer (KiB)', 'throughput (Mbit/s)']);
  const means = markItems(svg, 'means', 'symbol');
  assert.equal(means.length, 6, 'a symbol per point');
  assert.deepEqual(means.map((m) => [num(m['socket buffer (KiB)']), num(m['throughput (Mbit/s)'])]).sort((a, b) => a[1]! - b[1]!), [
    [64, 316], [256, 364], [1024, 556], [64, 916], [256, 964], [1024, 1156],
  ]);
  assert.deepEqual(new Set(means.map((m) => m.series)), new Set(['bufferLength=8192', 'bufferLength=131072']));
  assert.equal(markItems(svg, 'lines', 'line').length, 2, 'a line per buffer length');
  const intervals = markItems(svg, 'intervals', 'rule');
  assert.equal(intervals.length, 6, 'an interval per point');
  assert.ok(intervals.some((i) => num(i['throughput (Mbit/s)']) === 296 && num(i.high) === 336), JSON.stringify(intervals[0]));
  const { text, subtitle } = chartTitle(svg);
  assert.match(text, /A:eth1 -> B:eth1/);
  assert.match(subtitle, /engine builtin/);
});

/** Runs of a one-flow throughput job, a run per value (Mbit/s) at each buffer length. */
const throughputRuns = (mbit: Record<number, number[]>): Run[] => Object.entries(mbit).flatMap(([b, values]) => values.map((m, i) => ({
  id: `r${b}-${i}`, jobId: 'j', index: i, point: { bufferLength: Number(b) }, repetition: i + 1, status: 'succeeded', startedAt: null, finishedAt: null, error: null,
  flows: [{ flowIndex: 0, direction: 'forward', from: A, to: B, sender: null, receiver: null, bitsPerSecond: m * 1e6, retransmits: null, udp: null, rr: null, intervals: [], nic: { from: null, to: null }, pathVerified: true, error: null, diagnostics: {} }],
}) as Run));

test('a sweep of buffer lengths 8, 32 and 128 KiB: a log axis (equal steps for equal ratios); a noisy point\'s interval stops at 0', async () => {
  const job = jobOf('log-sweep', { repeat: 3, sweep: { bufferLength: [8192, 32768, 131072] } });
  // 1,500, 6,900 and 10,500 Mbit/s: mean 6,300, t-interval -4,952.9 to 17,552.9 (scipy), cut at 0.
  const r = buildReport(job, throughputRuns({ 8192: [100, 101, 99], 32768: [1500, 6900, 10500], 131072: [400, 404, 396] }));
  const noisy = r.points[1]!.flows[0]!.bitsPerSecond!;
  assert.equal(noisy.intervalMethod, 'clipped-t');
  assert.equal(noisy.confidenceInterval[0], 0);
  assert.ok(Math.abs(noisy.confidenceInterval[1]! - 17552897062.876396) < 1, String(noisy.confidenceInterval[1]));
  const svg = await draw(reportChart(job, [], r));
  const xs = markPositions(svg, 'means', 'symbol').sort((a, b) => a.x - b.x).map((m) => m.x);
  assert.equal(xs.length, 3);
  // 8 -> 32 and 32 -> 128 are both a factor of 4: equal steps on a log axis (on a linear one, 24 and 96).
  assert.ok(Math.abs((xs[1]! - xs[0]!) - (xs[2]! - xs[1]!)) < 0.01, `x ${xs.join(', ')}`);
  const drawn = markItems(svg, 'intervals', 'rule').find((i) => i['buffer length (KiB)'] === '32');
  assert.equal(num(drawn?.['throughput (Mbit/s)']), 0, JSON.stringify(drawn));
});

test('the A/B chart draws each side\'s interval as the comparison made it, within the figure\'s domain', async () => {
  const job = jobOf('ab', { repeat: 3, sweep: { bufferLength: [8192] } });
  const c = compareJobs(job, throughputRuns({ 8192: [1500, 6900, 10500] }), job, throughputRuns({ 8192: [6000, 6100, 6200] }));
  assert.deepEqual(c.points[0]!.baseline.confidenceInterval, [0, c.points[0]!.baseline.confidenceInterval[1]]);
  assert.equal(c.points[0]!.baseline.intervalMethod, 'clipped-t');
  const svg = await draw(comparisonChart(job, job, c));
  const low = markItems(svg, 'intervals', 'rule').map((i) => num(i['throughput (Mbit/s)']));
  assert.equal(low.length, 2);
  assert.equal(Math.min(...low), 0, `interval lows ${low.join(', ')}`);
});

test('a sweep of several flows: a line per flow; a point without a succeeded run draws nothing', async () => {
  const job = jobOf('fan-sweep', { flows: [{ from: A, to: B }, { from: C, to: B }], sweep: { streams: [1, 2, 4] } });
  const r = report(['streams'], [
    point({ streams: 1 }, [leg(0, A, summary(400e6, 5e6)), leg(1, C, summary(410e6, 5e6))]),
    point({ streams: 2 }, [leg(0, A, summary(450e6, 5e6)), leg(1, C, summary(440e6, 5e6))]),
    point({ streams: 4 }, [], 0),
  ]);
  const svg = await draw(reportChart(job, [], r));
  assert.deepEqual(axisTitles(svg), ['parallel streams', 'throughput (Mbit/s)']);
  const means = markItems(svg, 'means', 'symbol');
  assert.equal(means.length, 4);
  assert.deepEqual(new Set(means.map((m) => m.series)), new Set(['flow 0: A:eth1 -> B:eth1', 'flow 1: C:eth1 -> B:eth1']));
  assert.equal(markItems(svg, 'lines', 'line').length, 2);
  assert.match(chartTitle(svg).text, /A:eth1 -> B:eth1, C:eth1 -> B:eth1/);
});

test('a rate search: loss against offered rate in kpps, a symbol per trial, a line per datagram size', async () => {
  const job = jobOf('search-job', { protocol: 'udp', sweep: { packetSize: [64, 1500] }, search: { target: 'ndr' } } as Partial<JobSpec>);
  const trial = (runIndex: number, pps: number, loss: number) => ({ runIndex, packetsPerSecond: pps, passed: loss === 0, failedBy: loss === 0 ? null : ('loss' as const), lossRatio: loss, flows: [] });
  const search = (packetSize: number, trials: ReturnType<typeof trial>[], found: number) => ({
    point: { packetSize }, target: 'ndr' as const, allowedLossRatio: 0, packetSize,
    found: { packetsPerSecond: found, bitsPerSecond: found * packetSize * 8, wireBitsPerSecond: found * (packetSize + 66) * 8, totalPacketsPerSecond: found },
    bracket: { low: found, high: null, min: 1000, max: 200000 }, limitedBy: 'loss' as const, stoppedBy: 'resolution' as const, trials,
  });
  const r = report(['packetSize', 'rate'], [], {
    searches: [
      search(64, [trial(0, 200000, 0.25), trial(1, 100000, 0), trial(2, 150000, 0.02)], 100000),
      search(1500, [trial(3, 80000, 0.1), trial(4, 40000, 0), trial(5, 60000, 0)], 60000),
    ],
  });
  assert.equal(reportChartKind(r), 'search');
  const svg = await draw(reportChart(job, [], r));
  assert.deepEqual(axisTitles(svg), ['offered rate per flow (kpps)', 'loss (%)']);
  const trials = markItems(svg, 'trials', 'symbol');
  assert.equal(trials.length, 6, 'a symbol per trial');
  assert.deepEqual(trials.map((t) => [num(t['offered rate per flow (kpps)']), num(t['loss (%)'])]).sort((a, b) => a[0]! - b[0]!), [
    [40, 0], [60, 0], [80, 10], [100, 0], [150, 2], [200, 25],
  ]);
  assert.equal(markItems(svg, 'lines', 'line').length, 2);
  assert.match(chartTitle(svg).subtitle, /NDR 100\.0 kpps, NDR 60\.0 kpps/);
});

test('an MLRsearch: loss against offered rate, a symbol per trial sized by its duration, each goal\'s relevant bounds as rules, its conditional throughput in the subtitle', async () => {
  // Driven to its end on a path that loses nothing up to 40,000/s and 1% per 2,000 above: the report is the search's own.
  const spec = { engine: 'builtin', test: 'stream', protocol: 'udp', duration: 4, interval: 1, direction: 'forward', repeat: 1, retries: 0, flows: [{ from: A, to: B }], udp: { packetSize: 1000, rate: { packetsPerSecond: 1000 } }, search: { algorithm: 'mlrsearch', min: { packetsPerSecond: 1000 }, max: { packetsPerSecond: 100_000 } } } as unknown as JobSpec;
  const job = { ...jobOf('mlr-job', spec), spec };
  const { runs } = drive(spec, (offered) => ({ lossRatio: Math.max(0, (offered - 40_000) / 200_000) }));
  const r = buildReport(job, runs);
  assert.equal(reportChartKind(r), 'mlrsearch');
  const [result] = r.mlrSearches!;
  const svg = await draw(reportChart(job, runs, r));
  assert.deepEqual(axisTitles(svg).slice(0, 2), ['offered rate per flow (kpps)', 'loss (%)']);
  const trials = markItems(svg, 'trials', 'symbol');
  const key = (offered: number, loss: number, seconds: number) => `${offered.toFixed(3)} ${loss.toFixed(3)} ${seconds}`;
  assert.deepEqual(trials.map((t) => key(num(t['offered rate per flow (kpps)']), num(t['loss (%)']), num(t['trial duration (s)']))).sort(),
    result!.trials.map((t) => key(t.packetsPerSecond / 1000, t.lossRatio * 100, t.duration)).sort(), 'a symbol per trial, at its load, loss and duration');
  assert.ok(trials.some((t) => t.trial === 'warm-up (not counted)') && trials.some((t) => t.trial === 'counted'));
  const bounds = markItems(svg, 'bounds', 'rule');
  assert.deepEqual(bounds.map((b) => `${b.bound} ${num(b['offered rate per flow (kpps)']).toFixed(3)}`).sort(), result!.goals.flatMap((g) => [
    `${g.goal.lossRatio === 0 ? 'NDR' : 'PDR 0.5%'} lower ${(g.relevantLowerBound!.packetsPerSecond / 1000).toFixed(3)}`,
    `${g.goal.lossRatio === 0 ? 'NDR' : 'PDR 0.5%'} upper ${(g.relevantUpperBound!.packetsPerSecond / 1000).toFixed(3)}`,
  ]).sort());
  const ndr = result!.goals[0]!.conditionalThroughput!.packetsPerSecond / 1000;
  assert.ok(chartTitle(svg).subtitle.includes(`NDR ${ndr.toFixed(3)} kpps`), chartTitle(svg).subtitle);
});

test('a fan-in: a bar per flow with its interval', async () => {
  const job = jobOf('fan-in', { flows: [{ from: A, to: B }, { from: C, to: B }, { from: { agent: 'D', interface: 'eth1' }, to: B }] });
  const r = report([], [point({}, [leg(0, A, summary(310e6, 10e6)), leg(1, C, summary(320e6, 12e6)), leg(2, { agent: 'D', interface: 'eth1' }, summary(290e6, 8e6))])]);
  assert.equal(reportChartKind(r), 'fan-in');
  const svg = await draw(reportChart(job, [], r));
  assert.deepEqual(axisTitles(svg), ['flow', 'throughput (Mbit/s)']);
  const bars = markItems(svg, 'bars', 'rect');
  assert.deepEqual(bars.map((b) => [b.flow, num(b['throughput (Mbit/s)'])]), [['flow 0: A:eth1 -> B:eth1', 310], ['flow 1: C:eth1 -> B:eth1', 320], ['flow 2: D:eth1 -> B:eth1', 290]]);
  assert.deepEqual(markItems(svg, 'intervals', 'rule').map((i) => [num(i['throughput (Mbit/s)']), num(i.high)]), [[300, 320], [308, 332], [282, 298]]);
  assert.match(chartTitle(svg).text, /should be equal/);
  const one = report([], [point({}, [leg(0, A, summary(310e6, 10e6))])]);
  assert.equal(reportChartKind(one), 'fan-in', 'one flow repeated at one point is a bar too, not a one-point line');
  const lone = await draw(reportChart(jobOf('one-flow', {}), [], one));
  assert.equal(markItems(lone, 'bars', 'rect').length, 1);
  assert.doesNotMatch(chartTitle(lone).text, /should be equal/);
});

test('a single run: its intervals over time, a line per flow', async () => {
  const job = jobOf('single', { flows: [{ from: A, to: B }, { from: C, to: B }] });
  const r = report([], [point({}, [leg(0, A, summary(500e6, 0, 1)), leg(1, C, summary(400e6, 0, 1))], 1)]);
  assert.equal(reportChartKind(r), 'time-series');
  const intervals = (base: number) => [0, 1, 2, 3].map((i) => ({ start: i * 0.5, end: (i + 1) * 0.5, bitsPerSecond: (base + i) * 1e6 }));
  const flow = (flowIndex: number, from: typeof A, base: number) => ({ flowIndex, direction: 'forward', from, to: B, intervals: intervals(base) });
  const run = { index: 0, status: 'succeeded', point: {}, flows: [flow(0, A, 500), flow(1, C, 400)] } as unknown as Run;
  const svg = await draw(reportChart(job, [run], r));
  assert.deepEqual(axisTitles(svg), ['time (s)', 'throughput (Mbit/s)']);
  const samples = markItems(svg, 'samples', 'symbol');
  assert.equal(samples.length, 8, 'a symbol per interval per flow');
  assert.deepEqual(samples.filter((s) => s.flow!.startsWith('flow 1')).map((s) => [num(s['time (s)']), num(s['throughput (Mbit/s)'])]), [[0.5, 400], [1, 401], [1.5, 402], [2, 403]]);
  assert.equal(markItems(svg, 'lines', 'line').length, 2);
  assert.match(chartTitle(svg).text, /run 0: A:eth1 -> B:eth1, C:eth1 -> B:eth1/);
});

test('an A/B comparison: two bars per point with their intervals, and the verdict above them', async () => {
  const baseline = jobOf('base', { sweep: { bufferLength: [8192, 65536] } });
  const candidate = jobOf('cand', { engine: 'iperf3', sweep: { bufferLength: [8192, 65536] } } as Partial<JobSpec>);
  // t(0.975, 3) = 3.182; sd 10 Mbit/s over sqrt(4): the interval is ±15.9 Mbit/s.
  const side = (mean: number) => ({ n: 4, mean, standardDeviation: 10e6, confidenceInterval: [mean - 15.91e6, mean + 15.91e6], intervalMethod: 't' as const });
  const rest = { difference: null, differenceInterval: null, differenceIntervalMethod: null, changePercentReason: null, judged: '', reason: null, environmentFlagged: false };
  const points: Comparison['points'] = [
    { ...rest, point: { bufferLength: 8192 }, baseline: side(500e6), candidate: side(600e6), changePercent: 20, changePercentInterval: [15, 25], pValue: 0.001, adjustedPValue: 0.002, verdict: 'better' },
    { ...rest, point: { bufferLength: 65536 }, baseline: side(900e6), candidate: side(905e6), changePercent: 0.56, changePercentInterval: [-2, 3], pValue: 0.5, adjustedPValue: 0.5, verdict: 'no significant change' },
  ];
  const metric = { name: 'bitsPerSecond', unit: 'bits/s', higherIsBetter: true } as const;
  const c: Comparison = {
    baseline: 'base', candidate: 'cand', headline: { name: 'bitsPerSecond', unit: 'bit/s' }, metric, metrics: [{ metric, minChange: 1e4, points }], higherIsBetter: true, confidence: 0.95,
    correction: { method: 'holm', family: 'figure', alpha: 0.05 }, minChangePercent: 1, minChange: 1e4, variedByUser: ['engine'], environmentDifferences: [], changesBetween: [], points, searches: [],
  };
  const svg = await draw(comparisonChart(baseline, candidate, c));
  assert.deepEqual(axisTitles(svg), ['point (bufferLength)', 'throughput (Mbit/s)']);
  const bars = markItems(svg, 'bars', 'rect');
  assert.deepEqual(bars.map((b) => [b.point, b.side, num(b['throughput (Mbit/s)'])]), [
    ['bufferLength=8192', 'baseline', 500], ['bufferLength=8192', 'candidate', 600], ['bufferLength=65536', 'baseline', 900], ['bufferLength=65536', 'candidate', 905],
  ]);
  const intervals = markItems(svg, 'intervals', 'rule');
  assert.equal(intervals.length, 4);
  assert.ok(intervals.every((i) => Math.abs(num(i.high) - num(i['throughput (Mbit/s)']) - 31.82) < 0.05), JSON.stringify(intervals));
  assert.deepEqual(texts(svg, 'verdicts'), ['better (+20.0%)', 'no significant change (+0.6%)']);
  assert.match(chartTitle(svg).text, /A:eth1 -> B:eth1/);
  assert.match(chartTitle(svg).subtitle, /engine builtin vs iperf3/);
});

test('a group matrix: a coloured cell per measured pair whose label names its loss and bottleneck, a grey FAILED cell naming the error', async () => {
  const job = jobOf('matrix-job', { protocol: 'udp', group: { shape: 'mesh', members: { labels: {}, interface: 'eth1' } }, flows: [{ from: A, to: B }, { from: B, to: A }] } as Partial<JobSpec>);
  const cell = (mean: number | null, extra: Record<string, unknown>) => ({ value: mean === null ? null : summary(mean, 0, 1), verdict: mean === null ? 'failed' : 'measured', runs: { succeeded: mean === null ? 0 : 1, failed: mean === null ? 1 : 0 }, error: null, lossRatio: null, bottleneck: null, ...extra });
  const matrix = {
    point: {}, sources: [A, B], destinations: [A, B],
    cells: [
      [null, cell(500e6, { lossRatio: 0.0125, bottleneck: { verdict: 'receiver socket buffer', reason: 'r', confident: true, runs: 1 } })],
      [cell(null, { error: { code: 'peer_unavailable', message: 'no receiver on A' } }), null],
    ],
  } as unknown as NonNullable<Report['matrix']>[number];
  const r = report([], [], { matrix: [matrix] });
  assert.equal(reportChartKind(r), 'matrix');
  const svg = await draw(reportChart(job, [], r));
  const cells = markItems(svg, 'cells', 'rect');
  assert.equal(cells.length, 1);
  assert.deepEqual([cells[0]!.source, cells[0]!.destination, num(cells[0]!['throughput (Mbit/s)']), cells[0]!.loss, cells[0]!.bottleneck], ['A:eth1', 'B:eth1', 500, '1.25%', 'receiver socket buffer']);
  const failed = markItems(svg, 'failures', 'rect');
  assert.deepEqual(failed.map((f) => [f.source, f.destination, f.verdict, f.error]), [['B:eth1', 'A:eth1', 'failed', 'peer_unavailable: no receiver on A']]);
  assert.deepEqual(texts(svg, 'values').sort(), ['500.0', 'FAILED']);
});

test('a bidir pair\'s cell: the tooltip names the loss, the verdict and their direction as the text table does', async () => {
  const job = jobOf('bidir-matrix', { protocol: 'udp', direction: 'bidir', group: { shape: 'mesh', members: { labels: {}, interface: 'eth1' } }, flows: [{ from: A, to: B }] } as Partial<JobSpec>);
  const cell = { value: summary(95e6, 0, 1), verdict: 'measured', runs: { succeeded: 1, failed: 0 }, error: null, lossRatio: 0.4, direction: 'reverse', bottleneck: { verdict: 'receiver socket buffer', reason: 'r', confident: true, runs: 1 } };
  const matrix = { point: {}, sources: [A], destinations: [B], cells: [[cell]] } as unknown as NonNullable<Report['matrix']>[number];
  const svg = await draw(reportChart(job, [], report([], [], { matrix: [matrix] })));
  const [tip] = markItems(svg, 'cells', 'rect');
  assert.deepEqual([tip!.loss, tip!.bottleneck, tip!.direction], ['40.00%', 'receiver socket buffer', 'reverse']);
  assert.ok(matrixTable(job, matrix).includes(`95.00 ${tip!.loss} [${tip!.bottleneck}, ${tip!.direction}]`), matrixTable(job, matrix));
});

test("a probe job's axis is its headline as the catalogue names it, round-trip median in ms (it said 'rr rate')", async () => {
  const job = jobOf('probe-job', { test: 'probe', sweep: { bufferLength: [8192, 131072] } });
  const rtt = (ms: number) => ({ ...leg(0, A, null), test: 'probe' as const, rttP50Seconds: summary(ms / 1000, 0.001) });
  const r = report(['bufferLength'], [point({ bufferLength: 8192 }, [rtt(17)]), point({ bufferLength: 131072 }, [rtt(19)])], { headline: { name: 'rttP50Seconds', unit: 's' } });
  const svg = await draw(reportChart(job, [], r));
  assert.deepEqual(axisTitles(svg), ['buffer length (KiB)', 'round-trip median (ms)']);
});
