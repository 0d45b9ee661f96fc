/**
 * The builtin engine's UDP process (rude/crude-style): the sender paces datagrams at a constant
 * packet rate, each carrying a sequence number and its send time; the receiver counts what
 * arrives, in order or not, the interarrival jitter of RFC 3550 and the one-way delay.
 */
import { createSocket, type Socket } from 'node:dgram';
import { isIPv6 } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { EndFigures, Interval } from '@niclab/shared/domain/contract';
import { DelayHistogram } from '@niclab/shared/domain/delay-histogram';
import { endFigures } from '@niclab/shared/domain/figures';
import type { EndUdp, EngineParams } from '@niclab/shared/domain/task';
import { cpuSeconds, NO_CPU, serveChild, type Send } from './child-main.js';
import { IntervalSampler } from './interval-sampler.js';
import { udpPacketsPerSecond } from '@niclab/shared/domain/udp-rate';
import { DATA, FIN, FIN_COUNT, FIN_GAP_MS, HEADER_BYTES, MAGIC } from './udp-format.js';
import { BatchSocket } from './udp-batch.js';
import { StreamSequences } from './udp-sequences.js';
import { epochMicros, REALTIME_ORIGIN_MS } from './realtime-origin.js';

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
  udp: EndUdp & { targetPacketsPerSecond?: number; achievedPacketsPerSecond?: number; lateDatagrams?: number };
  socketBuffers: { sendBytes: number; receiveBytes: number };
}

/** A sender whose kernel queue holds this many datagrams is ahead of what the host can send. */
const MAX_QUEUED = 2048;
/** How late a sender may still send the datagrams that were due before the end of the run. */
const END_GRACE_MS = 20;
/** At most this many datagrams are sent in one turn of the event loop. */
const TURN_MAX = 256;
/** A sender behind its schedule catches up at most this many times its rate. */
const CATCH_UP = 2;
/** Bursts' worth of header writes a sender runs before it starts, so its code is compiled. */
const WARM_TURNS = 200;
/** The pacing timer's tick, ms (iperf3's --pacing-timer is 1000 µs). */
const PACING_MS = 1;
/**
 * A datagram sent more than this long after it was due is late: it went in a catch-up burst
 * (the sender was off the CPU), which a path's queue must hold on top of the rate. Five ticks of
 * the pacing timer, so a timer that wakes a few ticks late on a busy host is not counted.
 */
const LATE_MS = 5;

/** Send and read times in epoch µs on CLOCK_REALTIME, the clock of the kernel's receive timestamps. */
const nowMicros = epochMicros;

/**
 * A receiver asks for this much receive buffer when the spec names no socketBuffer: a burst
 * of datagrams that arrives while its process waits for the CPU waits in the socket, not in
 * UdpRcvbufErrors. The kernel caps it at net.core.rmem_max; socketBuffers reports what it gave.
 */
const RECEIVE_BUFFER = 4 * 1024 * 1024;

/** The buffers a receiver asks for: the spec's socketBuffer, else RECEIVE_BUFFER to receive. */
function receiveBuffers(params: EngineParams): { receive?: number; send?: number } {
  return params.socketBuffer ? { receive: params.socketBuffer, send: params.socketBuffer } : { receive: RECEIVE_BUFFER };
}

function open(address: string, params: EngineParams, role: UdpChildInput['role']): Socket {
  const asked = role === 'receiver' ? receiveBuffers(params) : { receive: params.socketBuffer, send: params.socketBuffer };
  return createSocket({ type: isIPv6(address) ? 'udp6' : 'udp4', ...(asked.receive ? { recvBufferSize: asked.receive } : {}), ...(asked.send ? { sendBufferSize: asked.send } : {}) });
}

function buffers(socket: Socket) {
  return { sendBytes: socket.getSendBufferSize(), receiveBytes: socket.getRecvBufferSize() };
}

/** Datagrams a receiver reads per recvmmsg. */
const RECEIVE_BATCH = 64;
/**
 * After the first FIN a receiver still counts datagrams this long, unless all that were sent
 * have come: a path that reorders (ECMP, LAG, jitter) can deliver some behind it. As long as
 * the sender's own FIN train, so the run ends no later than its sender does.
 */
const FIN_GRACE_MS = FIN_COUNT * FIN_GAP_MS;

function receive(input: UdpChildInput, send: Send): Promise<UdpChildResult> {
  const { packetSize } = input.params.udp!;
  const { duration, interval } = input.params;
  return new Promise((resolve, reject) => {
    const sequences = new StreamSequences(input.params.streams);
    let jitter = 0;
    let lastTransit: number | null = null;
    const delay = new DelayHistogram();
    // Datagrams whose arrival is the time they were read (no kernel timestamp).
    let readTimes = 0;
    let firstAt = 0;
    let lastAt = 0;
    /** When the first FIN came (the sender had stopped sending), and what each stream's FIN says it sent. */
    let finAt = 0;
    const finSent = new Map<number, number>();
    /** Datagrams sent over all streams, once every stream's FIN has come. */
    let expected = Infinity;
    let cpu: NodeJS.CpuUsage | undefined;
    let giveUp: NodeJS.Timeout | undefined;
    let grace: NodeJS.Timeout | undefined;
    let finished = false;
    const sampler = new IntervalSampler(interval, () => sequences.received * packetSize, (sample) => send({ type: 'interval', interval: sample }), () => ({ jitterSeconds: jitter / 1e6 }));
    const finish = () => {
      if (finished) return;
      finished = true;
      clearTimeout(giveUp);
      clearTimeout(grace);
      const { received, outOfOrder, duplicates } = sequences;
      const result: UdpChildResult = {
        figures: endFigures(received * packetSize, firstAt ? receivingSeconds() : 0, cpu ? cpuSeconds(cpu) : NO_CPU, received),
        intervals: sampler.finish(lastAt),
        udp: {
          received, outOfOrder, duplicates, jitterSeconds: jitter / 1e6,
          ...(received > 0 ? { oneWayDelaySeconds: delay.summary(), arrivalTimes: readTimes === 0 ? 'kernel' as const : 'process' as const } : {}),
        },
        socketBuffers: transport.buffers(),
      };
      transport.close();
      resolve(result);
    };
    // From the first datagram to the sender's end (its first FIN), so a sender that stalled
    // through the end shows here too; with every FIN lost, at least the run's length.
    const receivingSeconds = () => (finAt ? Math.max(finAt, lastAt) - firstAt : Math.max(lastAt - firstAt, duration * 1000)) / 1000;
    const fin = (stream: number, sent: number, arrival: number) => {
      if (finAt === 0) {
        finAt = arrival;
        grace = setTimeout(finish, FIN_GRACE_MS);
      }
      finSent.set(stream, sent);
      if (finSent.size === input.params.streams) expected = [...finSent.values()].reduce((a, n) => a + n, 0);
      if (sequences.received >= expected) finish();
    };
    /** Counts one datagram (`length` bytes at `at` in `data`) that arrived at `arrivalMicros` (epoch µs; `stamped`: the kernel's time, else when it was read). */
    const take = (data: Buffer, at: number, length: number, arrivalMicros: number, stamped: boolean) => {
      if (finished || length < HEADER_BYTES || data.readUInt32BE(at) !== MAGIC || data.readUInt32BE(at + 4) !== input.token) return;
      // On the performance.now() timeline, as the interval sampler's timer.
      const arrival = arrivalMicros / 1000 - REALTIME_ORIGIN_MS;
      const stream = data.readUInt16BE(at + 8);
      const seq = data.readDoubleBE(at + 12);
      if (!sequences.valid(stream, seq)) return;
      if (data.readUInt16BE(at + 10) === FIN) return fin(stream, seq, arrival);
      if (firstAt === 0) {
        firstAt = arrival;
        cpu = process.cpuUsage();
        sampler.start(firstAt);
        // The FIN can be lost like any datagram: stop on our own a little after the sender must have.
        giveUp = setTimeout(finish, (duration + 2) * 1000);
      }
      lastAt = arrival;
      if (!sequences.take(stream, seq)) return;
      if (!stamped) readTimes += 1;
      // RFC 3550 interarrival jitter, in µs, from each datagram's own arrival: J += (|D| - J) / 16.
      const transit = arrivalMicros - data.readDoubleBE(at + 20);
      if (lastTransit !== null) jitter += (Math.abs(transit - lastTransit) - jitter) / 16;
      lastTransit = transit;
      delay.add(transit / 1e6);
      // The last one missing behind the FINs came: nothing more can.
      if (sequences.received >= expected) finish();
    };
    const transport = receiveBatched(input, take) ?? receiveDgram(input, take, reject);
    transport.ready((port) => send({ type: 'ready', port }));
  });
}

interface Receiving {
  ready(listening: (port: number) => void): void;
  buffers(): { sendBytes: number; receiveBytes: number };
  close(): void;
}

type Take = (data: Buffer, at: number, length: number, arrivalMicros: number, stamped: boolean) => void;

/**
 * recvmmsg: every datagram waiting in the socket, RECEIVE_BATCH per call, when it is readable,
 * each with the kernel's timestamp of its arrival. Null where it cannot load.
 */
function receiveBatched(input: UdpChildInput, take: Take): Receiving | null {
  const socket = BatchSocket.open(input.address, receiveBuffers(input.params), { timestamps: true });
  if (socket instanceof Error) return null;
  // A longer datagram (not of this leg) is cut to its slot: only its header is read.
  const slot = Math.max(input.params.udp!.packetSize, HEADER_BYTES);
  const stamp = { seconds: 0, nanoseconds: 0 };
  return {
    ready(listening) {
      socket.receive(socket.batch(RECEIVE_BATCH, slot, { control: true }), (batch, count) => {
        // A batch holds what queued while the process was away: each datagram's time is the kernel's, not this read's.
        for (let i = 0; i < count; i++) {
          const stamped = batch.timestamp(i, stamp);
          take(batch.data, i * slot, batch.length(i), stamped ? stamp.seconds * 1e6 + stamp.nanoseconds / 1e3 : nowMicros(), stamped);
        }
      });
      listening(socket.port());
    },
    buffers: () => socket.buffers(),
    close: () => socket.close(),
  };
}

/** Node's dgram, a datagram an event: where batched receive cannot load. */
function receiveDgram(input: UdpChildInput, take: Take, reject: (error: Error) => void): Receiving {
  const socket = open(input.address, input.params, 'receiver');
  socket.on('error', reject);
  socket.on('message', (message: Buffer) => take(message, 0, message.length, nowMicros(), false));
  return {
    ready: (listening) => socket.bind({ address: input.address, port: 0 }, () => listening(socket.address().port)),
    buffers: () => buffers(socket),
    close: () => socket.close(),
  };
}

/** How a sender puts datagrams on the wire: one socket per stream, each with its own source port. */
interface Sending {
  /** Sends datagrams `from` to `from + count - 1` of `stream` now; how many the kernel took (fewer: its queue is full). */
  burst(stream: number, from: number, count: number): number;
  /** Sends one FIN on `stream`, carrying how many datagrams it sent. */
  fin(stream: number, sent: number): Promise<void>;
  /** Runs the burst's code once without sending, so the first real bursts are not slow (cold code). */
  warm(): void;
  /** Waits for sends still in flight; the error that ends the run (the peer's port is closed), if any. */
  settle(sent: number): Promise<Error | null>;
  buffers(): { sendBytes: number; receiveBytes: number };
  close(): void;
}

/** Writes a datagram's header at `at` in `into` (the layout is udp-format.ts's). */
function writeHeader(into: Buffer, at: number, token: number, stream: number, kind: number, seq: number): void {
  into.writeUInt32BE(MAGIC, at);
  into.writeUInt32BE(token, at + 4);
  into.writeUInt16BE(stream, at + 8);
  into.writeUInt16BE(kind, at + 10);
  into.writeDoubleBE(seq, at + 12);
  into.writeDoubleBE(nowMicros(), at + 20);
}

/** Opens and connects one BatchSocket per stream; null where batched sends cannot load. */
function batchSockets(input: UdpChildInput): BatchSocket[] | null {
  const asked = input.params.socketBuffer ? { receive: input.params.socketBuffer, send: input.params.socketBuffer } : {};
  const sockets: BatchSocket[] = [];
  try {
    for (let stream = 0; stream < input.params.streams; stream++) {
      const socket = BatchSocket.open(input.address, asked);
      if (socket instanceof Error) {
        if (stream === 0) return null;
        throw socket;
      }
      sockets.push(socket);
      socket.connect(input.peer!.address, input.peer!.port);
    }
  } catch (error) {
    for (const socket of sockets) socket.close();
    throw error;
  }
  return sockets;
}

/** sendmmsg: a burst is one system call, its datagrams written in place in one Buffer (shared by the streams). Null where it cannot load. */
function sendBatched(input: UdpChildInput): Sending | null {
  const sockets = batchSockets(input);
  if (!sockets) return null;
  const batch = sockets[0]!.batch(TURN_MAX, Math.max(input.params.udp!.packetSize, HEADER_BYTES));
  let calls = 0;
  let failedCalls = 0;
  let failure: Error | null = null;
  const call = (stream: number, count: number) => {
    calls += 1;
    try {
      return sockets[stream]!.send(batch, count);
    } catch (error) {
      // A connected socket hears of ICMP port unreachable as ECONNREFUSED on its next call.
      failedCalls += 1;
      failure = error as Error;
      return 0;
    }
  };
  return {
    burst(stream, from, count) {
      for (let i = 0; i < count; i++) writeHeader(batch.data, i * batch.slotBytes, input.token, stream, DATA, from + i);
      return call(stream, count);
    },
    async fin(stream, sent) {
      writeHeader(batch.data, 0, input.token, stream, FIN, sent);
      call(stream, 1);
    },
    warm() {
      for (let i = 0; i < TURN_MAX; i++) writeHeader(batch.data, i * batch.slotBytes, input.token, 0, DATA, i);
      sockets[0]!.send(batch, 0);
    },
    // Every other call refused: nobody listens there.
    settle: async () => (failure && failedCalls * 3 >= calls ? failure : null),
    buffers: () => sockets[0]!.buffers(),
    close: () => sockets.forEach((socket) => socket.close()),
  };
}

/** A dgram socket bound to the sender's address and connected to its peer. */
async function dgramSocket(input: UdpChildInput): Promise<Socket> {
  const socket = open(input.address, input.params, 'sender');
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.bind({ address: input.address, port: 0 }, () => socket.connect(input.peer!.port, input.peer!.address, () => {
      socket.removeListener('error', reject);
      resolve();
    }));
  });
  return socket;
}

/** Node's dgram, a call and a callback per datagram: where batched sends cannot load. */
async function sendDgram(input: UdpChildInput): Promise<Sending> {
  const { packetSize } = input.params.udp!;
  const sockets: Socket[] = [];
  // A closed peer port comes back as ICMP, surfacing as ECONNREFUSED; sends count those below.
  let asyncError: (Error & { code?: string }) | null = null;
  try {
    for (let stream = 0; stream < input.params.streams; stream++) sockets.push(await dgramSocket(input));
  } catch (error) {
    for (const socket of sockets) socket.close();
    throw error;
  }
  for (const socket of sockets) {
    socket.on('error', (error) => {
      asyncError ??= error;
    });
  }
  // A datagram is its header and one shared, never-written padding: nothing of packetSize is
  // allocated or zeroed per datagram.
  const padding = Buffer.alloc(Math.max(0, packetSize - HEADER_BYTES));
  const datagram = (stream: number, kind: number, seq: number) => {
    const head = Buffer.allocUnsafe(HEADER_BYTES);
    writeHeader(head, 0, input.token, stream, kind, seq);
    return padding.length > 0 ? [head, padding] : [head];
  };
  let pending = 0;
  let failed = 0;
  let failure: (Error & { code?: string }) | null = null;
  const done = (error: Error | null) => {
    pending -= 1;
    if (error) {
      failed += 1;
      failure = error;
    }
  };
  return {
    burst(stream, from, count) {
      const socket = sockets[stream]!;
      let i = 0;
      for (; i < count; i++) {
        if (socket.getSendQueueCount() > MAX_QUEUED) break; // the kernel is behind: wait a turn
        pending += 1;
        socket.send(datagram(stream, DATA, from + i), done);
      }
      return i;
    },
    fin: (stream, sent) => new Promise<void>((resolve) => sockets[stream]!.send(datagram(stream, FIN, sent), () => resolve())),
    warm() {
      for (let i = 0; i < TURN_MAX; i++) datagram(0, DATA, i);
    },
    async settle(sent) {
      while (pending > 0) await new Promise((r) => setImmediate(r));
      // A connected UDP socket hears of a closed port (ICMP) as ECONNREFUSED on later sends.
      if (failure && failed >= sent / 2) return failure;
      if (asyncError && sent === 0) return asyncError;
      return null;
    },
    buffers: () => buffers(sockets[0]!),
    close: () => {
      // After the receiver has its FIN it closes; the ICMP our later FINs draw is expected.
      if (asyncError && asyncError.code !== 'ECONNREFUSED') throw asyncError;
      for (const socket of sockets) socket.close();
    },
  };
}

/**
 * The flow's schedule split over its streams: datagram i of the flow is due at i / pps and
 * goes on stream i mod streams, so each stream runs at pps / streams and together they offer
 * the flow's rate, whatever `streams` is.
 */
class Schedule {
  readonly total: number;
  private readonly sent: number[];

  constructor(private readonly pps: number, private readonly streams: number, duration: number) {
    this.total = Math.round(pps * duration);
    this.sent = new Array<number>(streams).fill(0);
  }

  /** How many of the flow's datagrams are due `ms` after its start (the first at 0; none before it). */
  dueBy(ms: number): number {
    return Math.min(this.total, Math.max(0, Math.floor((ms / 1000) * this.pps) + 1));
  }

  /** Of the flow's first `count` datagrams, how many are `stream`'s. */
  share(count: number, stream: number): number {
    return Math.max(0, Math.ceil((count - stream) / this.streams));
  }

  sentBy(stream: number): number {
    return this.sent[stream]!;
  }

  add(stream: number, count: number): void {
    this.sent[stream]! += count;
  }

  /** Milliseconds from the start at which the next datagram of any stream is due. */
  nextDueMs(): number {
    let next = Infinity;
    for (let stream = 0; stream < this.streams; stream++) next = Math.min(next, this.sent[stream]! * this.streams + stream);
    return (next / this.pps) * 1000;
  }
}

async function sendData(input: UdpChildInput, send: Send): Promise<UdpChildResult> {
  const { packetSize } = input.params.udp!;
  const { duration, streams } = input.params;
  const pps = udpPacketsPerSecond(input.params.udp!);
  const sending = sendBatched(input) ?? (await sendDgram(input));
  // Cold, the first bursts ran interpreted: at 50k pps on a loaded host the sender fell 200 ms
  // behind in its first quarter second and caught up in bursts its receiver could not hold.
  for (let i = 0; i < WARM_TURNS; i++) sending.warm();
  send({ type: 'armed' });
  const wait = (input.startAt ?? 0) - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  const schedule = new Schedule(pps, streams, duration);
  const { total } = schedule;
  // Datagrams due before the end still go out if the sender is a moment late (a GC pause);
  // a sender that is persistently behind stops here and its achieved rate says so.
  const endAt = t0 + duration * 1000 + END_GRACE_MS;
  // A turn sends at most TURN_MAX datagrams over all its streams.
  const perStream = Math.ceil(TURN_MAX / streams);
  let sent = 0;
  let late = 0;
  let lastTurnAt = t0;
  let stoppedAt = t0;
  // iperf3's pacing: a timer wakes the sender every PACING_MS and it sends, in one burst per
  // stream, the datagrams due by then (half a tick ahead, so a 100 ms window is off by at most
  // half a tick either way). Between bursts the process sleeps: the CPU stays with the receiver
  // and the kernel, where spinning until the next datagram (setImmediate) took a whole core.
  await new Promise<void>((resolve) => {
    const turn = () => {
      const now = performance.now();
      const due = schedule.dueBy(now - t0 + PACING_MS / 2);
      // A sender that was off the CPU catches up at most CATCH_UP times the rate, not in one
      // burst that its receiver's socket (or a shaper) cannot hold.
      const allowed = Math.ceil((CATCH_UP * (pps / streams) * Math.max(PACING_MS, now - lastTurnAt)) / 1000);
      lastTurnAt = now;
      let behind = false;
      // The flow's datagrams due more than LATE_MS ago: any of them still to send goes late.
      const overdue = schedule.dueBy(now - t0 - LATE_MS);
      for (let stream = 0; stream < streams; stream++) {
        const owed = schedule.share(due, stream) - schedule.sentBy(stream);
        // A turn is bounded, so a sender that fell behind still stops on time and lets callbacks run.
        const count = Math.min(owed, allowed, perStream);
        const went = count > 0 && now < endAt ? sending.burst(stream, schedule.sentBy(stream), count) : 0;
        late += Math.max(0, Math.min(went, schedule.share(overdue, stream) - schedule.sentBy(stream)));
        schedule.add(stream, went);
        sent += went;
        if (went === perStream && went < owed) behind = true;
      }
      const after = performance.now();
      // The run lasts `duration`, as rude's does: a host that falls behind sends fewer, and its
      // achieved rate says so, rather than stretching the run.
      if (sent >= total || after >= endAt) {
        stoppedAt = after;
        return resolve();
      }
      // A full turn that went and more due: at once. Otherwise (behind and catching up, the
      // kernel's queue is full, or nothing is due) sleep until the next is due, at least a tick.
      if (behind) setImmediate(turn);
      else setTimeout(turn, Math.max(PACING_MS, t0 + schedule.nextDueMs() - PACING_MS / 2 - after));
    };
    turn();
  });
  const failure = await sending.settle(sent);
  if (failure) {
    sending.close();
    throw failure;
  }
  // The time the sender took, as nttcp's: from its first datagram until it stopped sending, all
  // sent or the run over; a stall through the end counts up to when the sender ran again.
  const realSeconds = (stoppedAt - t0) / 1000;
  const cpuUsed = cpuSeconds(cpu);
  // Several FINs on every stream: any one ends the receiver's wait for it; losing all of them only delays it.
  for (let i = 0; i < FIN_COUNT; i++) {
    for (let stream = 0; stream < streams; stream++) await sending.fin(stream, schedule.sentBy(stream));
    await new Promise((r) => setTimeout(r, FIN_GAP_MS));
  }
  const socketBuffers = sending.buffers();
  sending.close();
  return {
    figures: endFigures(sent * packetSize, realSeconds, cpuUsed, sent),
    intervals: [],
    // What it offered over the run's whole length: a sender that stalled, at any time, falls short.
    udp: { sent, targetPacketsPerSecond: pps, achievedPacketsPerSecond: sent / duration, lateDatagrams: late },
    socketBuffers,
  };
}

serveChild<UdpChildInput>((input, send) => (input.role === 'receiver' ? receive(input, send) : sendData(input, send)));
