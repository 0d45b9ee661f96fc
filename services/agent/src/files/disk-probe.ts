/**
 * An end's plain disk rate, measured by its agent alone (no network) in the directory and with
 * the I/O mode of its transfer: the source file read from its start, or a temporary file written,
 * in blocks of the job's bufferLength, as dd would (`dd if=FILE of=/dev/null bs=L`, `dd
 * if=/dev/zero of=FILE bs=L oflag=dsync`).
 */
import { randomBytes } from 'node:crypto';
import { constants } from 'node:fs';
import { open } from 'node:fs/promises';
import { performance } from 'node:perf_hooks';
import type { DiskRate } from '@niclab/shared/domain/contract';

/** A probe moves at most this much: a buffered write of seconds would fill memory and the file system for a figure of the cache. */
export const PROBE_MAX_BYTES = 256 * 1024 * 1024;

export interface ProbeOptions {
  blockBytes: number;
  seconds: number;
  signal: AbortSignal;
}

const rate = (bytes: number, t0: number): DiskRate => {
  const seconds = (performance.now() - t0) / 1000;
  return { bytes, seconds, bitsPerSecond: seconds > 0 ? (bytes * 8) / seconds : 0 };
};

/** Reads `path` from its start until `seconds` have passed, PROBE_MAX_BYTES were read or the file ends. */
export async function readRate(path: string, { blockBytes, seconds, signal }: ProbeOptions): Promise<DiskRate> {
  const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    const buffer = Buffer.allocUnsafe(blockBytes);
    let bytes = 0;
    const t0 = performance.now();
    const endAt = t0 + seconds * 1000;
    for (;;) {
      signal.throwIfAborted();
      const { bytesRead } = await handle.read(buffer, 0, blockBytes, bytes);
      if (bytesRead === 0) break;
      bytes += bytesRead;
      if (performance.now() >= endAt || bytes >= PROBE_MAX_BYTES) break;
    }
    return rate(bytes, t0);
  } finally {
    await handle.close();
  }
}

/**
 * Writes random blocks (a file system that compresses would make zeros fast) to `path`, an empty
 * file of the end's own, until `seconds` have passed or PROBE_MAX_BYTES were written; `dsync`
 * opens it O_DSYNC, so each write is on the device when it returns.
 */
export async function writeRate(path: string, dsync: boolean, { blockBytes, seconds, signal }: ProbeOptions): Promise<DiskRate> {
  const handle = await open(path, constants.O_WRONLY | constants.O_TRUNC | constants.O_NOFOLLOW | (dsync ? constants.O_DSYNC : 0));
  try {
    const block = randomBytes(blockBytes);
    let bytes = 0;
    const t0 = performance.now();
    const endAt = t0 + seconds * 1000;
    for (;;) {
      signal.throwIfAborted();
      const { bytesWritten } = await handle.write(block, 0, blockBytes);
      bytes += bytesWritten;
      if (performance.now() >= endAt || bytes >= PROBE_MAX_BYTES) break;
    }
    return rate(bytes, t0);
  } finally {
    await handle.close();
  }
}
