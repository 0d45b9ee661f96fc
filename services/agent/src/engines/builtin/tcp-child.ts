/**
 * The builtin TCP engine's process: one end of one leg, streaming (nttcp) or request/response
 * (netperf TCP_RR). Started by the agent with fork(); gets its input as the first IPC message,
 * answers `ready` (receiver) and one `result`.
 */
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { endFigures, rrFigures } from '@niclab/shared/domain/figures';
import type { EndFigures, Interval, RrFigures } from '@niclab/shared/domain/contract';
import type { EngineParams } from '@niclab/shared/domain/task';
import { cpuSeconds, serveChild, type Send } from './child-main.js';
import { EngineFailure } from '../child-protocol.js';
import { IntervalSampler } from './interval-sampler.js';
import { readSocketBuffers, setSocketBuffers, tcpInfo, type TcpTimes } from './sockopt.js';

export interface TcpChildInput {
  role: 'sender' | 'receiver';
  params: EngineParams;
  /** Local address to bind to (the task's interface). */
  address: string;
  peer?: { address: string; port: number };
  /** Epoch ms at which the sender starts writing (the run's common start instant). */
  startAt?: number;
}

export interface TcpChildResult {
  figures: EndFigures;
  intervals: Interval[];
  /** Read back from the first connection, when the job set socketBuffer. */
  socketBuffers?: { sendBytes: number; receiveBytes: number };
  rr?: RrFigures;
  /** The sender's TCP retransmits over all its connections (null where TCP_INFO cannot be read). */
  retransmits?: number | null;
  /** The sender's TCP_INFO chronograph summed over its connections (absent where the kernel has none). */
  tcpTimes?: TcpTimes;
}

function receive(input: TcpChildInput, send: Send): Promise<TcpChildResult> {
  const { streams, noDelay, interval } = input.params;
  return new Promise((resolve, reject) => {
    let bytes = 0;
    let calls = 0;
    let closed = 0;
    let accepted = 0;
    let firstAt = 0;
    let lastAt = 0;
    let cpu: NodeJS.CpuUsage | undefined;
    let socketBuffers: TcpChildResult['socketBuffers'];
    const sampler = new IntervalSampler(interval, () => bytes, (sample) => send({ type: 'interval', interval: sample }));
    const server = createServer({ noDelay }, (socket: Socket) => {
      accepted += 1;
      // Exactly `streams` connections belong to this flow; stop listening once they are here.
      if (accepted >= streams) server.close();
      if (input.params.socketBuffer !== undefined) socketBuffers ??= readSocketBuffers(socket);
      const answer = input.params.rr ? responder(socket, input.params.rr) : undefined;
      socket.on('data', (chunk: Buffer) => {
        if (firstAt === 0) {
          firstAt = performance.now();
          cpu = process.cpuUsage();
          sampler.start(firstAt);
        }
        bytes += chunk.length;
        calls += 1;
        answer?.(chunk.length);
      });
      socket.on('end', () => {
        lastAt = performance.now();
        socket.end();
      });
      socket.on('error', reject);
      socket.on('close', () => {
        closed += 1;
        if (closed < streams) return;
        const intervals = sampler.finish(lastAt);
        if (firstAt === 0) {
          reject(new EngineFailure('no_data', 'the sender closed without sending any data'));
          return;
        }
        resolve({ figures: endFigures(bytes, (lastAt - firstAt) / 1000, cpuSeconds(cpu!), calls), intervals, ...(socketBuffers ? { socketBuffers } : {}) });
      });
    });
    server.on('error', reject);
    server.listen({ host: input.address, port: 0 }, () => {
      // Before any SYN arrives: accepted connections inherit the sizes and offer a window scale to match.
      if (input.params.socketBuffer !== undefined) {
        try {
          setSocketBuffers(server, input.params.socketBuffer);
        } catch (error) {
          server.close();
          reject(error);
          return;
        }
      }
      const address = server.address();
      send({ type: 'ready', port: typeof address === 'object' && address ? address.port : 0 });
    });
  });
}

/** The responding end of an rr connection: a response for every complete request. */
function responder(socket: Socket, sizes: { requestSize: number; responseSize: number }): (bytes: number) => void {
  const response = Buffer.alloc(sizes.responseSize, 0x52);
  let pending = 0;
  return (bytes) => {
    pending += bytes;
    while (pending >= sizes.requestSize) {
      pending -= sizes.requestSize;
      socket.write(response);
    }
  };
}

async function openStream(input: TcpChildInput): Promise<Socket> {
  const socket = connect({ host: input.peer!.address, port: input.peer!.port, localAddress: input.address, noDelay: input.params.noDelay });
  await once(socket, 'connect');
  if (input.params.socketBuffer !== undefined) setSocketBuffers(socket, input.params.socketBuffer);
  return socket;
}

async function openStreams(input: TcpChildInput): Promise<Socket[]> {
  const sockets = await Promise.all(Array.from({ length: input.params.streams }, () => openStream(input)));
  const wait = (input.startAt ?? 0) - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  return sockets;
}

function buffersOf(input: TcpChildInput, sockets: Socket[]): Pick<TcpChildResult, 'socketBuffers'> {
  return input.params.socketBuffer !== undefined && sockets[0] ? { socketBuffers: readSocketBuffers(sockets[0]) } : {};
}

/**
 * Writes `buffer` until `endAt`, honouring backpressure; resolves when the peer has closed,
 * with the connection's TCP_INFO (retransmits, chronograph) once the peer has acknowledged all.
 */
function pump(socket: Socket, buffer: Buffer, endAt: number, count: (calls: number) => void): Promise<ReturnType<typeof tcpInfo>> {
  return new Promise((resolve, reject) => {
    let waiting = false;
    const stop = setTimeout(() => {
      if (waiting) socket.end();
    }, Math.max(0, endAt - performance.now()));
    const write = () => {
      waiting = false;
      let calls = 0;
      while (performance.now() < endAt) {
        calls += 1;
        if (!socket.write(buffer)) {
          waiting = true;
          count(calls);
          socket.once('drain', write);
          return;
        }
      }
      count(calls);
      clearTimeout(stop);
      socket.end();
    };
    let info: ReturnType<typeof tcpInfo> = null;
    // The peer's FIN comes after everything sent was received: the counts are final, and the socket still open.
    socket.once('end', () => (info = tcpInfo(socket)));
    socket.on('error', reject);
    socket.on('close', () => {
      clearTimeout(stop);
      resolve(info);
    });
    write();
  });
}

const sumTimes = (times: TcpTimes[]): TcpTimes => ({
  connections: times.length,
  busySeconds: times.reduce((a, t) => a + t.busySeconds, 0),
  receiveWindowLimitedSeconds: times.reduce((a, t) => a + t.receiveWindowLimitedSeconds, 0),
  sendBufferLimitedSeconds: times.reduce((a, t) => a + t.sendBufferLimitedSeconds, 0),
});

async function sendData(input: TcpChildInput): Promise<TcpChildResult> {
  const { bufferLength, duration } = input.params;
  const sockets = await openStreams(input);
  const socketBuffers = buffersOf(input, sockets);
  const buffer = Buffer.alloc(bufferLength, 0x5a);
  let calls = 0;
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  const endAt = t0 + duration * 1000;
  const perStream = await Promise.all(sockets.map((socket) => pump(socket, buffer, endAt, (n) => (calls += n))));
  const realSeconds = (performance.now() - t0) / 1000;
  const retransmits = perStream.every((i) => i !== null) ? perStream.reduce((a, i) => a + i!.retransmits, 0) : null;
  const times = perStream.map((i) => i?.times ?? null);
  const tcpTimes = times.every((t) => t !== null) ? sumTimes(times as TcpTimes[]) : undefined;
  // Every write the socket accepted reached the kernel before 'close'; bytes are what we handed over.
  return { figures: endFigures(calls * bufferLength, realSeconds, cpuSeconds(cpu), calls), intervals: [], retransmits, ...(tcpTimes ? { tcpTimes } : {}), ...socketBuffers };
}

/**
 * One request outstanding per connection, as netperf TCP_RR: write a request, read the whole
 * response, note the round trip, repeat until the duration is up. Resolves when the peer closed.
 */
function transact(socket: Socket, sizes: { requestSize: number; responseSize: number }, endAt: number, record: (sentAt: number, rtt: number) => void): Promise<void> {
  const request = Buffer.alloc(sizes.requestSize, 0x51);
  return new Promise((resolve, reject) => {
    let got = 0;
    let sentAt = 0;
    const next = () => {
      got = 0;
      sentAt = performance.now();
      socket.write(request);
    };
    socket.on('data', (chunk: Buffer) => {
      got += chunk.length;
      if (got < sizes.responseSize) return;
      const now = performance.now();
      record(sentAt, now - sentAt);
      if (now < endAt) next();
      else socket.end();
    });
    socket.on('error', reject);
    socket.on('close', () => resolve());
    next();
  });
}

async function request(input: TcpChildInput): Promise<TcpChildResult> {
  const sizes = input.params.rr!;
  const sockets = await openStreams(input);
  const socketBuffers = buffersOf(input, sockets);
  const idleSeconds = input.params.idleSeconds ?? 0;
  const idle: number[] = [];
  const loaded: number[] = [];
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  // The run's common start on this clock: the load starts idleSeconds after it whenever this end
  // got going, so an end that started late (a busy host) never counts loaded round trips as idle.
  const runStart = input.startAt !== undefined ? t0 + (input.startAt - Date.now()) : t0;
  // A transaction sent during the idle baseline counts as idle, every later one as loaded.
  const loadAt = runStart + idleSeconds * 1000;
  const record = (sentAt: number, rtt: number) => (sentAt < loadAt ? idle : loaded).push(rtt);
  await Promise.all(sockets.map((socket) => transact(socket, sizes, runStart + input.params.duration * 1000, record)));
  const end = performance.now();
  const realSeconds = (end - t0) / 1000;
  const transactions = idle.length + loaded.length;
  // No round trip is no figure: a zero would read as the best RTT there is.
  if (loaded.length === 0) throw new EngineFailure('no_data', 'no transaction completed under the load');
  // An end that came up after the idle baseline had ended has none: no idle figure, rather than 0 ms.
  const rr = rrFigures(sizes, loaded, (end - Math.max(t0, loadAt)) / 1000, idleSeconds > 0 && idle.length > 0 ? { rtts: idle, seconds: Math.max(0, loadAt - t0) / 1000 } : undefined);
  return { figures: endFigures(transactions * sizes.requestSize, realSeconds, cpuSeconds(cpu), transactions), intervals: [], rr, ...socketBuffers };
}

serveChild<TcpChildInput>((input, send) => (input.role === 'receiver' ? receive(input, send) : input.params.rr ? request(input) : sendData(input)));
