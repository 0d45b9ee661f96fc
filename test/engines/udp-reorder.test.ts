import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { test } from 'node:test';
import { DATA, FIN, MAGIC } from '@niclab/agent/engines/builtin/udp-format';
import { ENGINES } from '@niclab/agent/engines/registry';
import type { EngineParams } from '@niclab/shared/domain/task';

/**
 * The builtin UDP receiver against a sender of the test's own, whose order is known: the
 * counts it reports (received, out of order, duplicates) are a closed form of what was sent.
 */
const engine = ENGINES.builtin!;
const params: EngineParams = {
  protocol: 'udp', test: 'stream', duration: 1, bufferLength: 200, streams: 1, noDelay: false, interval: 0.5,
  udp: { packetSize: 200, rate: { packetsPerSecond: 100 } },
};

test('builtin UDP receiver: datagrams reordered and repeated on purpose are counted out of order and duplicate, each once', async () => {
  const runId = 'udp-reorder';
  const token = createHash('sha256').update(`${runId}/0`).digest().readUInt32BE(0);
  let ready!: (port: number) => void;
  const listening = new Promise<number>((resolve) => (ready = resolve));
  const receiving = engine.run({ jobId: 'udp-test', runId, leg: 0, role: 'receiver', engine: 'builtin', params, interface: 'lo', deadline: Date.now() + 20_000 }, { signal: new AbortController().signal, address: '127.0.0.1', ready });
  const port = await listening;
  const socket = createSocket('udp4');
  const send = (kind: number, seq: number) => {
    const packet = Buffer.alloc(200);
    packet.writeUInt32BE(MAGIC, 0);
    packet.writeUInt32BE(token, 4);
    packet.writeUInt32BE(kind, 8);
    packet.writeDoubleBE(seq, 12);
    packet.writeDoubleBE(Date.now() * 1000, 20);
    return new Promise<void>((resolve, reject) => socket.send(packet, port, '127.0.0.1', (error) => (error ? reject(error) : resolve())));
  };
  // 0..9, then 15..19, then 10..14 late (5 out of order), 3 and 17 again (2 duplicates), then
  // 20, 22, 21 (one behind: out of order too), 23, 24.
  const order = [...Array(10).keys(), 15, 16, 17, 18, 19, 10, 11, 12, 13, 14, 3, 17, 20, 22, 21, 23, 24];
  for (const seq of order) await send(DATA, seq);
  await send(FIN, 0);
  socket.close();
  const receiver = await receiving;
  assert.equal(receiver.error, null, JSON.stringify(receiver.error));
  assert.deepEqual({ received: receiver.udp!.received, outOfOrder: receiver.udp!.outOfOrder, duplicates: receiver.udp!.duplicates }, { received: 25, outOfOrder: 6, duplicates: 2 });
  assert.equal(receiver.figures!.bytes, 25 * 200, 'bytes: distinct datagrams × packetSize');
});
