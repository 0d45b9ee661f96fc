/**
 * A change from a baseline of 0, through the API: UDP runs on loopback by an in-process agent,
 * lossless at a low rate, then losing in a receive buffer of 1 KiB; GET /v1/compare judges the
 * loss `worse` with no % change (a change from 0 has none) and the difference counted by hand.
 */
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import request from 'supertest';
import type { Job, Run } from '@niclab/shared/domain/contract';
import { assertResponse } from '../helpers/contract.js';
import { stackPerFile, type Stack } from '../helpers/stack.js';

let stack: Stack;
// Generous setup and heartbeats: the machine is shared, and a loaded one starts receivers (and reads interfaces) slowly.
stackPerFile({ agents: ['zero'], coordinator: true, config: { setupSeconds: 10, heartbeatSeconds: 5 } }, (s) => (stack = s));

const lo = { agent: 'zero', interface: 'lo' };
const udp = (packetsPerSecond: number, extra: Record<string, unknown> = {}) => ({
  engine: 'builtin', protocol: 'udp', duration: 0.5, repeat: 3, flows: [{ from: lo, to: lo }], udp: { packetSize: 1400, rate: { packetsPerSecond } }, ...extra,
});

async function succeeded(spec: unknown): Promise<Job & { runs: Run[] }> {
  const posted = await request(stack.app).post('/v1/jobs').set('content-type', 'application/json').send(JSON.stringify(spec));
  assert.equal(posted.status, 202, JSON.stringify(posted.body));
  const deadline = Date.now() + 60_000;
  for (;;) {
    const job = (await request(stack.app).get(`/v1/jobs/${posted.body.id}`)).body as Job & { runs: Run[] };
    if (['succeeded', 'failed', 'canceled'].includes(job.status)) {
      assert.equal(job.status, 'succeeded', JSON.stringify(job.error));
      return job;
    }
    assert.ok(Date.now() < deadline, `job ${job.id} still ${job.status}`);
    await sleep(200);
  }
}

test('loss from 0 is worse through the API: changePercent null with its reason, the difference as counted from the runs', async (ctx) => {
  const lossless = await succeeded(udp(500));
  // 1 KiB of receive buffer holds one datagram: a burst of the sender's batch overflows it.
  const lossy = await succeeded(udp(20_000, { socketBuffer: 1024 }));
  const ratios = (job: Job & { runs: Run[] }) => job.runs.map((r) => r.flows[0]!.udp!.lost / r.flows[0]!.udp!.sent);
  assert.deepEqual(ratios(lossless), [0, 0, 0], 'the baseline lost nothing');
  assert.ok(ratios(lossy).every((x) => x > 0), `the candidate lost in every run: ${ratios(lossy)}`);
  const res = await request(stack.app).get(`/v1/compare?baseline=${lossless.id}&candidate=${lossy.id}&metric=udpLossRatio`);
  assert.equal(res.status, 200);
  assertResponse('compareJobs', res);
  const [p] = res.body.points;
  ctx.diagnostic(`${p.judged}; loss per run ${ratios(lossy).map((x) => x.toFixed(4)).join(', ')}; p ${p.pValue}`);
  const mean = ratios(lossy).reduce((a, b) => a + b, 0) / 3;
  assert.ok(Math.abs(p.difference - mean) < 1e-12, `difference ${p.difference} vs ${mean} counted from the runs`);
  assert.equal(p.changePercent, null);
  assert.match(p.changePercentReason, /baseline mean is 0/);
  assert.equal(p.verdict, p.adjustedPValue < 0.05 ? 'worse' : 'no significant change', JSON.stringify(p));
  assert.equal(p.verdict, 'worse', `${p.judged} (p ${p.pValue}; loss ${ratios(lossy)})`);
  assert.ok(p.differenceInterval[0] >= 0, 'loss cannot fall below 0');
  const table = await request(stack.app).get(`/v1/compare?baseline=${lossless.id}&candidate=${lossy.id}&metric=udpLossRatio&format=table`);
  assert.match(table.text, /^\s+all\s+:\s+0\.000\s+[\d.]+\s+Δ\+[\d.]+\s+Δ\[[\d.]+, [\d.]+\]\s+p=\S+\s+adj=\S+\s+worse$/m, table.text);
});
