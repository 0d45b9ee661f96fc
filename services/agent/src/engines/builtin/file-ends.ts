/**
 * The builtin TCP stream's file ends (JobSpec.file, as iperf3's -F): a sender that sends a file
 * from its start and stops at its end, and a receiver that writes what it receives to a file in
 * blocks of bufferLength, reading from its socket only as fast as the file takes the data.
 */
import { EventEmitter } from 'node:events';
import { closeSync, constants, createReadStream, openSync, write } from 'node:fs';
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import { EngineFailure } from '../child-protocol.js';
import { tcpInfo } from './sockopt.js';

export interface FilePumped {
  bytes: number;
  calls: number;
  /** The file ended before the run did: what was sent is the whole file. */
  endedAtEof: boolean;
  info: ReturnType<typeof tcpInfo>;
}

/**
 * Sends the file at `path` on `socket` in reads of `blockBytes` until `endAt` or its end,
 * honouring backpressure; resolves when the peer has closed, with the connection's TCP_INFO.
 */
export function pumpFile(socket: Socket, path: string, blockBytes: number, endAt: number): Promise<FilePumped> {
  return new Promise((resolve, reject) => {
    let fd: number;
    try {
      fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW);
    } catch (error) {
      reject(new EngineFailure('file_io', `opening the source: ${(error as Error).message}`));
      return;
    }
    const source = createReadStream(path, { fd, highWaterMark: blockBytes });
    let bytes = 0;
    let calls = 0;
    let endedAtEof = false;
    let timeUp = false;
    const stop = setTimeout(() => {
      timeUp = true;
      source.destroy();
      socket.end();
    }, Math.max(0, endAt - performance.now()));
    source.on('data', (chunk: Buffer | string) => {
      calls += 1;
      bytes += chunk.length;
      if (!socket.write(chunk)) {
        source.pause();
        socket.once('drain', () => source.resume());
      }
    });
    source.on('end', () => {
      endedAtEof = true;
      clearTimeout(stop);
      socket.end();
    });
    source.on('error', (error) => {
      clearTimeout(stop);
      socket.destroy();
      reject(new EngineFailure('file_io', `reading the source: ${error.message}`));
    });
    let info: ReturnType<typeof tcpInfo> = null;
    // The peer's FIN comes after everything sent was received: the counts are final, and the socket still open.
    socket.once('end', () => (info = tcpInfo(socket)));
    socket.on('error', reject);
    socket.on('close', () => {
      clearTimeout(stop);
      source.destroy();
      // A receiver that closed before the file's end or the run's (its sink failed) took only part of it.
      if (!endedAtEof && !timeUp) reject(new EngineFailure('file_io', `the receiver closed the connection after ${bytes} bytes of the file, before its end`));
      else resolve({ bytes, calls, endedAtEof, info });
    });
  });
}

/** Bytes a sink holds unwritten before it asks its socket to pause, in blocks. */
const SINK_BLOCKS_QUEUED = 4;

/**
 * A receiver's file: what arrives is queued and written in blocks of `blockBytes` (the last one
 * shorter), one write at a time, with O_DSYNC when `dsync` (each write on the device before the
 * next). `push` says when the socket should pause; 'drain' when it may read again; 'error' when
 * a write failed (the file is closed, and nothing more is written).
 */
export class FileSink extends EventEmitter {
  private readonly queued: Buffer[] = [];
  private queuedBytes = 0;
  private writing = false;
  private ending = false;
  private failure: Error | null = null;
  private readonly done: Promise<void>;
  private settle!: (error?: Error) => void;
  written = 0;

  private constructor(private readonly fd: number, private readonly blockBytes: number) {
    super();
    this.done = new Promise((resolve, reject) => {
      this.settle = (error) => (error ? reject(error) : resolve());
    });
    // Its failure is reported by finish(): no unhandled rejection before then.
    this.done.catch(() => undefined);
  }

  /** Opens the sink's file, made empty by the agent (no symlink followed). */
  static open(path: string, blockBytes: number, dsync: boolean): FileSink {
    try {
      return new FileSink(openSync(path, constants.O_WRONLY | constants.O_TRUNC | constants.O_NOFOLLOW | (dsync ? constants.O_DSYNC : 0)), blockBytes);
    } catch (error) {
      throw new EngineFailure('file_io', `opening the sink: ${(error as Error).message}`);
    }
  }

  /** Queues a chunk; false when the caller should stop reading until 'drain'. */
  push(chunk: Buffer): boolean {
    this.queued.push(chunk);
    this.queuedBytes += chunk.length;
    this.next();
    return this.queuedBytes < SINK_BLOCKS_QUEUED * this.blockBytes;
  }

  /** Writes what is left, closes the file; resolves once everything is written, rejects with a write's failure. */
  finish(): Promise<void> {
    this.ending = true;
    this.next();
    return this.done;
  }

  private next(): void {
    if (this.writing || this.failure) return;
    if (this.queuedBytes === 0 || (this.queuedBytes < this.blockBytes && !this.ending)) {
      if (this.ending && this.queuedBytes === 0) this.close();
      return;
    }
    const all = Buffer.concat(this.queued, this.queuedBytes);
    const block = all.subarray(0, Math.min(this.blockBytes, all.length));
    const rest = all.subarray(block.length);
    this.queued.length = 0;
    if (rest.length > 0) this.queued.push(rest);
    this.queuedBytes = rest.length;
    this.writing = true;
    this.writeAll(block, () => {
      this.writing = false;
      if (this.queuedBytes < SINK_BLOCKS_QUEUED * this.blockBytes) this.emit('drain');
      this.next();
    });
  }

  /** One block to the file, a short write continued. */
  private writeAll(block: Buffer, then: () => void): void {
    write(this.fd, block, 0, block.length, null, (error, n) => {
      if (error) {
        this.failure = new EngineFailure('file_io', `writing the sink: ${error.message}`);
        this.close();
        // The receiver stops at once: a sink that cannot take the data must not read more of it.
        this.emit('error', this.failure);
        return;
      }
      this.written += n;
      if (n < block.length) this.writeAll(block.subarray(n), then);
      else then();
    });
  }

  private close(): void {
    try {
      closeSync(this.fd);
    } catch {
      // closed already
    }
    this.settle(this.failure ?? undefined);
    this.emit('drain');
  }
}
