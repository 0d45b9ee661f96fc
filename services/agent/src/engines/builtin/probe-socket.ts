/**
 * The latency probe's UDP socket: each datagram's arrival as the kernel stamped it (SO_TIMESTAMPNS
 * through the batched socket), and each send stamped as the last thing before its system call,
 * or, where asked (the probe's sender), when the kernel put it to the packet scheduler.
 * Times are CLOCK_MONOTONIC nanoseconds (process.hrtime), the probe's clock. Where the batched
 * socket cannot load, Node's dgram, whose arrivals are the times its event loop read them.
 */
import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { isIPv6 } from 'node:net';
import { BatchSocket, realtimeLessMonotonic, type Batch } from './udp-batch.js';

const now = () => process.hrtime.bigint();

/** Where a datagram came from, to reflect it there: valid during the handler that heard it. */
export type Source = number | RemoteInfo;

export interface ProbeSocket {
  /** `kernel`: every arrival so far was the kernel's receive timestamp; `process`: the time this process read it. */
  arrivalTimes(): 'kernel' | 'process';
  /** `kernel`: every send so far was timed by the kernel; `process`: just before its system call. */
  sendTimes(): 'kernel' | 'process';
  port(): number;
  connect(address: string, port: number): Promise<void>;
  /** Hears each datagram (its bytes are valid during the call only) with its arrival, CLOCK_MONOTONIC ns. */
  onDatagram(handler: (data: Buffer, at: bigint, from: Source) => void): void;
  /**
   * Sends `data` (to `to`, else the connected peer), its send time written at `stampAt` just
   * before the system call; returns the send's time: the kernel's where it stamps sends, else that one.
   */
  send(data: Buffer, stampAt: number, to?: Source): bigint;
  /** The error that ends the probe, if the socket had one (a closed peer port is expected at the end). */
  failure(): Error | null;
  close(): void;
}

/** Datagrams read per recvmmsg: a probe's are few, this only drains a backlog in fewer calls. */
const BATCH = 16;

class KernelStamped implements ProbeSocket {
  private readonly received: Batch;
  /** One datagram out, with its own address (a reflection), or without one once connected. */
  private outgoing: Batch;
  private readonly stamp = { seconds: 0, nanoseconds: 0 };
  private unstamped = 0;
  /** Datagrams sent so far: the key of the next one's send timestamp. */
  private sent = 0;
  private sendsUnstamped = 0;
  private error: Error | null = null;

  constructor(private readonly socket: BatchSocket, slotBytes: number) {
    this.received = socket.batch(BATCH, slotBytes, { names: true, control: true });
    this.outgoing = socket.batch(1, slotBytes, { names: true });
  }

  arrivalTimes(): 'kernel' | 'process' {
    return this.unstamped === 0 ? 'kernel' : 'process';
  }

  sendTimes(): 'kernel' | 'process' {
    return this.socket.sendsTimestamped && this.sendsUnstamped === 0 ? 'kernel' : 'process';
  }

  port(): number {
    return this.socket.port();
  }

  async connect(address: string, port: number): Promise<void> {
    this.socket.connect(address, port);
    // A connected socket's sends name no address (the kernel refuses an empty one).
    this.outgoing = this.socket.batch(1, this.outgoing.slotBytes);
  }

  onDatagram(handler: (data: Buffer, at: bigint, from: Source) => void): void {
    const slot = this.received.slotBytes;
    this.socket.receive(this.received, (batch, count) => {
      // Realtime less monotonic once a wake-up: it moves only when the wall clock is stepped.
      const offset = realtimeLessMonotonic()!;
      for (let i = 0; i < count; i++) {
        const stamped = batch.timestamp(i, this.stamp);
        if (!stamped) this.unstamped += 1;
        const at = stamped ? BigInt(this.stamp.seconds) * 1_000_000_000n + BigInt(this.stamp.nanoseconds) - offset : now();
        handler(batch.data.subarray(i * slot, i * slot + batch.length(i)), at, i);
      }
    });
  }

  send(data: Buffer, stampAt: number, to?: Source): bigint {
    const out = this.outgoing;
    data.copy(out.data, 0);
    out.setLength(0, data.length);
    if (typeof to === 'number') out.addressFrom(0, this.received, to);
    const sentAt = now();
    out.data.writeBigUInt64BE(sentAt, stampAt);
    let went = 0;
    try {
      went = this.socket.send(out, 1);
    } catch (error) {
      this.error ??= error as Error;
    }
    if (went === 0 || !this.socket.sendsTimestamped) return sentAt;
    // The kernel stamped it on its way to the packet scheduler, within the system call: past the process's own delays.
    if (!this.socket.sendTimestamp(this.sent++, this.stamp)) {
      this.sendsUnstamped += 1;
      return sentAt;
    }
    return BigInt(this.stamp.seconds) * 1_000_000_000n + BigInt(this.stamp.nanoseconds) - realtimeLessMonotonic()!;
  }

  failure(): Error | null {
    return this.error && (this.error as NodeJS.ErrnoException).code !== 'ECONNREFUSED' ? this.error : null;
  }

  close(): void {
    this.socket.close();
  }
}

class ProcessStamped implements ProbeSocket {
  private error: Error | null = null;

  private constructor(private readonly socket: Socket) {
    socket.on('error', (error) => (this.error ??= error));
  }

  static async open(address: string): Promise<ProcessStamped> {
    const socket = createSocket({ type: isIPv6(address) ? 'udp6' : 'udp4' });
    await new Promise<void>((resolve, reject) => {
      socket.once('error', reject);
      socket.bind({ address, port: 0 }, () => {
        socket.removeListener('error', reject);
        resolve();
      });
    });
    return new ProcessStamped(socket);
  }

  arrivalTimes(): 'kernel' | 'process' {
    return 'process';
  }

  sendTimes(): 'kernel' | 'process' {
    return 'process';
  }

  port(): number {
    return this.socket.address().port;
  }

  connect(address: string, port: number): Promise<void> {
    return new Promise((resolve) => this.socket.connect(port, address, () => resolve()));
  }

  onDatagram(handler: (data: Buffer, at: bigint, from: Source) => void): void {
    this.socket.on('message', (data: Buffer, from: RemoteInfo) => handler(data, now(), from));
  }

  send(data: Buffer, stampAt: number, to?: Source): bigint {
    const sentAt = now();
    data.writeBigUInt64BE(sentAt, stampAt);
    if (to && typeof to !== 'number') this.socket.send(data, to.port, to.address);
    else this.socket.send(data);
    return sentAt;
  }

  failure(): Error | null {
    return this.error && (this.error as NodeJS.ErrnoException).code !== 'ECONNREFUSED' ? this.error : null;
  }

  close(): void {
    this.socket.close();
  }
}

/** A probe socket bound to address:0 for datagrams of up to `slotBytes`: kernel-stamped where the batched socket loads, its sends too with `sendTimestamps`. */
export async function openProbeSocket(address: string, slotBytes: number, sendTimestamps = false): Promise<ProbeSocket> {
  const socket = BatchSocket.open(address, {}, { timestamps: true, sendTimestamps });
  if (!(socket instanceof Error) && realtimeLessMonotonic() !== null) return new KernelStamped(socket, slotBytes);
  if (!(socket instanceof Error)) socket.close();
  return ProcessStamped.open(address);
}
