import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { test } from 'node:test';
import { renderLinks } from '@niclab/api/exposition';
import type { LinkLabels, LinkValues } from '@niclab/shared/stores/metric-store';
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
