/**
 * The builtin engine's UDP process (rude/crude-style): the sender paces datagrams at a constant
 * packet rate, each carrying a sequence number and its send time; the receiver counts what
 * arrives, in order or not, the interarrival jitter of RFC 3550 and the one-way delay.
 */
import { createSocket, type Socket } from 'node:dgram';
import { isIPv6 } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { EndFigures, Interval } from '@niclab/shared/domain/contract';
import { endFigures } from '@niclab/shared/domain/figures';
import type { EndUdp, EngineParams } from '@niclab/shared/domain/task';
import { cpuSeconds, serveChild, type Send } from './child-main.js';
import { IntervalSampler } from './interval-sampler.js';
import { udpPacketsPerSecond } from '@niclab/shared/domain/udp-rate';
import { DATA, FIN, HEADER_BYTES, MAGIC } from './udp-format.js';

export interface UdpChildInput {
  role: 'sender' | 'receiver';
  params: EngineParams;
  address: string;
  /** Identifies this leg's datagrams; anything else arriving on the port is ignored. */
  token: number;
  peer?: { address: string; port: number };
  startAt?: number;
}

export interface UdpChildResult {
  figures: EndFigures;
  intervals: Interval[];
  udp: EndUdp & { targetPacketsPerSecond?: number; achievedPacketsPerSecond?: number };
  socketBuffers: { sendBytes: number; receiveBytes: number };
}

/** A sender whose kernel queue holds this many datagrams is ahead of what the host can send. */
const MAX_QUEUED = 2048;
/** How late a sender may still send the datagrams that were due before the end of the run. */
const END_GRACE_MS = 20;
/** At most this many datagrams are sent in one turn of the event loop. */
const TURN_MAX = 256;

const nowMicros = () => (performance.timeOrigin + performance.now()) * 1000;

function open(address: string, params: EngineParams): Socket {
  return createSocket({ type: isIPv6(address) ? 'udp6' : 'udp4', ...(params.socketBuffer ? { recvBufferSize: params.socketBuffer, sendBufferSize: params.socketBuffer } : {}) });
}

function buffers(socket: Socket) {
  return { sendBytes: socket.getSendBufferSize(), receiveBytes: socket.getRecvBufferSize() };
}

/**
 * One-way delays in whole microseconds up to 1 s (4 MB of counters, whatever the run's
 * length); longer ones count in the last bucket and the maximum.
 */
class DelayHistogram {
  private readonly counts = new Uint32Array(1_000_001);
  private count = 0;
  private sum = 0;
  private min = Infinity;
  private max = -Infinity;

  add(micros: number): void {
    this.counts[Math.min(this.counts.length - 1, Math.max(0, Math.round(micros)))]! += 1;
    this.count += 1;
    this.sum += micros;
    if (micros < this.min) this.min = micros;
    if (micros > this.max) this.max = micros;
  }

  summary(): { min: number; mean: number; p50: number; p99: number; max: number } {
    const at = (q: number) => {
      const rank = Math.ceil(q * this.count);
      let seen = 0;
      for (let us = 0; us < this.counts.length; us++) {
        seen += this.counts[us]!;
        if (seen >= rank) return us / 1e6;
      }
      return this.max / 1e6;
    };
    return { min: this.min / 1e6, mean: this.sum / this.count / 1e6, p50: at(0.5), p99: at(0.99), max: this.max / 1e6 };
  }
}

function receive(input: UdpChildInput, send: Send): Promise<UdpChildResult> {
  const { packetSize } = input.params.udp!;
  const { duration, interval } = input.params;
  return new Promise((resolve, reject) => {
    const socket = open(input.address, input.params);
    let seen = new Uint8Array(1 << 16);
    let received = 0;
    let duplicates = 0;
    let outOfOrder = 0;
    let highest = -1;
    let jitter = 0;
    let lastTransit: number | null = null;
    const delay = new DelayHistogram();
    let firstAt = 0;
    let lastAt = 0;
    let cpu: NodeJS.CpuUsage | undefined;
    let giveUp: NodeJS.Timeout | undefined;
    const sampler = new IntervalSampler(interval, () => received * packetSize, (sample) => send({ type: 'interval', interval: sample }));
    const finish = () => {
      clearTimeout(giveUp);
      const result: UdpChildResult = {
        figures: endFigures(received * packetSize, firstAt ? (lastAt - firstAt) / 1000 : 0, cpu ? cpuSeconds(cpu) : 0, received),
        intervals: sampler.finish(lastAt),
        udp: { received, outOfOrder, duplicates, jitterSeconds: jitter / 1e6, ...(received > 0 ? { oneWayDelaySeconds: delay.summary() } : {}) },
        socketBuffers: buffers(socket),
      };
      socket.close();
      resolve(result);
    };
    socket.on('error', reject);
    socket.on('message', (message: Buffer) => {
      if (message.length < HEADER_BYTES || message.readUInt32BE(0) !== MAGIC || message.readUInt32BE(4) !== input.token) return;
      if (message.readUInt32BE(8) === FIN) return finish();
      const arrival = performance.now();
      if (firstAt === 0) {
        firstAt = arrival;
        cpu = process.cpuUsage();
        sampler.start(firstAt);
        // The FIN can be lost like any datagram: stop on our own a little after the sender must have.
        giveUp = setTimeout(finish, (duration + 2) * 1000);
      }
      lastAt = arrival;
      const seq = message.readDoubleBE(12);
      if (seq >= seen.length * 8) {
        const grown = new Uint8Array(Math.max(seen.length * 2, Math.ceil((seq + 1) / 8)));
        grown.set(seen);
        seen = grown;
      }
      const byte = seq >>> 3;
      const bit = 1 << (seq & 7);
      if (seen[byte]! & bit) {
        duplicates += 1;
        return;
      }
      seen[byte]! |= bit;
      received += 1;
      if (seq < highest) outOfOrder += 1;
      else highest = seq;
      // RFC 3550 interarrival jitter, in µs: J += (|D| - J) / 16.
      const transit = (performance.timeOrigin + arrival) * 1000 - message.readDoubleBE(20);
      if (lastTransit !== null) jitter += (Math.abs(transit - lastTransit) - jitter) / 16;
      lastTransit = transit;
      delay.add(transit);
    });
    socket.bind({ address: input.address, port: 0 }, () => send({ type: 'ready', port: socket.address().port }));
  });
}

async function sendData(input: UdpChildInput): Promise<UdpChildResult> {
  const { packetSize } = input.params.udp!;
  const pps = udpPacketsPerSecond(input.params.udp!);
  const socket = open(input.address, input.params);
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind({ address: input.address, port: 0 }, () => socket.connect(input.peer!.port, input.peer!.address, () => {
      socket.removeListener('error', reject);
      resolve();
    }));
  });
  // A closed peer port comes back as ICMP, surfacing as ECONNREFUSED; sends count those below.
  let asyncError: (Error & { code?: string }) | null = null;
  socket.on('error', (error) => {
    asyncError ??= error;
  });
  const header = (kind: number, seq: number) => {
    const packet = Buffer.alloc(Math.max(packetSize, HEADER_BYTES));
    packet.writeUInt32BE(MAGIC, 0);
    packet.writeUInt32BE(input.token, 4);
    packet.writeUInt32BE(kind, 8);
    packet.writeDoubleBE(seq, 12);
    packet.writeDoubleBE(nowMicros(), 20);
    return packet;
  };
  const wait = (input.startAt ?? 0) - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  const total = Math.round(pps * input.params.duration);
  // Datagrams due before the end still go out if the sender is a moment late (a GC pause);
  // a sender that is persistently behind stops here and its achieved rate says so.
  const endAt = t0 + input.params.duration * 1000 + END_GRACE_MS;
  let sent = 0;
  let pending = 0;
  let lastSentAt = t0;
  let failed = 0;
  let failure: (Error & { code?: string }) | null = null;
  const done = (error: Error | null) => {
    pending -= 1;
    if (error) {
      failed += 1;
      failure = error;
    }
  };
  // Each turn sends the datagrams due by now (up to TURN_MAX): the rate holds, the gaps stay short.
  await new Promise<void>((resolve) => {
    const turn = () => {
      const due = Math.min(total, Math.floor(((performance.now() - t0) / 1000) * pps) + 1);
      // A turn is bounded, so a sender that fell behind still stops on time and lets callbacks run.
      const limit = Math.min(due, sent + TURN_MAX);
      while (sent < limit) {
        if ((sent & 63) === 0 && performance.now() >= endAt) break;
        if (socket.getSendQueueCount() > MAX_QUEUED) break; // the kernel is behind: wait a turn
        pending += 1;
        socket.send(header(DATA, sent), done);
        sent += 1;
        lastSentAt = performance.now();
      }
      // The run lasts `duration`, as rude's does: a host that falls behind sends fewer, and its
      // achieved rate says so, rather than stretching the run.
      if (sent >= total || performance.now() >= endAt) return resolve();
      // Sleep when the next datagram is far off; spin (setImmediate) when it is close, for precision.
      const ahead = t0 + (sent / pps) * 1000 - performance.now();
      if (ahead > 2) setTimeout(turn, ahead - 1);
      else setImmediate(turn);
    };
    turn();
  });
  while (pending > 0) await new Promise((r) => setImmediate(r));
  // A connected UDP socket hears of a closed port (ICMP) as ECONNREFUSED on later sends.
  if (failure && failed >= sent / 2) throw failure;
  if (asyncError && sent === 0) throw asyncError;
  // From the first send() to the last: libuv sends at once when its queue is empty, and the
  // callbacks (waited for above, for their errors) run late behind this busy loop.
  const realSeconds = (lastSentAt - t0) / 1000;
  const cpuUsed = cpuSeconds(cpu);
  // Several FINs: any one of them ends the receiver; losing all of them only delays it.
  for (let i = 0; i < 5; i++) {
    await new Promise<void>((resolve) => socket.send(header(FIN, 0), () => resolve()));
    await new Promise((r) => setTimeout(r, 10));
  }
  // After the receiver has its FIN it closes; the ICMP our later FINs draw is expected.
  if (asyncError && (asyncError as { code?: string }).code !== 'ECONNREFUSED') throw asyncError;
  const socketBuffers = buffers(socket);
  socket.close();
  return {
    figures: endFigures(sent * packetSize, realSeconds, cpuUsed, sent),
    intervals: [],
    udp: { sent, targetPacketsPerSecond: pps, achievedPacketsPerSecond: realSeconds > 0 ? sent / realSeconds : 0 },
    socketBuffers,
  };
}

serveChild<UdpChildInput>((input, send) => (input.role === 'receiver' ? receive(input, send) : sendData(input)));
