import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { after, before, test } from 'node:test';
import { ENGINES } from '@niclab/agent/engines/registry';
import type { EngineParams } from '@niclab/shared/domain/task';
import { enginePair, measuredProbe, measuredReflector } from '../helpers/engines.js';
import { irttDuring, quantile, startIrttServer, type RttSample } from '../helpers/irtt.js';
import { withoutKoffi } from '../helpers/no-koffi.js';
import { pingUntil } from '../helpers/ping.js';
import { freePort } from '../helpers/redis.js';

const engine = ENGINES.builtin!;
const probe = (duration: number): EngineParams => ({
  protocol: 'udp', test: 'probe', duration, bufferLength: 64, streams: 1, noDelay: false, interval: duration, probe: { interval: 10, packetSize: 64 },
});
const lo = { address: '127.0.0.1', port: 0 };
let server: ChildProcess | undefined;

before(async () => {
  lo.port = await freePort();
  server = await startIrttServer(lo);
});
after(() => {
  server?.kill();
});

/*
 * The probe's round trip on an idle loopback against two references measured at the same time,
 * each cut to the probe's own slots. ping (iputils) stamps each reply with the kernel's receive
 * time and the kernel answers it, so its round trip has neither end's wake-up in it, as the
 * probe's kernel-stamped one has not: their medians agree within 0.05 ms (measured: the probe
 * 19-27 us over ping at load 15-19, its reflector's send path and UDP's). irtt stamps in its
 * processes (its README: "somewhat higher ... than ping, due to task scheduling"): it reads
 * 0.13-0.22 ms over the probe here, so it bounds the probe from above only: within 0.05 ms of
 * irtt or below. Before the kernel's timestamps the probe's two event-loop wake-ups put it
 * 0.15-0.36 ms over irtt on this host.
 */
test("the probe's idle round trip on loopback: its median within 0.05 ms of ping's, and no more than 0.05 ms over irtt's", async (ctx) => {
  const pair = enginePair(engine, probe(3), { startInMs: 1500 });
  const [[, irtt], ping] = await Promise.all([irttDuring(lo, lo, () => pair), pingUntil({}, lo.address, pair)]);
  const [sender, receiver] = await pair;
  assert.equal(sender.error, null, JSON.stringify(sender.error));
  assert.equal(receiver.error, null, JSON.stringify(receiver.error));
  const figures = measuredProbe(sender)!;
  const from = Date.parse(figures.schedule.startedAt);
  const to = from + figures.schedule.slots * 10;
  const within = (samples: RttSample[]) => samples.filter((s) => s.at >= from && s.at < to).map((s) => s.rttMs);
  const [irttRtts, pingRtts] = [within(irtt), within(ping)];
  const [probeP50, pingP50, irttP50] = [figures.loaded.rttSeconds.p50 * 1e3, quantile(pingRtts, 0.5), quantile(irttRtts, 0.5)];
  ctx.diagnostic(`idle p50: probe ${probeP50.toFixed(3)} ms (${figures.loaded.received} round trips), ping ${pingP50.toFixed(3)} ms (${pingRtts.length}), irtt ${irttP50.toFixed(3)} ms (${irttRtts.length}); min: probe ${(figures.loaded.rttSeconds.min * 1e3).toFixed(3)}, ping ${quantile(pingRtts, 0).toFixed(3)}, irtt ${quantile(irttRtts, 0).toFixed(3)} ms`);
  assert.deepEqual(figures.arrivalTimes, { sender: 'kernel', reflector: null }, "the sender's own; the coordinator adds the reflector's");
  assert.equal(figures.sendTimes, 'kernel');
  assert.equal(measuredReflector(receiver)!.arrivalTimes, 'kernel');
  assert.ok(pingRtts.length >= 100 && irttRtts.length >= 100, `references in the probe's window: ping ${pingRtts.length}, irtt ${irttRtts.length}`);
  assert.ok(Math.abs(probeP50 - pingP50) <= 0.05, `idle p50 probe ${probeP50} ms, ping ${pingP50} ms`);
  assert.ok(probeP50 <= irttP50 + 0.05, `idle p50 probe ${probeP50} ms, irtt ${irttP50} ms`);
});

test("the probe where koffi cannot load: Node's dgram at both ends, every round trip, and it says its arrival times are the process's", async () => {
  const [sender, receiver] = await enginePair(engine, probe(2), { spawnWith: withoutKoffi, startInMs: 1500 });
  assert.equal(sender.error, null, JSON.stringify(sender.error));
  assert.equal(receiver.error, null, JSON.stringify(receiver.error));
  const figures = measuredProbe(sender)!;
  assert.deepEqual(figures.arrivalTimes, { sender: 'process', reflector: null });
  assert.equal(figures.sendTimes, 'process');
  assert.equal(measuredReflector(receiver)!.arrivalTimes, 'process');
  assert.ok(figures.loaded.received >= figures.loaded.sent - 1 && figures.loaded.sent > 0, `${figures.loaded.received} of ${figures.loaded.sent} came back`);
  assert.ok(figures.loaded.rttSeconds.p50 > 0 && figures.loaded.rttSeconds.p50 < 0.01, `p50 ${figures.loaded.rttSeconds.p50} s`);
});
