/**
 * SO_SNDBUF/SO_RCVBUF (for TCP sockets and, by descriptor, the batched UDP one) and TCP_INFO. Node has neither for TCP, so this calls
 * libc's setsockopt/getsockopt through koffi, an FFI whose prebuilt binary comes as an npm
 * package (no compiler, no install script). Loaded on first use, so the rest of the engine
 * works on a host where it cannot load.
 */
import { createRequire } from 'node:module';
import type { Server, Socket } from 'node:net';

const SOL_SOCKET = 1;
const SO_SNDBUF = 7;
const SO_RCVBUF = 8;
const IPPROTO_TCP = 6;
const TCP_INFO = 11;
/** struct tcp_info (linux/tcp.h): offsets of tcpi_total_retrans and of the chronograph (tcpi_busy_time, Linux 4.10+), in µs. */
const TCPI_TOTAL_RETRANS = 100;
const TCPI_BUSY_TIME = 168;
const TCPI_RWND_LIMITED = 176;
const TCPI_SNDBUF_LIMITED = 184;
const TCP_INFO_BYTES = 192;

interface Libc {
  setsockopt(fd: number, level: number, name: number, value: Buffer, length: number): number;
  getsockopt(fd: number, level: number, name: number, value: Buffer, length: number[]): number;
}

let libc: Libc | Error | undefined;

function load(): Libc | Error {
  if (libc) return libc;
  try {
    const koffi = createRequire(import.meta.url)('koffi') as typeof import('koffi');
    const lib = koffi.load('libc.so.6');
    libc = {
      setsockopt: lib.func('int setsockopt(int, int, int, const void *, uint32_t)') as Libc['setsockopt'],
      getsockopt: lib.func('int getsockopt(int, int, int, _Out_ void *, _Inout_ uint32_t *)') as Libc['getsockopt'],
    };
  } catch (error) {
    libc = new Error(`cannot set TCP socket buffers on this host: ${(error as Error).message}`);
  }
  return libc;
}

/** Why TCP socket buffers cannot be set here, or null when they can. */
export function tcpSocketBufferSupport(): string | null {
  const lib = load();
  return lib instanceof Error ? lib.message : null;
}

function fdOf(handle: Socket | Server): number {
  const fd = (handle as unknown as { _handle?: { fd?: number } })._handle?.fd;
  if (typeof fd !== 'number' || fd < 0) throw new Error('the socket has no file descriptor yet');
  return fd;
}

function lib(): Libc {
  const loaded = load();
  if (loaded instanceof Error) throw loaded;
  return loaded;
}

/**
 * Sets both buffers to `bytes`, as nttcp -w and iperf3 -w do. On a listening socket the values
 * pass to every accepted connection and size the window scale it offers. The kernel doubles
 * the value and caps it at net.core.[rw]mem_max; readSocketBuffers tells what took effect.
 */
export function setSocketBuffers(handle: Socket | Server, bytes: number): void {
  const fd = fdOf(handle);
  setSocketBuffer(fd, 'send', bytes);
  setSocketBuffer(fd, 'receive', bytes);
}

/** The effective SO_SNDBUF/SO_RCVBUF, read back from the kernel. */
export function readSocketBuffers(handle: Socket | Server): { sendBytes: number; receiveBytes: number } {
  return readSocketBuffersOf(fdOf(handle));
}

/** SO_SNDBUF or SO_RCVBUF of any socket by its descriptor (the batched UDP socket's too). */
export function setSocketBuffer(fd: number, which: 'send' | 'receive', bytes: number): void {
  const value = Buffer.alloc(4);
  value.writeInt32LE(bytes);
  if (lib().setsockopt(fd, SOL_SOCKET, which === 'send' ? SO_SNDBUF : SO_RCVBUF, value, 4) !== 0) throw new Error(`setsockopt(${which === 'send' ? 'SO_SNDBUF' : 'SO_RCVBUF'}, ${bytes}) failed`);
}

/** The effective SO_SNDBUF/SO_RCVBUF of a socket by its descriptor. */
export function readSocketBuffersOf(fd: number): { sendBytes: number; receiveBytes: number } {
  const { getsockopt } = lib();
  const read = (name: number) => {
    const value = Buffer.alloc(4);
    if (getsockopt(fd, SOL_SOCKET, name, value, [4]) !== 0) throw new Error('getsockopt failed');
    return value.readInt32LE();
  };
  return { sendBytes: read(SO_SNDBUF), receiveBytes: read(SO_RCVBUF) };
}

/**
 * A sending connection's TCP_INFO once the peer has acknowledged all: the segments it
 * retransmitted (tcpi_total_retrans) and its chronograph, the seconds it had data to send
 * (tcpi_busy_time) and of those the seconds the receiver's window (tcpi_rwnd_limited) or its
 * own send buffer (tcpi_sndbuf_limited) held it back; `times` null on a kernel before 4.10.
 * Null where TCP_INFO cannot be read.
 */
export function tcpInfo(socket: Socket): { retransmits: number; times: TcpTimes | null } | null {
  const loaded = load();
  if (loaded instanceof Error) return null;
  try {
    const info = Buffer.alloc(TCP_INFO_BYTES);
    const length = [TCP_INFO_BYTES];
    if (loaded.getsockopt(fdOf(socket), IPPROTO_TCP, TCP_INFO, info, length) !== 0 || length[0]! < TCPI_TOTAL_RETRANS + 4) return null;
    const seconds = (offset: number) => Number(info.readBigUInt64LE(offset)) / 1e6;
    const times = length[0]! >= TCP_INFO_BYTES ? { connections: 1, busySeconds: seconds(TCPI_BUSY_TIME), receiveWindowLimitedSeconds: seconds(TCPI_RWND_LIMITED), sendBufferLimitedSeconds: seconds(TCPI_SNDBUF_LIMITED) } : null;
    return { retransmits: info.readUInt32LE(TCPI_TOTAL_RETRANS), times };
  } catch {
    return null;
  }
}

/** The chronograph of TCP_INFO, in seconds, summed over a sender's connections. */
export interface TcpTimes {
  connections: number;
  busySeconds: number;
  receiveWindowLimitedSeconds: number;
  sendBufferLimitedSeconds: number;
}
