import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { readFile } from 'node:fs/promises';
import { test } from 'node:test';
import { DATA, FIN, MAGIC } from '@niclab/agent/engines/builtin/udp-format';
import type { EngineOutcome } from '@niclab/agent/engines/engine';
import { ENGINES } from '@niclab/agent/engines/registry';
import { canRun } from '@niclab/shared/domain/engine-rules';
import type { EngineParams } from '@niclab/shared/domain/task';

const engine = ENGINES.builtin!;
const udp = (pps: number, extra: Partial<EngineParams> = {}): EngineParams => ({
  protocol: 'udp', test: 'stream', duration: 2, bufferLength: 1200, streams: 1, noDelay: false, interval: 0.5,
  udp: { packetSize: 1200, rate: { packetsPerSecond: pps } }, ...extra,
});

async function pair(params: EngineParams, runId: string, beforeSend?: (port: number) => Promise<void>): Promise<[EngineOutcome, EngineOutcome]> {
  const ids = { jobId: 'udp-test', runId, leg: 0 };
  const deadline = Date.now() + (params.duration + 10) * 1000;
  let ready!: (port: number) => void;
  const port = new Promise<number>((resolve) => (ready = resolve));
  const receiver = engine.run({ ...ids, role: 'receiver', engine: 'builtin', params, interface: 'lo', deadline }, { signal: new AbortController().signal, address: '127.0.0.1', ready });
  const peerPort = await port;
  await beforeSend?.(peerPort);
  const sender = engine.run({ ...ids, role: 'sender', engine: 'builtin', params, interface: 'lo', deadline, peer: { address: '127.0.0.1', port: peerPort }, startAt: Date.now() + 100 }, { signal: new AbortController().signal, address: '127.0.0.1', ready: () => undefined });
  return Promise.all([sender, receiver]);
}

/** This host's UDP receive-buffer drops (/proc/net/snmp). */
async function rcvbufErrors(): Promise<number> {
  const lines = (await readFile('/proc/net/snmp', 'utf8')).split('\n').filter((l) => l.startsWith('Udp:'));
  return Number(lines[1]!.split(/\s+/)[lines[0]!.split(/\s+/).indexOf('RcvbufErrors')]);
}

let lastRate: { received: number; dropped: number } | undefined;

test('builtin UDP: paced at the requested rate, every datagram counted at both ends', async () => {
  const dropsBefore = await rcvbufErrors();
  const [sender, receiver] = await pair(udp(5000), 'udp-rate');
  const dropped = (await rcvbufErrors()) - dropsBefore;
  assert.equal(sender.error, null, JSON.stringify(sender.error));
  assert.equal(receiver.error, null, JSON.stringify(receiver.error));
  assert.equal(sender.udp!.sent, 10_000, '5000 pps for 2 s');
  assert.ok(Math.abs(sender.udp!.achievedPacketsPerSecond! - 5000) / 5000 < 0.01, `achieved ${sender.udp!.achievedPacketsPerSecond} pps`);
  // Every datagram is either counted by the receiver or was dropped in its socket (this host's
  // UdpRcvbufErrors; nothing else here sends UDP): a starved receiver is issue 16's, below.
  assert.ok(receiver.udp!.received! <= sender.udp!.sent!, `received ${receiver.udp!.received} of ${sender.udp!.sent}`);
  assert.ok(receiver.udp!.received! + dropped >= 9900, `received ${receiver.udp!.received}, dropped in the socket ${dropped}: ${10_000 - receiver.udp!.received! - dropped} unaccounted for`);
  lastRate = { received: receiver.udp!.received!, dropped };
  assert.equal(receiver.udp!.duplicates, 0);
  assert.ok(receiver.udp!.jitterSeconds! >= 0 && receiver.udp!.jitterSeconds! < 0.01);
  assert.equal(sender.figures!.calls, 10_000, 'a call is a datagram');
  assert.equal(sender.figures!.bytes, 10_000 * 1200);
  assert.equal(receiver.figures!.bytes, receiver.udp!.received! * 1200);
  assert.ok(receiver.intervals.length >= 3);
  assert.ok(sender.figures!.cpuSeconds > 0 && receiver.figures!.cpuSeconds > 0);
});

test('builtin UDP at 5,000 pps on loopback: the receiver keeps up, nothing dropped in its socket', { todo: 'issue 16: the builtin UDP receiver drops datagrams in its own socket when its process is starved (a loaded machine)' }, () => {
  assert.ok(lastRate, 'the paced run above took place');
  assert.ok(lastRate.received >= 9900 && lastRate.dropped === 0, `received ${lastRate.received} of 10000, ${lastRate.dropped} dropped in the socket`);
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
  assert.deepEqual(await engine.probe(), { available: true, version: `niclab builtin (node ${process.version})` });
});
