/**
 * Both builtin TCP kinds' ends (the stream's tcp-child, rr's rr-child): the receiving end that
 * counts what arrives, and the sending end's connections.
 */
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { endFigures } from '@niclab/shared/domain/figures';
import type { EndFigures, Interval } from '@niclab/shared/domain/contract';
import type { EngineParams } from '@niclab/shared/domain/task';
import { cpuSeconds, type Send } from './child-main.js';
import { EngineFailure } from '../child-protocol.js';
import { IntervalSampler } from './interval-sampler.js';
import { FileSink } from './file-ends.js';
import type { EngineFile } from '../engine.js';
import { readSocketBuffers, setSocketBuffers, type TcpTimes } from './sockopt.js';
import { RawTcpListener, rawTcp } from './tcp-raw.js';

export interface TcpChildInput {
  role: 'sender' | 'receiver';
  params: EngineParams;
  /** Local address to bind to (the task's interface). */
  address: string;
  peer?: { address: string; port: number };
  /** Epoch ms at which the sender starts writing (the run's common start instant). */
  startAt?: number;
  /** A file point's end: the sender sends its source file, the receiver writes its sink (EngineFile). */
  file?: EngineFile;
}

export interface TcpChildResult {
  figures: EndFigures;
  intervals: Interval[];
  /** Read back from the first connection, when the job set socketBuffer. */
  socketBuffers?: { sendBytes: number; receiveBytes: number };
  /** The sender's TCP retransmits over all its connections (null where TCP_INFO cannot be read). */
  retransmits?: number | null;
  /** The sender's TCP_INFO chronograph summed over its connections (absent where the kernel has none). */
  tcpTimes?: TcpTimes;
}

/**
 * The receiving end: listens, accepts the flow's `streams` connections and counts what arrives
 * until every one has closed. `answer`, per connection, is told each chunk's size (rr's
 * responder writes its responses from it).
 */
export function receive(input: TcpChildInput, send: Send, answerOf?: (socket: Socket) => (bytes: number) => void): Promise<TcpChildResult> {
  // A stream into memory reads its own descriptors (tcp-raw.ts); rr's responder and a file sink keep Node's sockets.
  const raw = answerOf || input.file?.sink ? null : rawTcp();
  if (raw && !(raw instanceof Error)) return receiveRaw(raw, input, send);
  const { streams, noDelay, interval, bufferLength } = input.params;
  return new Promise((resolve, reject) => {
    let sink: FileSink | undefined;
    try {
      sink = input.file?.sink ? FileSink.open(input.file.sink, bufferLength, input.file.dsync) : undefined;
    } catch (error) {
      reject(error);
      return;
    }
    let bytes = 0;
    let calls = 0;
    let closed = 0;
    let accepted = 0;
    let firstAt = 0;
    let lastAt = 0;
    let cpu: NodeJS.CpuUsage | undefined;
    let socketBuffers: TcpChildResult['socketBuffers'];
    const sampler = new IntervalSampler(interval, () => bytes, (sample) => send({ type: 'interval', interval: sample }));
    const sockets = new Set<Socket>();
    const server = createServer({ noDelay }, (socket: Socket) => {
      sockets.add(socket);
      accepted += 1;
      // Exactly `streams` connections belong to this flow; stop listening once they are here.
      if (accepted >= streams) server.close();
      if (input.params.socketBuffer !== undefined) socketBuffers ??= readSocketBuffers(socket);
      const answer = answerOf?.(socket);
      socket.on('data', (chunk: Buffer) => {
        if (firstAt === 0) {
          firstAt = performance.now();
          cpu = process.cpuUsage();
          sampler.start(firstAt);
        }
        bytes += chunk.length;
        calls += 1;
        answer?.(chunk.length);
        // A sink reads from the socket only as fast as its file takes the data: TCP holds back the rest.
        if (sink && !sink.push(chunk)) {
          socket.pause();
          sink.once('drain', () => socket.resume());
        }
      });
      socket.on('end', () => {
        lastAt = performance.now();
        socket.end();
      });
      socket.on('error', reject);
      socket.on('close', () => {
        closed += 1;
        if (closed < streams) return;
        if (firstAt === 0) {
          sampler.finish(lastAt);
          reject(new EngineFailure('no_data', 'the sender closed without sending any data'));
          return;
        }
        // A sink's end is its last write's: the data are where the run says they go.
        void (sink ? sink.finish().then(() => (lastAt = performance.now())) : Promise.resolve()).then(() => {
          const intervals = sampler.finish(lastAt);
          resolve({ figures: { ...endFigures(bytes, (lastAt - firstAt) / 1000, cpuSeconds(cpu!), calls), readPath: 'node' }, intervals, ...(socketBuffers ? { socketBuffers } : {}) });
        }, reject);
      });
    });
    server.on('error', reject);
    // A sink that failed (its file system full) ends the end: its connections reset, not left paused.
    sink?.on('error', (error: Error) => {
      server.close();
      for (const socket of sockets) socket.destroy();
      sampler.finish(performance.now());
      reject(error);
    });
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

/**
 * The receiving end on its own sockets (tcp-raw.ts): the same counts as `receive`'s (every byte
 * read, each read a call, from the first byte to the last connection's end), read in big
 * reads into one Buffer.
 */
function receiveRaw(lib: Exclude<ReturnType<typeof rawTcp>, Error>, input: TcpChildInput, send: Send): Promise<TcpChildResult> {
  const { streams, interval } = input.params;
  return new Promise((resolve, reject) => {
    let listener: RawTcpListener;
    try {
      listener = RawTcpListener.open(lib, input.address, input.params.socketBuffer);
    } catch (error) {
      reject(error);
      return;
    }
    let bytes = 0;
    let calls = 0;
    let ended = 0;
    let firstAt = 0;
    let cpu: NodeJS.CpuUsage | undefined;
    let socketBuffers: TcpChildResult['socketBuffers'];
    const sampler = new IntervalSampler(interval, () => bytes, (sample) => send({ type: 'interval', interval: sample }));
    const fail = (error: Error) => {
      listener.close();
      sampler.finish(performance.now());
      reject(error);
    };
    listener.serve(streams, {
      onAccept: (fd) => {
        if (input.params.socketBuffer !== undefined) socketBuffers ??= listener.buffers(fd);
      },
      onData: (n) => {
        if (firstAt === 0) {
          firstAt = performance.now();
          cpu = process.cpuUsage();
          sampler.start(firstAt);
        }
        bytes += n;
        calls += 1;
      },
      onEnd: () => {
        ended += 1;
        if (ended < streams) return;
        const lastAt = performance.now();
        listener.close();
        if (firstAt === 0) {
          sampler.finish(lastAt);
          reject(new EngineFailure('no_data', 'the sender closed without sending any data'));
          return;
        }
        const intervals = sampler.finish(lastAt);
        resolve({ figures: { ...endFigures(bytes, (lastAt - firstAt) / 1000, cpuSeconds(cpu!), calls), readPath: 'recv' }, intervals, ...(socketBuffers ? { socketBuffers } : {}) });
      },
      onError: fail,
    });
    send({ type: 'ready', port: listener.port() });
  });
}

async function openStream(input: TcpChildInput): Promise<Socket> {
  const socket = connect({ host: input.peer!.address, port: input.peer!.port, localAddress: input.address, noDelay: input.params.noDelay });
  await once(socket, 'connect');
  if (input.params.socketBuffer !== undefined) setSocketBuffers(socket, input.params.socketBuffer);
  return socket;
}

/** The sending end's `streams` connections, opened, then held until the run's common start. */
export async function openStreams(input: TcpChildInput): Promise<Socket[]> {
  const sockets = await Promise.all(Array.from({ length: input.params.streams }, () => openStream(input)));
  const wait = (input.startAt ?? 0) - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  return sockets;
}

/** The first connection's socket buffers as read back, when the job set socketBuffer. */
export function buffersOf(input: TcpChildInput, sockets: Socket[]): Pick<TcpChildResult, 'socketBuffers'> {
  return input.params.socketBuffer !== undefined && sockets[0] ? { socketBuffers: readSocketBuffers(sockets[0]) } : {};
}

