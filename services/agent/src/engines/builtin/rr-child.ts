/**
 * The builtin request/response process (netperf TCP_RR): one end of one leg of an rr flow. The
 * requesting end keeps one request outstanding per connection and times each; the responding
 * end is the stream's receiver, answering every complete request.
 */
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { endFigures, rrFigures } from '@niclab/shared/domain/figures';
import type { RrMeasured } from '@niclab/shared/domain/test-kinds/rr/measured';
import { cpuSeconds, serveChild } from './child-main.js';
import { EngineFailure } from '../child-protocol.js';
import { buffersOf, openStreams, receive, type TcpChildInput, type TcpChildResult } from './tcp-ends.js';

/** The requesting end's result: the stream's counts, and its round trips. */
export type RrChildResult = TcpChildResult & { measured?: RrMeasured };

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

async function request(input: TcpChildInput): Promise<RrChildResult> {
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
  return { figures: endFigures(transactions * sizes.requestSize, realSeconds, cpuSeconds(cpu), transactions, false), intervals: [], measured: { rr }, ...socketBuffers };
}

serveChild<TcpChildInput>((input, send) => (input.role === 'receiver' ? receive(input, send, (socket) => responder(socket, input.params.rr!)) : request(input)));
