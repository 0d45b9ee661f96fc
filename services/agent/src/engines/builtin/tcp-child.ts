/**
 * The builtin TCP engine's process: one end of one flow. Started by the agent with fork();
 * gets its input as the first IPC message, answers `ready` (receiver) and one `result`.
 */
import { once } from 'node:events';
import { connect, createServer, type Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { endFigures } from '@niclab/shared/figures';
import type { EndFigures, Interval } from '@niclab/shared/contract';
import type { EngineParams } from '@niclab/shared/task';
import { cpuSeconds, serveChild, type Send } from './child-main.js';
import { IntervalSampler } from './interval-sampler.js';

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
    const sampler = new IntervalSampler(interval, () => bytes);
    const server = createServer({ noDelay }, (socket: Socket) => {
      accepted += 1;
      // Exactly `streams` connections belong to this flow; stop listening once they are here.
      if (accepted >= streams) server.close();
      socket.on('data', (chunk: Buffer) => {
        if (firstAt === 0) {
          firstAt = performance.now();
          cpu = process.cpuUsage();
          sampler.start(firstAt);
        }
        bytes += chunk.length;
        calls += 1;
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
          reject(Object.assign(new Error('the sender closed without sending any data'), { code: 'no_data' }));
          return;
        }
        resolve({ figures: endFigures(bytes, (lastAt - firstAt) / 1000, cpuSeconds(cpu!), calls), intervals });
      });
    });
    server.on('error', reject);
    server.listen({ host: input.address, port: 0 }, () => {
      const address = server.address();
      send({ type: 'ready', port: typeof address === 'object' && address ? address.port : 0 });
    });
  });
}

async function openStream(input: TcpChildInput): Promise<Socket> {
  const socket = connect({ host: input.peer!.address, port: input.peer!.port, localAddress: input.address, noDelay: input.params.noDelay });
  await once(socket, 'connect');
  return socket;
}

/** Writes `buffer` until `endAt`, honouring backpressure; resolves when the peer has closed. */
function pump(socket: Socket, buffer: Buffer, endAt: number, count: (calls: number) => void): Promise<void> {
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
    socket.on('error', reject);
    socket.on('close', () => {
      clearTimeout(stop);
      resolve();
    });
    write();
  });
}

async function sendData(input: TcpChildInput): Promise<TcpChildResult> {
  const { streams, bufferLength, duration } = input.params;
  const sockets = await Promise.all(Array.from({ length: streams }, () => openStream(input)));
  const wait = (input.startAt ?? 0) - Date.now();
  if (wait > 0) await new Promise((r) => setTimeout(r, wait));
  const buffer = Buffer.alloc(bufferLength, 0x5a);
  let calls = 0;
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  const endAt = t0 + duration * 1000;
  await Promise.all(sockets.map((socket) => pump(socket, buffer, endAt, (n) => (calls += n))));
  const realSeconds = (performance.now() - t0) / 1000;
  // Every write the socket accepted reached the kernel before 'close'; bytes are what we handed over.
  return { figures: endFigures(calls * bufferLength, realSeconds, cpuSeconds(cpu), calls), intervals: [] };
}

serveChild<TcpChildInput>((input, send) => (input.role === 'receiver' ? receive(input, send) : sendData(input)));
