/**
 * A UDP socket that sends and receives many datagrams per system call (sendmmsg, recvmmsg),
 * through libc via koffi, as sockopt.ts does for TCP. Node's dgram costs a call, a Buffer and
 * an event per datagram; at 50k pps that starved the receiver until its socket overflowed.
 * Here a batch lives in one preallocated Buffer: nothing is allocated per datagram. Linux on
 * a 64-bit CPU only (the struct layouts below); `BatchSocket.open` returns an Error elsewhere,
 * and the engine falls back to dgram. A socket opened with `timestamps` has the kernel stamp
 * each datagram as it arrives (SO_TIMESTAMPNS), read from recvmmsg's control messages: a
 * datagram's arrival is its own, not the time its batch was read.
 */
import { createRequire } from 'node:module';
import { isIPv6 } from 'node:net';
import { readSocketBuffersOf, setSocketBuffer } from './sockopt.js';

export const AF_INET = 2;
export const AF_INET6 = 10;
const SOCK_DGRAM = 2;
export const SOCK_NONBLOCK = 0o4000;
export const SOCK_CLOEXEC = 0o2000000;
export const MSG_DONTWAIT = 0x40;
const MSG_ERRQUEUE = 0x2000;
export const EAGAIN = 11;
const SOL_SOCKET = 1;
/** SO_TIMESTAMPNS (asm-generic, as x86-64 and arm64 use): a struct timespec of two 64-bit longs; also its cmsg type. */
const SO_TIMESTAMPNS = 35;
/** SO_TIMESTAMPING (and SCM_TIMESTAMPING): struct scm_timestamping, three timespecs, the first the software one. */
const SO_TIMESTAMPING = 37;
/** SOF_TIMESTAMPING_TX_SCHED | SOFTWARE | OPT_ID | OPT_TSONLY: a send's time as it enters the packet scheduler (before any qdisc queue), keyed by a per-datagram counter, without the payload. */
const SEND_TIMESTAMPING = (1 << 8) | (1 << 4) | (1 << 7) | (1 << 11);
/** IP_RECVERR and IPV6_RECVERR carry a struct sock_extended_err: errno, origin (4: timestamping), type, code, pad, info (1: SCM_TSTAMP_SCHED), data (the key). */
const SOL_IP = 0;
const IP_RECVERR = 11;
const SOL_IPV6 = 41;
const IPV6_RECVERR = 25;
const SO_EE_ORIGIN_TIMESTAMPING = 4;
const SCM_TSTAMP_SCHED = 1;
const CLOCK_REALTIME = 0;
const CLOCK_MONOTONIC = 1;
/** struct mmsghdr: a struct msghdr (56 bytes: name, namelen, iov, iovlen, control, controllen, flags) and msg_len. */
const MMSGHDR = 64;
const MSG_NAME = 0;
const MSG_NAMELEN = 8;
const MSG_IOV = 16;
const MSG_IOVLEN = 24;
const MSG_CONTROL = 32;
const MSG_CONTROLLEN = 40;
const MSG_LEN = 56;
/** struct iovec: base, len. */
const IOVEC = 16;
/** A sockaddr_in6, the larger of the two. */
const NAME_BYTES = 28;
/** Control space per message: a cmsghdr (16) and its timespec (16), with room for one more. */
const CONTROL_BYTES = 64;
/** struct cmsghdr: len (size_t), level, type; data after 16 bytes. */
const CMSG_DATA = 16;

export interface Libc {
  socket(domain: number, type: number, protocol: number): number;
  bind(fd: number, address: Buffer, length: number): number;
  connect(fd: number, address: Buffer, length: number): number;
  getsockname(fd: number, address: Buffer, length: number[]): number;
  inet_pton(family: number, text: string, out: Buffer): number;
  recvmmsg(fd: number, messages: Buffer, count: number, flags: number, timeout: null): number;
  setsockopt(fd: number, level: number, name: number, value: Buffer, length: number): number;
  clock_gettime(clock: number, out: Buffer): number;
  sendmmsg(fd: number, messages: Buffer, count: number, flags: number): number;
  close(fd: number): number;
  /** The raw TCP receiver's (tcp-raw.ts). */
  listen(fd: number, backlog: number): number;
  accept4(fd: number, address: null, length: null, flags: number): number;
  recv(fd: number, buffer: Buffer, length: number, flags: number): number;
}

export interface Koffi {
  errno(): number;
  address(value: unknown): bigint;
  node: { poll(fd: number, options: { readable: boolean }, callback: () => void): { stop(): void; close(): void } };
}

let loaded: { libc: Libc; koffi: Koffi } | Error | undefined;

/** libc through koffi, loaded once; an Error where it cannot load (no prebuilt koffi, another OS or CPU). */
export function load(): { libc: Libc; koffi: Koffi } | Error {
  if (loaded) return loaded;
  try {
    if (process.platform !== 'linux' || !['x64', 'arm64'].includes(process.arch)) throw new Error(`struct layouts known for 64-bit Linux only, not ${process.platform}/${process.arch}`);
    const koffi = createRequire(import.meta.url)('koffi') as typeof import('koffi');
    const lib = koffi.load('libc.so.6');
    const libc: Libc = {
      socket: lib.func('int socket(int, int, int)'),
      bind: lib.func('int bind(int, const void *, uint32_t)'),
      connect: lib.func('int connect(int, const void *, uint32_t)'),
      getsockname: lib.func('int getsockname(int, _Out_ void *, _Inout_ uint32_t *)'),
      inet_pton: lib.func('int inet_pton(int, const char *, _Out_ void *)'),
      recvmmsg: lib.func('int recvmmsg(int, void *, unsigned int, int, void *)'),
      setsockopt: lib.func('int setsockopt(int, int, int, const void *, uint32_t)'),
      clock_gettime: lib.func('int clock_gettime(int, _Out_ void *)'),
      sendmmsg: lib.func('int sendmmsg(int, void *, unsigned int, int)'),
      close: lib.func('int close(int)'),
      listen: lib.func('int listen(int, int)'),
      accept4: lib.func('int accept4(int, void *, void *, int)'),
      recv: lib.func('intptr_t recv(int, void *, size_t, int)'),
    } as unknown as Libc;
    loaded = { libc, koffi: koffi as unknown as Koffi };
  } catch (error) {
    loaded = new Error(`no batched UDP on this host: ${(error as Error).message}`);
  }
  return loaded;
}

const clocks = { before: Buffer.alloc(16), realtime: Buffer.alloc(16), after: Buffer.alloc(16) };
const nanoseconds = (timespec: Buffer) => timespec.readBigInt64LE(0) * 1_000_000_000n + timespec.readBigInt64LE(8);

/**
 * CLOCK_REALTIME less CLOCK_MONOTONIC (process.hrtime's clock), ns: the realtime clock read in
 * libc between two monotonic readings, nothing else between them, the closest pair of a few
 * (within tens of ns; the same through process.hrtime was a few µs off). Null where libc
 * cannot be loaded.
 */
export function realtimeLessMonotonic(): bigint | null {
  const lib = load();
  if (lib instanceof Error) return null;
  const { clock_gettime } = lib.libc;
  let best: { spread: bigint; offset: bigint } | null = null;
  for (let i = 0; i < 3; i++) {
    clock_gettime(CLOCK_MONOTONIC, clocks.before);
    clock_gettime(CLOCK_REALTIME, clocks.realtime);
    clock_gettime(CLOCK_MONOTONIC, clocks.after);
    const [before, realtime, after] = [nanoseconds(clocks.before), nanoseconds(clocks.realtime), nanoseconds(clocks.after)];
    if (!best || after - before < best.spread) best = { spread: after - before, offset: realtime - (before + after) / 2n };
  }
  return best!.offset;
}

/** A sockaddr_in or sockaddr_in6 for address:port. */
export function sockaddr(libc: Libc, address: string, port: number): Buffer {
  const v6 = isIPv6(address);
  const out = Buffer.alloc(v6 ? 28 : 16);
  out.writeUInt16LE(v6 ? AF_INET6 : AF_INET, 0);
  out.writeUInt16BE(port, 2);
  if (libc.inet_pton(v6 ? AF_INET6 : AF_INET, address, out.subarray(v6 ? 8 : 4)) !== 1) throw new Error(`not an address: ${address}`);
  return out;
}

/** What a batch carries beside the data: each message's peer address (unconnected sockets), its control messages (timestamps) and their room. */
export interface BatchOptions {
  names?: boolean;
  control?: boolean;
  controlBytes?: number;
}

/**
 * `count` slots of `slotBytes` each in one Buffer, and the mmsghdr array whose iovecs point at
 * them. The Buffers are kept here, so the addresses stay valid as long as the batch lives.
 */
export class Batch {
  readonly data: Buffer;
  readonly headers: Buffer;
  private readonly iovecs: Buffer;
  private readonly names: Buffer | null;
  private readonly control: Buffer | null;
  private readonly controlBytes: number;

  constructor(koffi: Koffi, readonly count: number, readonly slotBytes: number, options: BatchOptions = {}) {
    this.data = Buffer.alloc(count * slotBytes);
    this.iovecs = Buffer.alloc(count * IOVEC);
    this.headers = Buffer.alloc(count * MMSGHDR);
    this.names = options.names ? Buffer.alloc(count * NAME_BYTES) : null;
    this.controlBytes = options.controlBytes ?? CONTROL_BYTES;
    this.control = options.control ? Buffer.alloc(count * this.controlBytes) : null;
    const data = koffi.address(this.data);
    const iovecs = koffi.address(this.iovecs);
    const names = this.names ? koffi.address(this.names) : 0n;
    const control = this.control ? koffi.address(this.control) : 0n;
    for (let i = 0; i < count; i++) {
      this.iovecs.writeBigUInt64LE(data + BigInt(i * slotBytes), i * IOVEC);
      this.iovecs.writeBigUInt64LE(BigInt(slotBytes), i * IOVEC + 8);
      this.headers.writeBigUInt64LE(iovecs + BigInt(i * IOVEC), i * MMSGHDR + MSG_IOV);
      this.headers.writeBigUInt64LE(1n, i * MMSGHDR + MSG_IOVLEN);
      if (this.names) this.headers.writeBigUInt64LE(names + BigInt(i * NAME_BYTES), i * MMSGHDR + MSG_NAME);
      if (this.control) this.headers.writeBigUInt64LE(control + BigInt(i * this.controlBytes), i * MMSGHDR + MSG_CONTROL);
    }
    this.rearm(count);
  }

  /** Before a receive: the kernel wrote the lengths of what it filled in; give the first `count` their whole space back. */
  rearm(count: number): void {
    if (!this.names && !this.control) return;
    for (let i = 0; i < count; i++) {
      if (this.names) this.headers.writeUInt32LE(NAME_BYTES, i * MMSGHDR + MSG_NAMELEN);
      if (this.control) this.headers.writeBigUInt64LE(BigInt(this.controlBytes), i * MMSGHDR + MSG_CONTROLLEN);
    }
  }

  /** The length of message i as recvmmsg wrote it. */
  length(i: number): number {
    return this.headers.readUInt32LE(i * MMSGHDR + MSG_LEN);
  }

  /** Sends of message i carry `bytes` of its slot (a reply as long as what came). */
  setLength(i: number, bytes: number): void {
    this.iovecs.writeBigUInt64LE(BigInt(bytes), i * IOVEC + 8);
  }

  /** Message j of this batch goes where message i of `from` came from (its sockaddr, copied). */
  addressFrom(j: number, from: Batch, i: number): void {
    if (!this.names || !from.names) throw new Error('a batch without addresses');
    from.names.copy(this.names, j * NAME_BYTES, i * NAME_BYTES, (i + 1) * NAME_BYTES);
    this.headers.writeUInt32LE(from.headers.readUInt32LE(i * MMSGHDR + MSG_NAMELEN), j * MMSGHDR + MSG_NAMELEN);
  }

  /** Where the data of message i's control message `level`/`type` starts in `control`, at least `bytes` long; -1 when it has none. */
  private cmsg(i: number, level: number, type: number, bytes: number): number {
    const control = this.control;
    if (!control) return -1;
    const base = i * this.controlBytes;
    const length = Math.min(this.headers.readUInt32LE(i * MMSGHDR + MSG_CONTROLLEN), this.controlBytes);
    for (let at = 0; at + CMSG_DATA <= length; ) {
      const cmsgLength = control.readUInt32LE(base + at);
      if (cmsgLength < CMSG_DATA || at + cmsgLength > length) return -1;
      if (control.readInt32LE(base + at + 8) === level && control.readInt32LE(base + at + 12) === type && cmsgLength >= CMSG_DATA + bytes) return base + at + CMSG_DATA;
      at += (cmsgLength + 7) & ~7;
    }
    return -1;
  }

  /** A struct timespec at `at` in the control space into `out`: tv_sec below 2^53 and tv_nsec below 1e9 as two 32-bit halves, no BigInt. */
  private timespec(at: number, out: { seconds: number; nanoseconds: number }): boolean {
    const control = this.control!;
    out.seconds = control.readUInt32LE(at) + control.readUInt32LE(at + 4) * 2 ** 32;
    out.nanoseconds = control.readUInt32LE(at + 8);
    return out.seconds > 0 || out.nanoseconds > 0;
  }

  /**
   * The kernel's receive timestamp of message i (SO_TIMESTAMPNS, CLOCK_REALTIME) as seconds and
   * nanoseconds into `out`; false when it carried none. Nothing is allocated.
   */
  timestamp(i: number, out: { seconds: number; nanoseconds: number }): boolean {
    const at = this.cmsg(i, SOL_SOCKET, SO_TIMESTAMPNS, 16);
    return at >= 0 && this.timespec(at, out);
  }

  /** Message i read from the error queue: the send timestamp it reports (CLOCK_REALTIME) into `out`, and its datagram's key; -1 when it is no scheduler timestamp. */
  sendTimestamp(i: number, out: { seconds: number; nanoseconds: number }): number {
    const stamp = this.cmsg(i, SOL_SOCKET, SO_TIMESTAMPING, 48);
    let error = this.cmsg(i, SOL_IP, IP_RECVERR, 16);
    if (error < 0) error = this.cmsg(i, SOL_IPV6, IPV6_RECVERR, 16);
    if (stamp < 0 || error < 0 || !this.timespec(stamp, out)) return -1;
    const control = this.control!;
    if (control[error + 4] !== SO_EE_ORIGIN_TIMESTAMPING || control.readUInt32LE(error + 8) !== SCM_TSTAMP_SCHED) return -1;
    return control.readUInt32LE(error + 12);
  }
}

export class BatchSocket {
  private closed = false;
  private poller: { stop(): void; close(): void } | undefined;
  /** With send timestamps: the batch the error queue is read into. */
  private errors: Batch | null = null;

  private constructor(private readonly libc: Libc, private readonly koffi: Koffi, private readonly fd: number) {}

  /**
   * A non-blocking UDP socket bound to address:0, with SO_RCVBUF/SO_SNDBUF asked for where given,
   * with `timestamps` the kernel's receive time on every datagram, and with `sendTimestamps` the
   * time each send entered the packet scheduler (sendTimestamp; left out where the kernel refuses).
   */
  static open(address: string, buffers: { receive?: number; send?: number }, options: { timestamps?: boolean; sendTimestamps?: boolean } = {}): BatchSocket | Error {
    const lib = load();
    if (lib instanceof Error) return lib;
    const { libc, koffi } = lib;
    const fd = libc.socket(isIPv6(address) ? AF_INET6 : AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return new Error(`socket() failed (errno ${koffi.errno()})`);
    const socket = new BatchSocket(libc, koffi, fd);
    try {
      if (buffers.receive) setSocketBuffer(fd, 'receive', buffers.receive);
      if (buffers.send) setSocketBuffer(fd, 'send', buffers.send);
      if (options.timestamps) {
        const on = Buffer.alloc(4);
        on.writeInt32LE(1);
        if (libc.setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPNS, on, 4) !== 0) throw new Error(`setsockopt(SO_TIMESTAMPNS) failed (errno ${koffi.errno()})`);
      }
      if (options.sendTimestamps) {
        const flags = Buffer.alloc(4);
        flags.writeInt32LE(SEND_TIMESTAMPING);
        // Only a refinement: without it a send's time is taken just before its system call.
        if (libc.setsockopt(fd, SOL_SOCKET, SO_TIMESTAMPING, flags, 4) === 0) socket.errors = socket.batch(1, 1, { control: true, controlBytes: 256 });
      }
      const local = sockaddr(libc, address, 0);
      if (libc.bind(fd, local, local.length) !== 0) throw new Error(`bind(${address}) failed (errno ${koffi.errno()})`);
    } catch (error) {
      socket.close();
      throw error;
    }
    return socket;
  }

  /** The port the socket is bound to. */
  port(): number {
    const out = Buffer.alloc(28);
    if (this.libc.getsockname(this.fd, out, [out.length]) !== 0) throw new Error('getsockname failed');
    return out.readUInt16BE(2);
  }

  connect(address: string, port: number): void {
    const peer = sockaddr(this.libc, address, port);
    if (this.libc.connect(this.fd, peer, peer.length) !== 0) throw Object.assign(new Error(`connect(${address}:${port}) failed`), { code: errnoCode(this.koffi.errno()) });
  }

  /** The effective SO_SNDBUF/SO_RCVBUF, read back from the kernel. */
  buffers(): { sendBytes: number; receiveBytes: number } {
    return readSocketBuffersOf(this.fd);
  }

  /** A batch of `count` datagrams of at most `slotBytes` each, for send and receive. */
  batch(count: number, slotBytes: number, options: BatchOptions = {}): Batch {
    return new Batch(this.koffi, count, slotBytes, options);
  }

  /** Whether sends are timestamped by the kernel (sendTimestamps was asked for, and taken). */
  get sendsTimestamped(): boolean {
    return this.errors !== null;
  }

  /**
   * The scheduler timestamp of datagram `key` (the count of datagrams sent before it) into `out`,
   * read from the error queue, which the kernel fills during the send; false when it is not
   * there. Entries of other datagrams on the way are dropped.
   */
  sendTimestamp(key: number, out: { seconds: number; nanoseconds: number }): boolean {
    const errors = this.errors;
    if (!errors || this.closed) return false;
    for (;;) {
      errors.rearm(1);
      if (this.libc.recvmmsg(this.fd, errors.headers, 1, MSG_ERRQUEUE | MSG_DONTWAIT, null) <= 0) return false;
      const found = errors.sendTimestamp(0, out);
      if (found === key) return true;
      // An earlier datagram's (wrapped keys aside): ours may follow; a later one's: ours was not stamped.
      if (found > key) return false;
    }
  }

  /** Empties the error queue: a stamp left in it would keep the socket readable to poll. */
  private drainErrors(): void {
    if (!this.errors) return;
    do this.errors.rearm(1);
    while (this.libc.recvmmsg(this.fd, this.errors.headers, 1, MSG_ERRQUEUE | MSG_DONTWAIT, null) > 0);
  }

  /**
   * Whenever the socket is readable, reads every datagram waiting in it, a batch per
   * recvmmsg, and hands each batch over (`count` messages in `batch`).
   */
  receive(batch: Batch, onBatch: (batch: Batch, count: number) => void): void {
    this.poller = this.koffi.node.poll(this.fd, { readable: true }, () => {
      this.drainErrors();
      for (;;) {
        if (this.closed) return;
        batch.rearm(batch.count);
        const count = this.libc.recvmmsg(this.fd, batch.headers, batch.count, MSG_DONTWAIT, null);
        if (count <= 0) return; // EAGAIN: drained
        onBatch(batch, count);
        if (count < batch.count) return;
      }
    });
  }

  /**
   * Sends the first `count` slots of `batch` (each its whole slot) in one sendmmsg. Returns how
   * many went; 0 when the kernel's queue is full (EAGAIN); throws with the errno's code on an
   * error of the first datagram (ECONNREFUSED after the peer's port closed).
   */
  send(batch: Batch, count: number): number {
    const sent = this.libc.sendmmsg(this.fd, batch.headers, count, 0);
    if (sent >= 0) return sent;
    const errno = this.koffi.errno();
    if (errno === EAGAIN) return 0;
    throw Object.assign(new Error(`sendmmsg failed: ${errnoCode(errno)}`), { code: errnoCode(errno) });
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.poller?.stop();
    this.poller?.close();
    this.libc.close(this.fd);
  }
}

export function errnoCode(errno: number): string {
  return ({ 11: 'EAGAIN', 24: 'EMFILE', 98: 'EADDRINUSE', 99: 'EADDRNOTAVAIL', 101: 'ENETUNREACH', 104: 'ECONNRESET', 110: 'ETIMEDOUT', 111: 'ECONNREFUSED', 113: 'EHOSTUNREACH' } as Record<number, string>)[errno] ?? `errno ${errno}`;
}
