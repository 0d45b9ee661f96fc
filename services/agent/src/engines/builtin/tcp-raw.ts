/**
 * The builtin TCP stream's receiving end on its own descriptors, through libc via koffi
 * (udp-batch.ts's loader). Node's socket path cost the stream a fifth to a third of its rate on
 * loopback (0.60-0.83 of bare iperf3 at 128 KiB, its receiver at 80% of a core): a Buffer, an
 * event and the stream machinery per read of at most 64 KiB. Here the receiver reads up to 1 MiB
 * a call into one preallocated Buffer. Linux on a 64-bit CPU only; `rawTcp()` returns an Error
 * elsewhere (or where koffi did not install), and the receiver falls back to Node's sockets.
 * The sender stays on Node's sockets: a send() loop on the raw descriptor used as much CPU per
 * byte (0.289 against 0.282 µs/KB, medians of 6 loopback pairs), and MSG_ZEROCOPY halved the
 * rate on loopback (0.49-0.59 of bare iperf3: the kernel copies for a local receiver anyway).
 */
import { isIPv6 } from 'node:net';
import { AF_INET, AF_INET6, EAGAIN, errnoCode, load, MSG_DONTWAIT, SOCK_CLOEXEC, SOCK_NONBLOCK, sockaddr, type Koffi, type Libc } from './udp-batch.js';
import { readSocketBuffersOf, setSocketBuffer } from './sockopt.js';

const SOCK_STREAM = 1;
const EINTR = 4;

/** What a receiving connection reads per recv() at most: big reads are few calls. */
export const RECEIVE_BYTES = 1 << 20;
/** Reads per readiness before the event loop gets its turn back (interval timers, IPC). */
const READS_PER_TURN = 64;

type RawLib = { libc: Libc; koffi: Koffi };

/** libc through koffi, or why not. */
export function rawTcp(): RawLib | Error {
  return load();
}

/**
 * A listening TCP socket of its own (not libuv's), bound to address:0, whose connections are
 * read to their end into one Buffer. `onData(bytes)` hears each read's size, `onEnd` each
 * connection's end of stream (its socket closed at once, which sends our FIN), `onError` a
 * failed accept or read.
 */
export class RawTcpListener {
  private closed = false;
  private readonly pollers: { stop(): void; close(): void }[] = [];
  private readonly fds = new Set<number>();
  private readonly buffer = Buffer.allocUnsafe(RECEIVE_BYTES);
  private accepted = 0;

  private constructor(private readonly lib: RawLib, private readonly fd: number) {}

  static open(lib: RawLib, address: string, socketBuffer: number | undefined): RawTcpListener {
    const { libc, koffi } = lib;
    const fd = libc.socket(isIPv6(address) ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) throw new Error(`socket() failed (${errnoCode(koffi.errno())})`);
    const listener = new RawTcpListener(lib, fd);
    try {
      // Before any SYN arrives: accepted connections inherit the sizes and offer a window scale to match.
      if (socketBuffer !== undefined) {
        setSocketBuffer(fd, 'send', socketBuffer);
        setSocketBuffer(fd, 'receive', socketBuffer);
      }
      const local = sockaddr(libc, address, 0);
      if (libc.bind(fd, local, local.length) !== 0) throw new Error(`bind(${address}) failed (${errnoCode(koffi.errno())})`);
      if (libc.listen(fd, 128) !== 0) throw new Error(`listen failed (${errnoCode(koffi.errno())})`);
    } catch (error) {
      listener.close();
      throw error;
    }
    return listener;
  }

  port(): number {
    const out = Buffer.alloc(28);
    if (this.lib.libc.getsockname(this.fd, out, [out.length]) !== 0) throw new Error('getsockname failed');
    return out.readUInt16BE(2);
  }

  /**
   * Accepts `streams` connections (then stops listening) and reads each to its end. `onAccept`
   * gets each connection's descriptor first (the socket buffers are read from it).
   */
  serve(streams: number, handlers: { onAccept(fd: number): void; onData(bytes: number): void; onEnd(): void; onError(error: Error): void }): void {
    const { libc, koffi } = this.lib;
    const listening = koffi.node.poll(this.fd, { readable: true }, () => {
      for (;;) {
        if (this.closed || this.accepted >= streams) return;
        const fd = libc.accept4(this.fd, null, null, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
          const errno = koffi.errno();
          if (errno === EAGAIN || errno === EINTR) return;
          handlers.onError(new Error(`accept failed (${errnoCode(errno)})`));
          return;
        }
        this.accepted += 1;
        this.fds.add(fd);
        // Exactly `streams` connections belong to this flow; stop listening once they are here.
        if (this.accepted >= streams) listening.stop();
        handlers.onAccept(fd);
        this.read(fd, handlers);
      }
    });
    this.pollers.push(listening);
  }

  private read(fd: number, handlers: { onData(bytes: number): void; onEnd(): void; onError(error: Error): void }): void {
    const { libc, koffi } = this.lib;
    const buffer = this.buffer;
    const poller = koffi.node.poll(fd, { readable: true }, () => {
      for (let i = 0; i < READS_PER_TURN; i++) {
        if (this.closed || !this.fds.has(fd)) return;
        const n = libc.recv(fd, buffer, RECEIVE_BYTES, MSG_DONTWAIT);
        if (n > 0) {
          handlers.onData(n);
          continue;
        }
        if (n === 0) {
          // The peer's FIN: everything it sent is counted. Closing sends ours (the poller is closed with the listener, not in its own callback).
          poller.stop();
          this.fds.delete(fd);
          libc.close(fd);
          handlers.onEnd();
          return;
        }
        const errno = koffi.errno();
        if (errno === EAGAIN || errno === EINTR) return;
        handlers.onError(Object.assign(new Error(`recv failed (${errnoCode(errno)})`), { code: errnoCode(errno) }));
        return;
      }
    });
    this.pollers.push(poller);
  }

  /** The effective buffers of an accepted connection. */
  buffers(fd: number): { sendBytes: number; receiveBytes: number } {
    return readSocketBuffersOf(fd);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const poller of this.pollers) {
      poller.stop();
      poller.close();
    }
    for (const fd of this.fds) this.lib.libc.close(fd);
    this.fds.clear();
    this.lib.libc.close(this.fd);
  }
}
