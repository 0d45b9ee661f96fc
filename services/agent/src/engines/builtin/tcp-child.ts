/**
 * The builtin TCP stream's process (nttcp): one end of one leg. Started by the agent with
 * fork(); gets its input as the first IPC message, answers `ready` (receiver) and one `result`.
 */
import { randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { endFigures } from '@niclab/shared/domain/figures';
import { cpuSeconds, serveChild } from './child-main.js';
import { tcpInfo, type TcpTimes } from './sockopt.js';
import { buffersOf, openStreams, receive, type TcpChildInput, type TcpChildResult } from './tcp-ends.js';
import { pumpFile } from './file-ends.js';

export type { TcpChildInput, TcpChildResult } from './tcp-ends.js';

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
  // Random bytes, as iperf3 sends: a file sink on a file system that compresses would take repeated ones faster.
  const buffer = randomBytes(bufferLength);
  let calls = 0;
  let bytes: number | null = null;
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  const endAt = t0 + duration * 1000;
  const source = input.file?.source;
  // A file source is one stream (the contract's rule): its bytes are what it read, to the file's end at most.
  const perStream = source
    ? await pumpFile(sockets[0]!, source, bufferLength, endAt).then((sent) => ((calls = sent.calls), (bytes = sent.bytes), [sent.info]))
    : await Promise.all(sockets.map((socket) => pump(socket, buffer, endAt, (n) => (calls += n))));
  const realSeconds = (performance.now() - t0) / 1000;
  const retransmits = perStream.every((i) => i !== null) ? perStream.reduce((a, i) => a + i!.retransmits, 0) : null;
  const times = perStream.map((i) => i?.times ?? null);
  const tcpTimes = times.every((t) => t !== null) ? sumTimes(times as TcpTimes[]) : undefined;
  // Every write the socket accepted reached the kernel before 'close'; bytes are what we handed over.
  return { figures: endFigures(bytes ?? calls * bufferLength, realSeconds, cpuSeconds(cpu), calls), intervals: [], retransmits, ...(tcpTimes ? { tcpTimes } : {}), ...socketBuffers };
}

serveChild<TcpChildInput>((input, send) => (input.role === 'receiver' ? receive(input, send) : sendData(input)));
