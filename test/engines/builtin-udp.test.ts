import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { epochMicros } from '@niclab/agent/engines/builtin/realtime-origin';
import { DATA, FIN, MAGIC } from '@niclab/agent/engines/builtin/udp-format';
import type { EngineOutcome } from '@niclab/agent/engines/engine';
import { ENGINES } from '@niclab/agent/engines/registry';
import { canRun } from '@niclab/shared/domain/engine-rules';
import type { EngineParams } from '@niclab/shared/domain/task';
import { bareIperf3Udp, builtinUdp, type UdpLoad, type UdpRun } from '../helpers/udp-loopback.js';
import { withoutKoffi } from '../helpers/no-koffi.js';

const median = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)]!;

const engine = ENGINES.builtin!;
const udp = (pps: number, extra: Partial<EngineParams> = {}): EngineParams => ({
  protocol: 'udp', test: 'stream', duration: 2, bufferLength: 1200, streams: 1, noDelay: false, interval: 0.5,
  udp: { packetSize: 1200, rate: { packetsPerSecond: pps } }, ...extra,
});

/** A receiver on loopback: its outcome, its port once it listens, its process id. */
function receiverOf(params: EngineParams, runId: string): { outcome: Promise<EngineOutcome>; port: Promise<number>; pid: Promise<number> } {
  const ids = { jobId: 'udp-test', runId, leg: 0 };
  const deadline = Date.now() + (params.duration + 10) * 1000;
  let ready!: (port: number) => void;
  let spawned!: (pid: number) => void;
  const port = new Promise<number>((resolve) => (ready = resolve));
  const pid = new Promise<number>((resolve) => (spawned = resolve));
  const outcome = engine.run({ ...ids, role: 'receiver', engine: 'builtin', params, interface: 'lo', deadline }, { signal: new AbortController().signal, address: '127.0.0.1', ready, spawned });
  return { outcome, port, pid };
}

/** A sender on loopback to `port`, starting in 100 ms. */
function senderOf(params: EngineParams, runId: string, port: number): Promise<EngineOutcome> {
  const ids = { jobId: 'udp-test', runId, leg: 0 };
  const deadline = Date.now() + (params.duration + 10) * 1000;
  return engine.run({ ...ids, role: 'sender', engine: 'builtin', params, interface: 'lo', deadline, peer: { address: '127.0.0.1', port }, startAt: Date.now() + 100 }, { signal: new AbortController().signal, address: '127.0.0.1', ready: () => undefined });
}

async function pair(params: EngineParams, runId: string, beforeSend?: (port: number) => Promise<void>): Promise<[EngineOutcome, EngineOutcome]> {
  const { outcome: receiver, port } = receiverOf(params, runId);
  const peerPort = await port;
  await beforeSend?.(peerPort);
  return Promise.all([senderOf(params, runId, peerPort), receiver]);
}

/** This host's UDP receive-buffer drops (/proc/net/snmp). */
async function rcvbufErrors(): Promise<number> {
  const lines = (await readFile('/proc/net/snmp', 'utf8')).split('\n').filter((l) => l.startsWith('Udp:'));
  return Number(lines[1]!.split(/\s+/)[lines[0]!.split(/\s+/).indexOf('RcvbufErrors')]);
}

test('builtin UDP: paced at the requested rate, every datagram counted at both ends', async () => {
  const dropsBefore = await rcvbufErrors();
  const [sender, receiver] = await pair(udp(5000), 'udp-rate');
  const dropped = (await rcvbufErrors()) - dropsBefore;
  assert.equal(sender.error, null, JSON.stringify(sender.error));
  assert.equal(receiver.error, null, JSON.stringify(receiver.error));
  assert.equal(sender.udp!.sent, 10_000, '5000 pps for 2 s');
  assert.ok(Math.abs(sender.udp!.achievedPacketsPerSecond! - 5000) / 5000 < 0.01, `achieved ${sender.udp!.achievedPacketsPerSecond} pps`);
  // Every datagram is either counted by the receiver or was dropped in its socket (this host's
  // UdpRcvbufErrors); whether the receiver keeps up is compared with bare iperf3 -u's below.
  assert.ok(receiver.udp!.received! <= sender.udp!.sent!, `received ${receiver.udp!.received} of ${sender.udp!.sent}`);
  assert.ok(receiver.udp!.received! + dropped >= 9900, `received ${receiver.udp!.received}, dropped in the socket ${dropped}: ${10_000 - receiver.udp!.received! - dropped} unaccounted for`);
  assert.equal(receiver.udp!.duplicates, 0);
  assert.ok(receiver.udp!.jitterSeconds! >= 0 && receiver.udp!.jitterSeconds! < 0.01);
  assert.equal(sender.figures!.calls, 10_000, 'a call is a datagram');
  assert.equal(sender.figures!.bytes, 10_000 * 1200);
  assert.equal(receiver.figures!.bytes, receiver.udp!.received! * 1200);
  assert.ok(receiver.intervals.length >= 3);
  assert.ok(sender.figures!.cpuSeconds > 0 && receiver.figures!.cpuSeconds > 0);
});

/** Rounds of the builtin engine and bare iperf3 -u alternating on loopback at one load. */
async function alternate(load: UdpLoad, rounds: number) {
  const runs: { builtin: UdpRun; iperf3: UdpRun }[] = [];
  for (let i = 0; i < rounds; i++) runs.push({ builtin: await builtinUdp(load, `udp-vs-bare-${i}`), iperf3: await bareIperf3Udp(load) });
  const show = (r: UdpRun) => `sent ${r.sent}, lost ${r.sent - r.received} (${(r.lossRatio * 100).toFixed(2)}%), sender CPU ${r.senderCpuSeconds.toFixed(2)} s`;
  return { runs, figures: runs.map((r, i) => `round ${i + 1}: builtin ${show(r.builtin)} | bare iperf3 -u ${show(r.iperf3)}`).join('\n') };
}

test('builtin UDP at 50,000 pps x 1200 B on loopback loses no more than bare iperf3 -u at the same rate (alternating): its receiver keeps up', async (ctx) => {
  // Issue 16 measured the builtin losing 7.6-9.3% here in its own receiver's socket, bare
  // iperf3 -u 0.07-0.09%. Both are asked for the same 4 MiB receive buffer (iperf3 -w).
  const { runs, figures } = await alternate({ packetsPerSecond: 50_000, packetSize: 1200, seconds: 2, socketBuffer: 4194304 }, 3);
  ctx.diagnostic(figures);
  // Per pair (the two ran a moment apart, under the same load), then the median of the pairs.
  // 1 percentage point: on this shared 2-core machine either tool's receiver is starved for
  // tens of ms now and then (bare iperf3 -u has lost 1-5% here at load average 13); the old
  // receiver lost 5-47% beside bare iperf3's 0-5%.
  const excess = median(runs.map((r) => r.builtin.lossRatio - r.iperf3.lossRatio));
  assert.ok(excess <= 0.01, `builtin loss - bare iperf3 -u loss, median of ${runs.length} pairs: ${(excess * 100).toFixed(3)} percentage points\n${figures}`);
  for (const { builtin: b } of runs) assert.ok(b.receiveBufferBytes! >= 4194304, `the receiver's socket got ${b.receiveBufferBytes} bytes of buffer`);
});

test('builtin UDP at 10,000 pps x 1200 B on loopback: its sender uses at most twice the CPU of bare iperf3 -u\'s at the same rate (alternating), and sends as many as it on time; its own CPU figure is what /proc counted', async (ctx) => {
  const { runs, figures } = await alternate({ packetsPerSecond: 10_000, packetSize: 1200, seconds: 2, socketBuffer: 4194304 }, 3);
  ctx.diagnostic(figures);
  // Sender CPU from /proc/PID/stat while it sent. Issue 16's sender spun between datagrams: a
  // whole core (2 s in a 2 s run) where iperf3 -u took 0.1-0.4 s. Twice bare's, per pair then
  // median, leaves room for ticks of 10 ms and a loaded machine; bench/udp-engine.ts measures the goal of 1.5x.
  const ratio = median(runs.map((r) => r.builtin.senderCpuSeconds / Math.max(0.02, r.iperf3.senderCpuSeconds)));
  assert.ok(ratio <= 2, `builtin sender CPU / bare iperf3 -u's: median ${ratio.toFixed(2)}\n${figures}`);
  // On time: a sender that was off the CPU passes over what it missed rather than burst, so a
  // loaded host sends fewer; it sends as many as bare iperf3 -u beside it (1%).
  const sent = median(runs.map((r) => r.builtin.sent));
  assert.ok(sent >= median(runs.map((r) => r.iperf3.sent)) * 0.99, `datagrams sent (median): builtin ${sent}\n${figures}`);
  // The engine's own CPU figure (process.cpuUsage) against the kernel's /proc/PID/stat read by the
  // test: within 10 ms ticks and the turns after the last datagram (its FINs).
  for (const { builtin: b } of runs) assert.ok(Math.abs(b.senderSelfCpuSeconds - b.senderCpuSeconds) <= 0.05 + 0.15 * b.senderCpuSeconds, `the sender says it used ${b.senderSelfCpuSeconds.toFixed(3)} s of CPU; /proc says ${b.senderCpuSeconds.toFixed(3)} s`);
});

test('builtin UDP: datagrams of another leg (right magic, real sequence numbers, even its FIN) are ignored', async () => {
  const runId = 'udp-stray';
  const sent = 1000;
  // Another leg of the same run, as a leftover or a neighbour would send them: only the token differs.
  const otherLeg = createHash('sha256').update(`${runId}/1`).digest().readUInt32BE(0);
  const datagram = (kind: number, seq: number) => {
    const packet = Buffer.alloc(1200);
    packet.writeUInt32BE(MAGIC, 0);
    packet.writeUInt32BE(otherLeg, 4);
    packet.writeUInt32BE(kind, 8);
    packet.writeDoubleBE(seq, 12);
    packet.writeDoubleBE(Date.now() * 1000, 20);
    return packet;
  };
  const [sender, receiver] = await pair(udp(sent, { duration: 1 }), runId, async (port) => {
    const stray = createSocket('udp4');
    const send = (packet: Buffer) => new Promise<void>((resolve, reject) => stray.send(packet, port, '127.0.0.1', (error) => (error ? reject(error) : resolve())));
    for (let seq = 0; seq < 100; seq++) await send(datagram(DATA, seq));
    await send(datagram(FIN, 0));
    stray.close();
  });
  assert.equal(sender.error, null, JSON.stringify(sender.error));
  assert.equal(receiver.error, null, JSON.stringify(receiver.error));
  assert.equal(sender.udp!.sent, sent);
  const received = receiver.udp!.received!;
  // On loopback at 1000 pps nothing of this leg is lost (the rate test asks 99% of 10,000).
  assert.ok(received >= 990 && received <= sent, `received ${received} of ${sent}: the other leg's FIN ended the leg, or its datagrams were counted`);
  assert.equal(receiver.udp!.duplicates, 0, 'the other leg\'s sequence numbers were taken for this leg\'s');
});

/** A datagram of the builtin's format (udp-format.ts), written here byte by byte: stream and kind are u16s at 8 and 10. */
function datagram(token: number, d: { stream?: number; kind?: number; seq: number; sentMicros?: number }, size = 100): Buffer {
  const packet = Buffer.alloc(size);
  packet.writeUInt32BE(MAGIC, 0);
  packet.writeUInt32BE(token, 4);
  packet.writeUInt16BE(d.stream ?? 0, 8);
  packet.writeUInt16BE(d.kind ?? DATA, 10);
  packet.writeDoubleBE(d.seq, 12);
  packet.writeDoubleBE(d.sentMicros ?? Date.now() * 1000, 20);
  return packet;
}

/**
 * The builtin receiver against a sender played by this test: a real UDP socket sends `script`
 * in order, then the receiver's outcome comes with the ms from the first FIN sent to its end.
 */
async function scripted(params: EngineParams, runId: string, script: { stream?: number; kind?: number; seq: number }[]) {
  const token = createHash('sha256').update(`${runId}/0`).digest().readUInt32BE(0);
  let ready!: (port: number) => void;
  const port = new Promise<number>((resolve) => (ready = resolve));
  const receiving = engine.run({ jobId: 'udp-test', runId, leg: 0, role: 'receiver', engine: 'builtin', params, interface: 'lo', deadline: Date.now() + (params.duration + 10) * 1000 }, { signal: new AbortController().signal, address: '127.0.0.1', ready });
  const to = await port;
  const socket = createSocket('udp4');
  let finSentAt = 0;
  try {
    for (const d of script) {
      if (d.kind === FIN && !finSentAt) finSentAt = Date.now();
      await new Promise<void>((resolve, reject) => socket.send(datagram(token, d), to, '127.0.0.1', (error) => (error ? reject(error) : resolve())));
    }
  } finally {
    socket.close();
  }
  const outcome = await receiving;
  return { outcome, afterFinMs: Date.now() - finSentAt };
}

const seqs = (from: number, to: number, stream = 0) => Array.from({ length: to - from }, (_, i) => ({ stream, seq: from + i }));

test('builtin UDP receiver: datagrams reordered behind the FIN are counted; the wait after it is bounded', async (ctx) => {
  // 100 sent; 95..99 overtaken by the FIN, as on a path that reorders. duration 5: the
  // receiver's own give-up would come 7 s after the first datagram.
  const late = await scripted(udp(1000, { duration: 5 }), 'udp-fin-late', [...seqs(0, 95), { kind: FIN, seq: 100 }, ...seqs(95, 100)]);
  assert.equal(late.outcome.error, null, JSON.stringify(late.outcome.error));
  assert.deepEqual([late.outcome.udp!.received, late.outcome.udp!.outOfOrder, late.outcome.udp!.duplicates], [100, 0, 0], 'the five behind the FIN counted, in order');
  // Five never come: the receiver waits its grace (50 ms) after the FIN, not until its give-up
  // 7 s after the first datagram (2 s: a loaded machine's slack for the result's way back).
  const lost = await scripted(udp(1000, { duration: 5 }), 'udp-fin-lost', [...seqs(0, 95), { kind: FIN, seq: 100 }]);
  ctx.diagnostic(`ended ${late.afterFinMs} ms after the FIN with all 100, ${lost.afterFinMs} ms with 95`);
  assert.equal(lost.outcome.udp!.received, 95);
  assert.ok(late.afterFinMs < 2000 && lost.afterFinMs < 2000, `ended ${late.afterFinMs} and ${lost.afterFinMs} ms after the FIN`);
});

test('builtin UDP receiver: each stream numbers its own datagrams; duplicates and reordering count within a stream', async () => {
  const { outcome } = await scripted(udp(1000, { duration: 5, streams: 2 }), 'udp-streams-rx', [
    ...seqs(0, 50, 0), ...seqs(0, 10, 1), { stream: 1, seq: 11 }, { stream: 1, seq: 10 }, { stream: 1, seq: 3 }, ...seqs(12, 50, 1),
    // A stream the leg does not have: not of this leg.
    { stream: 2, seq: 0 },
    { stream: 0, kind: FIN, seq: 50 }, { stream: 1, kind: FIN, seq: 50 },
  ]);
  assert.equal(outcome.error, null, JSON.stringify(outcome.error));
  const { received, duplicates, outOfOrder } = outcome.udp!;
  assert.deepEqual({ received, duplicates, outOfOrder }, { received: 100, duplicates: 1, outOfOrder: 1 }, 'stream 1\'s numbers are not stream 0\'s duplicates');
});

test('builtin UDP sender with streams: 4: four sockets (source ports), each at a quarter of the flow\'s rate, numbered from 0', async () => {
  // This test's own socket is the receiver: it counts what each source port carried.
  const sink = createSocket('udp4');
  await new Promise<void>((resolve) => sink.bind(0, '127.0.0.1', resolve));
  const byPort = new Map<number, { streams: Set<number>; seqs: number[]; fins: number[] }>();
  sink.on('message', (message, from) => {
    const port = byPort.get(from.port) ?? { streams: new Set(), seqs: [], fins: [] };
    byPort.set(from.port, port);
    port.streams.add(message.readUInt16BE(8));
    (message.readUInt16BE(10) === FIN ? port.fins : port.seqs).push(message.readDoubleBE(12));
  });
  const params = udp(1000, { duration: 1, streams: 4, udp: { packetSize: 200, rate: { packetsPerSecond: 1000 } } });
  const sender = await engine.run({ jobId: 'udp-test', runId: 'udp-streams-tx', leg: 0, role: 'sender', engine: 'builtin', params, interface: 'lo', deadline: Date.now() + 10_000, peer: { address: '127.0.0.1', port: sink.address().port }, startAt: Date.now() + 100 }, { signal: new AbortController().signal, address: '127.0.0.1', ready: () => undefined });
  await new Promise((r) => setTimeout(r, 50)); // the last FINs' way through loopback
  sink.close();
  assert.equal(sender.error, null, JSON.stringify(sender.error));
  assert.equal(sender.udp!.sent, 1000, 'the flow\'s rate in all, not per stream');
  assert.equal(sender.udp!.achievedPacketsPerSecond, 1000);
  const ports = [...byPort.values()];
  assert.equal(ports.length, 4, `source ports: ${[...byPort.keys()].join(', ')}`);
  assert.deepEqual(ports.map((p) => [...p.streams]).flat().sort(), [0, 1, 2, 3], 'one stream per port');
  for (const p of ports) {
    assert.deepEqual(p.seqs, Array.from({ length: 250 }, (_, i) => i), 'each stream numbers its 250 from 0, in order');
    assert.ok(p.fins.length > 0 && p.fins.every((n) => n === 250), `its FINs say 250: ${p.fins.join(', ')}`);
  }
});

const legToken = (runId: string) => createHash('sha256').update(`${runId}/0`).digest().readUInt32BE(0);

/*
 * RFC 3550's jitter on synthetic input, with the receiver kept off the CPU: every odd datagram
 * says it was sent X = 1 ms earlier than it was, so each transit differs from the last by X (and
 * loopback's few µs): J = X (1 - (15/16)^n), X within 0.2% after 100 datagrams. Its process is
 * stopped (SIGSTOP) for the second half and the FIN, so it reads those 200 in a few recvmmsg
 * batches once it runs again. With each datagram's kernel timestamp it still reads X, and the
 * one-way delays stay at loopback's plus X; when a batch's datagrams all took the time it was
 * read (the old receiver) J came out near the 2 ms spacing (|D| alternates 1 and 3 ms) and the
 * delays ran up to the 0.4 s of the stop. The bound is X +- 25%: a send from this test's process
 * can be late by a wake-up (tens of µs here, a millisecond now and then at load 15).
 */
test("builtin UDP: jitter and one-way delay from each datagram's own arrival, even when the receiver reads them late in batches (RFC 3550 closed form)", async (ctx) => {
  const runId = 'udp-jitter-closed-form';
  const X = 1000;
  const params = udp(500, { duration: 1, udp: { packetSize: 200, rate: { packetsPerSecond: 500 } } });
  const receiving = receiverOf(params, runId);
  const [port, pid] = await Promise.all([receiving.port, receiving.pid]);
  const token = legToken(runId);
  const socket = createSocket('udp4');
  const send = (packet: Buffer) => new Promise<void>((resolve, reject) => socket.send(packet, port, '127.0.0.1', (error) => (error ? reject(error) : resolve())));
  // The receiver's clock (CLOCK_REALTIME), not this process's performance.timeOrigin, which runs up to 1 ms off it.
  const now = epochMicros;
  try {
    for (let seq = 0; seq < 400; seq++) {
      if (seq === 200) process.kill(pid, 'SIGSTOP');
      await send(datagram(token, { seq, sentMicros: now() - (seq % 2 ? X : 0) }, 200));
      await new Promise((r) => setTimeout(r, 2));
    }
    await send(datagram(token, { kind: FIN, seq: 400, sentMicros: now() }, 200));
  } finally {
    process.kill(pid, 'SIGCONT');
    socket.close();
  }
  const receiver = await receiving.outcome;
  assert.equal(receiver.error, null, JSON.stringify(receiver.error));
  const { jitterSeconds, oneWayDelaySeconds, arrivalTimes, received } = receiver.udp!;
  ctx.diagnostic(`received ${received}; jitter ${(jitterSeconds! * 1e6).toFixed(1)} us (closed form ${X} us); one-way delay p50 ${(oneWayDelaySeconds!.p50 * 1e6).toFixed(1)} us, p99 ${(oneWayDelaySeconds!.p99 * 1e6).toFixed(1)} us, max ${(oneWayDelaySeconds!.max * 1e3).toFixed(3)} ms; arrival times: ${arrivalTimes}`);
  assert.equal(received, 400);
  assert.equal(arrivalTimes, 'kernel');
  assert.ok(Math.abs(jitterSeconds! * 1e6 - X) <= 0.25 * X, `jitter ${jitterSeconds! * 1e6} us, closed form ${X} us`);
  // Half the delays are loopback's (µs), half that plus X: the 99th is X and a little, not the stop's 0.4 s.
  assert.ok(oneWayDelaySeconds!.p99 < (X + 4000) / 1e6, `one-way delay p99 ${oneWayDelaySeconds!.p99} s`);
  assert.ok(oneWayDelaySeconds!.min >= 0, `one-way delay min ${oneWayDelaySeconds!.min} s: the two clocks are not one`);
});

test("builtin UDP where koffi cannot load: Node's dgram at both ends, every datagram counted, and the result says its arrival times are the process's", async () => {
  const params = udp(1000, { duration: 1 });
  const receiving = withoutKoffi(() => receiverOf(params, 'udp-no-koffi'));
  const port = await receiving.port;
  const [sender, receiver] = await Promise.all([withoutKoffi(() => senderOf(params, 'udp-no-koffi', port)), receiving.outcome]);
  assert.equal(sender.error, null, JSON.stringify(sender.error));
  assert.equal(receiver.error, null, JSON.stringify(receiver.error));
  assert.equal(sender.udp!.sent, 1000);
  assert.ok(receiver.udp!.received! >= 990, `received ${receiver.udp!.received}`);
  assert.equal(receiver.udp!.arrivalTimes, 'process');
  assert.ok(receiver.udp!.jitterSeconds! >= 0 && receiver.udp!.jitterSeconds! < 0.01);
  // Each end's clock is then Node's performance.timeOrigin, up to a millisecond off the wall clock (realtime-origin.ts).
  assert.ok(Math.abs(receiver.udp!.oneWayDelaySeconds!.p50) < 0.005, JSON.stringify(receiver.udp!.oneWayDelaySeconds));
});

test('builtin UDP: socketBuffer takes effect; the effective sizes are reported and grow with the request', async () => {
  const sizes = [8192, 65536, 262144, 1048576];
  const effective: number[] = [];
  for (const size of sizes) {
    const [sender, receiver] = await pair(udp(1000, { duration: 0.5, socketBuffer: size }), `udp-buf-${size}`);
    assert.ok(sender.socketBuffers && receiver.socketBuffers);
    // Linux doubles the request for its bookkeeping (and caps it at rmem_max/wmem_max).
    assert.ok(receiver.socketBuffers!.receiveBytes >= size, `asked ${size}, got ${receiver.socketBuffers!.receiveBytes}`);
    effective.push(receiver.socketBuffers!.receiveBytes);
  }
  assert.deepEqual(effective, [...effective].sort((a, b) => a - b), `monotonic: ${effective.join(', ')}`);
  assert.ok(effective[0]! < effective.at(-1)!);
});

test('builtin refuses rr over UDP and too-small UDP datagrams, with reasons; TCP socket buffers it can set', async () => {
  const base = { engine: 'builtin', test: 'stream', duration: 1, bufferLength: 1000, streams: 1, noDelay: false, direction: 'forward', interval: 1, repeat: 1, flows: [] } as const;
  assert.deepEqual(canRun({ ...base, protocol: 'tcp', socketBuffer: 65536 } as never, []), []);
  assert.match(canRun({ ...base, test: 'rr', protocol: 'udp' } as never, []).join(), /rr\) over TCP only/);
  assert.match(canRun({ ...base, protocol: 'udp', udp: { packetSize: 20, rate: { packetsPerSecond: 10 } } } as never, []).join(), /at least 28/);
  assert.deepEqual(canRun({ ...base, protocol: 'udp', udp: { packetSize: 1500, rate: { packetsPerSecond: 10 } }, socketBuffer: 65536 } as never, []), []);
  // This host can set TCP socket buffers (koffi loads libc), so its probe lists nothing unsupported.
  assert.deepEqual(await engine.capabilities(), { available: true, version: `niclab builtin (node ${process.version})` });
});
