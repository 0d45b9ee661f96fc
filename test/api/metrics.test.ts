import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { get } from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { crc32, gunzipSync } from 'node:zlib';
import { crc32Combine, renderLinks } from '@niclab/api/exposition';
import type { LinkLabels, LinkValues } from '@niclab/shared/stores/metric-store';
import { VERDICTS } from '@niclab/shared/domain/attribution';
import { loadOpenApi } from '@niclab/shared/runtime/openapi';
import { startTestRedis } from '../helpers/redis.js';
import { startStack, testConfig } from '../helpers/stack.js';

const labels: LinkLabels = { src_agent: 'A', src_interface: 'eth1', dst_agent: 'B', dst_interface: 'eth1', engine: 'builtin', protocol: 'tcp', test: 'rr', direction: 'forward', schedule: 'say "hi" \\ there' };
const values: LinkValues = { bitsPerSecond: 1e9, endedAt: 1796000000.5, pathVerified: 1, retransmits: null, udpLossRatio: null, jitterSeconds: null, senderCpuSecondsPerBit: 4e-11, receiverCpuSecondsPerBit: 5e-11, rttSeconds: { p50: 0.0001, p90: 0.0002, p99: 0.0004 } };

test('link metrics: labels escaped once per link, absent figures left out, valid for promtool', () => {
  const text = renderLinks([{ labels, values }]);
  const set = 'src_agent="A",src_interface="eth1",dst_agent="B",dst_interface="eth1",engine="builtin",protocol="tcp",test="rr",direction="forward",schedule="say \\"hi\\" \\\\ there"';
  assert.ok(text.includes(`niclab_link_throughput_bits_per_second{${set}} 1000000000\n`), text);
  assert.ok(text.includes(`niclab_link_rtt_seconds{${set},quantile="0.99"} 0.0004\n`));
  assert.ok(!text.includes('niclab_link_retransmits{'), 'a figure the run does not have is not a series');
  // promtool parses the text, then lints names. Two conventions are ours on purpose: bits (the
  // unit of networking) rather than bytes, and a `quantile` label on a gauge of percentiles.
  const lint = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  const problems = `${lint.stdout}${lint.stderr}`.split('\n').filter((l) => l.trim() && !/should not have "quantile" label|use base unit "bytes" instead of "bits"/.test(l));
  assert.deepEqual(problems, [], 'parse errors or other lint findings');
});

test('a UDP link\'s lost datagrams by place and its bottleneck verdict: bounded label sets, one verdict at 1', () => {
  const udpLabels: LinkLabels = { ...labels, protocol: 'udp', test: 'stream', schedule: '' };
  const udpLost = { senderSocket: 400, senderNic: 0, network: 3, receiverNic: 0, receiverBacklog: 0, receiverSocketBuffer: 0, unexplained: -1 };
  const text = renderLinks([{ labels: udpLabels, values: { ...values, rttSeconds: null, udpLossRatio: 0.1, udpLost, bottleneck: 'link' } }]);
  const set = 'src_agent="A",src_interface="eth1",dst_agent="B",dst_interface="eth1",engine="builtin",protocol="udp",test="stream",direction="forward",schedule=""';
  assert.ok(text.includes(`niclab_link_udp_lost_datagrams{${set},place="senderSocket"} 400\n`), text);
  assert.ok(text.includes(`niclab_link_udp_lost_datagrams{${set},place="unexplained"} -1\n`));
  assert.equal(text.match(/^niclab_link_udp_lost_datagrams\{/gm)?.length, 7, 'one series per place');
  const contract = (loadOpenApi().doc as unknown as { components: { schemas: { Verdict: { enum: string[] } } } }).components.schemas.Verdict.enum;
  assert.deepEqual([...VERDICTS], contract, 'the label set is the contract\'s Verdict enum, in its order');
  assert.deepEqual(text.match(/(?<=^niclab_link_bottleneck\{[^}]*verdict=")[^"]+/gm), contract, 'one series per verdict');
  assert.ok(text.includes(`niclab_link_bottleneck{${set},verdict="link"} 1\n`));
  assert.ok(text.includes(`niclab_link_bottleneck{${set},verdict="receiver CPU"} 0\n`));
  const older = renderLinks([{ labels: udpLabels, values: { ...values, rttSeconds: null } }]);
  assert.ok(!older.includes('niclab_link_bottleneck{') && !older.includes('niclab_link_udp_lost_datagrams{'), 'a result stored before attribution has neither');
});

test('a scrape parses only links that changed, and shows every change: new values, new links, links gone', async () => {
  const redis = await startTestRedis();
  const stack = await startStack(testConfig(redis.url));
  try {
    const key = stack.services.keys.links;
    const throughput = async () => {
      const text = await stack.services.metrics.render();
      return text.split('\n').filter((l) => l.startsWith('niclab_link_throughput_bits_per_second{')).map((l) => `${/src_agent="(\w+)"/.exec(l)![1]} ${l.split(' ').at(-1)}`).sort();
    };
    const other = { ...labels, src_agent: 'C', schedule: '' };
    await stack.services.redis.hset(key, JSON.stringify(labels), JSON.stringify(values));
    assert.deepEqual(await throughput(), ['A 1000000000']);
    await stack.services.redis.hset(key, JSON.stringify(labels), JSON.stringify({ ...values, bitsPerSecond: 2e9 }), JSON.stringify(other), JSON.stringify(values));
    assert.deepEqual(await throughput(), ['A 2000000000', 'C 1000000000']);
    await stack.services.redis.hdel(key, JSON.stringify(labels));
    assert.deepEqual(await throughput(), ['C 1000000000']);
  } finally {
    await stack.close();
    await redis.stop();
  }
});

/** One GET of /metrics with exactly these request headers: status, headers and the body's bytes as sent. */
function scrape(port: number, headers: Record<string, string>): Promise<{ headers: Record<string, string | string[] | undefined>; body: Buffer }> {
  return new Promise((resolve, reject) => {
    get({ host: '127.0.0.1', port, path: '/metrics', headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    }).on('error', reject);
  });
}

/** The fleet's and the links' series (the process metrics before them change between two scrapes), sorted. */
const fleetSeries = (text: string) => text.slice(text.indexOf('# HELP niclab_runs_total')).split('\n').sort();

test('gzip when the scraper accepts it (as Prometheus does): the same text, before and after links change; plain otherwise', async () => {
  const redis = await startTestRedis();
  const stack = await startStack(testConfig(redis.url));
  const server = stack.app.listen(0, '127.0.0.1');
  try {
    await new Promise((r) => server.once('listening', r));
    const { port } = server.address() as AddressInfo;
    const key = stack.services.keys.links;
    // Enough links of each kind that the text is not one small piece.
    const set = (n: number, bitsPerSecond: number) => stack.services.redis.hset(key, JSON.stringify({ ...labels, src_agent: `A${n}`, test: n % 3 ? 'stream' : 'rr' }), JSON.stringify({ ...values, bitsPerSecond, rttSeconds: n % 3 ? null : values.rttSeconds }));
    for (let n = 0; n < 300; n++) await set(n, 1e9 + n);
    const both = async () => {
      const plain = await scrape(port, {});
      const gzipped = await scrape(port, { 'Accept-Encoding': 'gzip' });
      return { plain, gzipped };
    };
    for (const change of [async () => undefined, () => set(7, 5), () => set(1000, 6), () => stack.services.redis.hdel(key, JSON.stringify({ ...labels, src_agent: 'A8', test: 'stream' }))]) {
      await change();
      const { plain, gzipped } = await both();
      assert.equal(plain.headers['content-encoding'], undefined, 'no Accept-Encoding: plain text');
      assert.match(String(plain.headers['content-type']), /^text\/plain/);
      assert.match(plain.body.toString(), /^niclab_link_throughput_bits_per_second\{src_agent="A299"/m);
      assert.equal(gzipped.headers['content-encoding'], 'gzip');
      assert.match(String(gzipped.headers.vary), /Accept-Encoding/i);
      assert.ok(gzipped.body.length * 5 < plain.body.length, `compressed: ${gzipped.body.length} of ${plain.body.length} bytes`);
      assert.deepEqual(fleetSeries(gunzipSync(gzipped.body).toString()), fleetSeries(plain.body.toString()), 'the gzip decodes to the same series');
    }
    const text = (await scrape(port, {})).body.toString();
    assert.match(text, /src_agent="A7".* 5$/m, 'a changed value shows');
    assert.match(text, /src_agent="A1000".* 6$/m, 'a new link shows');
    assert.doesNotMatch(text, /src_agent="A8"/, 'a link gone is gone');
    // q=0 refuses gzip; `*` accepts it.
    assert.equal((await scrape(port, { 'Accept-Encoding': 'gzip;q=0, identity' })).headers['content-encoding'], undefined);
    assert.equal((await scrape(port, { 'Accept-Encoding': 'br;q=1.0, *;q=0.1' })).headers['content-encoding'], 'gzip');
  } finally {
    server.close();
    await stack.close();
    await redis.stop();
  }
});

test('crc32Combine: the CRC-32 of two parts together, from theirs, as zlib computes it over the whole', () => {
  const whole = Buffer.from(Array.from({ length: 70_000 }, (_, i) => (i * 7919) % 251));
  for (const cut of [0, 1, 3, 4096, 65_537, 69_999, 70_000]) {
    const [a, b] = [whole.subarray(0, cut), whole.subarray(cut)];
    assert.equal(crc32Combine(crc32(a), crc32(b), b.length), crc32(whole), `cut at ${cut}`);
  }
});

/**
 * Drives a search job's strategy to its end against a path (lost datagrams at an offered rate),
 * storing each run as the coordinator does, and returns the /metrics lines of its search series
 * before and after the job succeeds.
 */
async function searchSeries(search: object, lostAt: (offered: number, direction: string | undefined) => number, extra: object = {}): Promise<{ before: boolean; lines: string[] }> {
  const redis = await startTestRedis();
  const stack = await startStack(testConfig(redis.url));
  try {
    const { store } = stack.services;
    const A = { agent: 'A', interface: 'eth1' };
    const B = { agent: 'B', interface: 'eth2' };
    const spec = {
      engine: 'builtin', test: 'stream', protocol: 'udp', duration: 1, interval: 1, direction: 'forward', repeat: 1, retries: 0, flows: [{ from: A, to: B }],
      udp: { packetSize: 1000, rate: { packetsPerSecond: 1000 } }, search, ...extra,
    } as never;
    const job = await store.create('00000000-0000-4000-8000-00000000005e', spec, 10);
    await store.transition(job.id, ['queued'], 'running', { startedAt: new Date().toISOString() });
    const { strategyFor } = await import('@niclab/shared/domain/campaigns/index');
    const strategy = strategyFor(job.spec);
    const finished = new Map();
    for (let plan = strategy.next(finished); plan; plan = strategy.next(finished)) {
      const offered = (plan.point.rate as { packetsPerSecond: number }).packetsPerSecond;
      const duration = plan.duration ?? 1;
      const sent = offered * duration;
      const lost = Math.round(lostAt(offered, plan.point.direction) * duration);
      const udp = { sent, received: sent - lost, lost, lossRatio: lost / sent, outOfOrder: 0, duplicates: 0, jitterSeconds: 0, achievedPacketsPerSecond: offered };
      const run = { id: `00000000-0000-4000-9000-${String(plan.index).padStart(12, '0')}`, jobId: job.id, index: plan.index, point: plan.point, repetition: plan.repetition, ...(plan.duration ? { duration } : {}), status: 'succeeded', startedAt: null, finishedAt: new Date().toISOString(), error: null, flows: [{ udp, flowIndex: 0, direction: plan.point.direction ?? 'forward', from: A, to: B, bitsPerSecond: null }] } as never;
      await store.saveRun(run);
      finished.set(plan.index, run);
    }
    const before = await stack.services.metrics.render().then((t) => t.includes('niclab_search_rate_packets_per_second{'));
    await store.transition(job.id, ['running'], 'succeeded', { finishedAt: new Date().toISOString() });
    return { before, lines: (await stack.services.metrics.render()).split('\n').filter((l) => /^niclab_search_(rate|conditional_throughput)_/.test(l)) };
  } finally {
    await stack.close();
    await redis.stop();
  }
}

test('a rate search that succeeded is each link\'s latest search result per size: both directions of a swept pair, the rate found and its wire rate', async () => {
  // Forward carries 4,000 (max passes at once); reverse loses above 3,000.
  const { before, lines } = await searchSeries(
    { target: 'ndr', min: { packetsPerSecond: 1000 }, max: { packetsPerSecond: 4000 }, resolutionPercent: 1, confirmations: 0, maxTrials: 40 },
    (offered, direction) => (direction === 'reverse' ? Math.max(0, offered - 3000) : 0),
    { sweep: { direction: ['forward', 'reverse'] } },
  );
  assert.equal(before, false, 'nothing before the job ends');
  const labels = (src: string, dst: string) => `{src_agent="${src}",src_interface="${src === 'A' ? 'eth1' : 'eth2'}",dst_agent="${dst}",dst_interface="${dst === 'A' ? 'eth1' : 'eth2'}",engine="builtin",algorithm="binary",target="ndr",loss_ratio="0",exceed_ratio="",packet_size="1000",schedule=""}`;
  const value = (name: string, src: string) => lines.find((l) => l.startsWith(`niclab_search_rate_${name}${labels(src, src === 'A' ? 'B' : 'A')}`))?.split(' ').at(-1);
  assert.deepEqual(lines.sort(), [
    `niclab_search_rate_packets_per_second${labels('A', 'B')} 4000`,
    `niclab_search_rate_packets_per_second${labels('B', 'A')} ${value('packets_per_second', 'B')}`,
    `niclab_search_rate_wire_bits_per_second${labels('A', 'B')} ${4000 * 1066 * 8}`,
    `niclab_search_rate_wire_bits_per_second${labels('B', 'A')} ${value('wire_bits_per_second', 'B')}`,
  ].sort());
  const reverse = Number(value('packets_per_second', 'B'));
  assert.ok(reverse <= 3000 && reverse >= 2970, `reverse found ${reverse}`);
});

test('an MLRsearch that succeeded leaves series per goal: each goal\'s relevant lower bound and its conditional throughput, labelled by its loss ratio', async () => {
  // Loses everything above 3,000 datagrams/s: the NDR is at most 3,000, the PDR 0.5% at most 3,000 / 0.995.
  const { before, lines } = await searchSeries({ algorithm: 'mlrsearch', min: { packetsPerSecond: 1000 }, max: { packetsPerSecond: 4000 }, goals: [{ lossRatio: 0, durationSum: 1 }, { lossRatio: 0.005, durationSum: 1 }] }, (offered) => Math.max(0, offered - 3000));
  assert.equal(before, false, 'nothing before the job ends');
  const rate = (loss: string, target: string, exceed = '0.5') => Number(lines.find((l) => l.startsWith(`niclab_search_rate_packets_per_second{src_agent="A",src_interface="eth1",dst_agent="B",dst_interface="eth2",engine="builtin",algorithm="mlrsearch",target="${target}",loss_ratio="${loss}",exceed_ratio="${exceed}",packet_size="1000",schedule=""} `))?.split(' ').at(-1));
  const ndr = rate('0', 'ndr');
  const pdr = rate('0.005', 'pdr');
  assert.ok(ndr <= 3000 && ndr >= 3000 * 0.99, `NDR ${ndr}`);
  assert.ok(pdr <= 3000 / 0.995 && pdr >= 3000 / 0.995 * 0.99 && pdr > ndr, `PDR ${pdr}`);
  // The conditional throughput: the NDR's lower bound lost nothing; above 3,000 the path loses
  // all the excess, so whatever the PDR's lower bound, what it forwarded is 3,000.
  const conditional = (loss: string, target: string, exceed = '0.5') => Number(lines.find((l) => l.startsWith(`niclab_search_conditional_throughput_packets_per_second{src_agent="A",src_interface="eth1",dst_agent="B",dst_interface="eth2",engine="builtin",algorithm="mlrsearch",target="${target}",loss_ratio="${loss}",exceed_ratio="${exceed}",packet_size="1000",schedule=""} `))?.split(' ').at(-1));
  assert.equal(conditional('0', 'ndr'), ndr);
  assert.ok(Math.abs(conditional('0.005', 'pdr') - 3000) <= 1, `PDR conditional ${conditional('0.005', 'pdr')}`);
  assert.equal(lines.length, 6, lines.join('\n'));
});

test('two MLRsearch goals of one loss ratio are two series, told apart by their exceed ratios (one overwrote the other)', async () => {
  const { lines } = await searchSeries({ algorithm: 'mlrsearch', min: { packetsPerSecond: 1000 }, max: { packetsPerSecond: 4000 }, goals: [{ lossRatio: 0.005, durationSum: 1 }, { lossRatio: 0.005, exceedRatio: 0, durationSum: 1 }] }, (offered) => Math.max(0, offered - 3000));
  const rates = lines.filter((l) => l.startsWith('niclab_search_rate_packets_per_second{'));
  assert.deepEqual(rates.map((l) => /exceed_ratio="([^"]*)"/.exec(l)?.[1]).sort(), ['0', '0.5'], rates.join('\n'));
});
