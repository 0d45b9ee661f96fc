/**
 * The figures of real jobs (builtin engine on loopback, through the API and the CLI): each
 * chart's marks are the report's points, with the report's values.
 */
import assert from 'node:assert/strict';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { ApiClient } from '../helpers/api-client.js';
import { startNiclab, type TestNiclab } from '../helpers/niclab.js';
import { runNiclab } from '../helpers/processes.js';
import { axisTitles, chartTitle, markItems, parseSvg, texts } from '../helpers/svg.js';

let niclab: TestNiclab;
let client: ApiClient;
let dir: string;
const lo = { agent: 'plot', interface: 'lo' };
const loop = { from: lo, to: lo };

before(async () => {
  // A loaded 2-core machine can take more than the default 1.5 s to start a receiver.
  niclab = await startNiclab(['plot'], { NICLAB_SETUP_SECONDS: '10' });
  client = niclab.client;
  dir = await mkdtemp(join(tmpdir(), 'niclab-plots-'));
});

after(async () => {
  await niclab?.stop();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function svgOf(path: string) {
  const res = await fetch(`${client.base}${path}`);
  assert.equal(res.status, 200, await res.clone().text());
  assert.equal(res.headers.get('content-type'), 'image/svg+xml; charset=utf-8');
  return parseSvg(await res.text());
}

/** vega's aria labels print numbers rounded, with thousands separators. */
const close = (label: string | undefined, value: number) => Math.abs(Number(String(label).replace(/,/g, '')) - value) <= Math.max(0.01, Math.abs(value) * 1e-3);

const sweep = { duration: 0.5, interval: 0.5, repeat: 2, retries: 2, sweep: { bufferLength: [8192, 65536] }, flows: [loop] };

test('a sweep job: a symbol per point at the report\'s mean, in Mbit/s against KiB; the CLI writes the same figure', async () => {
  const job = await client.succeed(sweep, 120_000);
  const { body: report } = await client.call('getReport', 'GET', `/v1/jobs/${job.id}/report`);
  const svg = await svgOf(`/v1/jobs/${job.id}/report?format=svg`);
  assert.deepEqual(axisTitles(svg), ['buffer length (KiB)', 'throughput (Mbit/s)']);
  const means = markItems(svg, 'means', 'symbol');
  assert.equal(means.length, 2);
  for (const [i, p] of report.points.entries()) {
    assert.ok(close(means[i]!['buffer length (KiB)'], p.point.bufferLength / 1024));
    assert.ok(close(means[i]!['throughput (Mbit/s)'], p.flows[0].bitsPerSecond.mean / 1e6), `${JSON.stringify(means[i])} vs ${p.flows[0].bitsPerSecond.mean}`);
  }
  assert.equal(markItems(svg, 'intervals', 'rule').length, 2);
  assert.match(chartTitle(svg).text, /plot:lo -> plot:lo/);
  assert.match(chartTitle(svg).subtitle, /engine builtin/);

  const file = join(dir, 'sweep.svg');
  const cli = await runNiclab(['report', job.id, '--svg', file], { NICLAB_API: client.base });
  assert.equal(cli.code, 0, cli.stderr);
  assert.match(cli.stdout, /wrote .*sweep\.svg/);
  assert.equal(markItems(parseSvg(await readFile(file, 'utf8')), 'means', 'symbol').length, 2);
});

test('A/B of two sweep jobs: two bars per point and a verdict per point, through the API and the CLI', async () => {
  const [a, b] = [await client.succeed(sweep, 120_000), await client.succeed(sweep, 120_000)];
  const { body: comparison } = await client.call('compareJobs', 'GET', `/v1/compare?baseline=${a.id}&candidate=${b.id}`);
  const svg = await svgOf(`/v1/compare?baseline=${a.id}&candidate=${b.id}&format=svg`);
  assert.deepEqual(axisTitles(svg), ['point (bufferLength)', 'throughput (Mbit/s)']);
  const bars = markItems(svg, 'bars', 'rect');
  assert.equal(bars.length, 4);
  assert.ok(close(bars[1]!['throughput (Mbit/s)'], comparison.points[0].candidate.mean / 1e6));
  assert.equal(markItems(svg, 'intervals', 'rule').length, 4);
  const verdicts = texts(svg, 'verdicts');
  assert.equal(verdicts.length, 2);
  for (const [i, p] of comparison.points.entries()) assert.ok(verdicts[i]!.startsWith(p.verdict), `${verdicts[i]} vs ${p.verdict}`);

  const file = join(dir, 'ab.svg');
  const cli = await runNiclab(['compare', a.id, b.id, '--svg', file], { NICLAB_API: client.base });
  assert.equal(cli.code, 0, cli.stderr);
  assert.equal(markItems(parseSvg(await readFile(file, 'utf8')), 'bars', 'rect').length, 4);
});

test('a single run is its intervals over time; a fan-in is a bar per flow', async () => {
  const single = await client.succeed({ duration: 1, interval: 0.25, retries: 2, flows: [loop] }, 60_000);
  const svg = await svgOf(`/v1/jobs/${single.id}/report?format=svg`);
  assert.deepEqual(axisTitles(svg), ['time (s)', 'throughput (Mbit/s)']);
  const intervals = single.runs[0].flows[0].intervals;
  const samples = markItems(svg, 'samples', 'symbol');
  assert.equal(samples.length, intervals.length);
  assert.ok(intervals.length >= 3, `${intervals.length} intervals`);
  for (const [i, s] of samples.entries()) assert.ok(close(s['throughput (Mbit/s)'], intervals[i].bitsPerSecond / 1e6));

  const fanIn = await client.succeed({ duration: 0.5, interval: 0.5, repeat: 2, retries: 2, flows: [loop, loop] }, 60_000);
  const bars = markItems(await svgOf(`/v1/jobs/${fanIn.id}/report?format=svg`), 'bars', 'rect');
  assert.deepEqual(bars.map((b) => b.flow), ['flow 0: plot:lo -> plot:lo', 'flow 1: plot:lo -> plot:lo']);
});

test('a rate search: a symbol per trial at its loss, against the offered rate in kpps', async () => {
  const spec = { duration: 0.5, protocol: 'udp', udp: { packetSize: 200, rate: { packetsPerSecond: 100 } }, search: { target: 'pdr', lossRatio: 0.2, max: { packetsPerSecond: 2000 } }, flows: [loop] };
  const job = await client.succeed(spec, 60_000);
  const { body: report } = await client.call('getReport', 'GET', `/v1/jobs/${job.id}/report`);
  const svg = await svgOf(`/v1/jobs/${job.id}/report?format=svg`);
  assert.deepEqual(axisTitles(svg), ['offered rate per flow (kpps)', 'loss (%)']);
  const trials = markItems(svg, 'trials', 'symbol');
  const expected = report.searches[0].trials;
  assert.equal(trials.length, expected.length);
  for (const [i, t] of trials.entries()) {
    assert.ok(close(t['offered rate per flow (kpps)'], expected[i].packetsPerSecond / 1000));
    assert.ok(close(t['loss (%)'], expected[i].lossRatio * 100));
  }
});
