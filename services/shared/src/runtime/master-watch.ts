import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { Redis } from 'ioredis';

export interface Address {
  host: string;
  port: number;
}

/** How long a sentinel that does not answer is waited for before the next is asked. */
const SENTINEL_TIMEOUT_MS = 2000;
/** Between two rounds over every sentinel, when none answered. */
const ROUND_DELAY_MS = 1000;

/**
 * A process's ear on the sentinels' `+switch-master` (one subscription, to the first sentinel
 * that answers): when the master changes, every connection it watches that is still on another
 * server is closed, and reconnects through the sentinels to the master they name. A connection
 * to a master that died closes by itself; one to a master that froze, or that the network cut
 * off, does not, and its commands would wait for it. A connection that comes up on a server
 * other than the master the sentinels named last (it asked them before the switch) is closed
 * too.
 *
 * ioredis's own `failoverDetector` does this for each connection, but it also closes a
 * connection that is still asking the sentinels for the master, and that ends it for good
 * (status "end": every command after it fails with "Connection is closed"). In a SIGKILL
 * failover with 40 busy connections that ended all 40; an API so ended answered 503 until it was
 * restarted (test/faults/sentinel-failover.test.ts). Here only a connection that is up is ever closed.
 */
export class MasterWatch {
  private readonly connections = new Set<Redis>();
  private master: { address: Address; ips: Promise<Set<string>> } | null = null;
  private subscriber: Redis | null = null;
  private next = 0;
  private retry: NodeJS.Timeout | undefined;

  constructor(private readonly sentinels: readonly Address[], private readonly name: string) {}

  /** Watches `redis` from now until it ends (closed on purpose; again if it connects again). */
  add(redis: Redis): void {
    const track = () => {
      this.connections.add(redis);
      this.start();
    };
    track();
    redis.on('connect', track);
    redis.on('ready', () => void this.check(redis));
    redis.on('end', () => {
      this.connections.delete(redis);
      if (this.connections.size === 0) this.stop();
    });
  }

  private start(): void {
    if (this.subscriber || this.retry) return;
    this.listen(0);
  }

  private stop(): void {
    clearTimeout(this.retry);
    this.retry = undefined;
    this.subscriber?.disconnect();
    this.subscriber = null;
    this.master = null;
  }

  /** Subscribes on the next sentinel; on its loss (or none answering) moves on to the one after. */
  private listen(tried: number): void {
    this.retry = undefined;
    if (this.connections.size === 0) return;
    if (tried >= this.sentinels.length) {
      this.retry = setTimeout(() => this.listen(0), ROUND_DELAY_MS).unref();
      return;
    }
    const sentinel = this.sentinels[this.next++ % this.sentinels.length]!;
    const subscriber = new Redis({ ...sentinel, lazyConnect: true, retryStrategy: () => null, connectTimeout: SENTINEL_TIMEOUT_MS, maxRetriesPerRequest: 0, enableOfflineQueue: false });
    this.subscriber = subscriber;
    let subscribed = false;
    subscriber.on('error', () => undefined);
    subscriber.on('end', () => {
      if (this.subscriber !== subscriber) return;
      this.subscriber = null;
      // What it knew may be stale from now on: no connection is judged by it.
      this.master = null;
      this.listen(subscribed ? 0 : tried + 1);
    });
    subscriber.on('message', (_channel: string, message: string) => {
      // "<name> <old ip> <old port> <new ip> <new port>"
      const [name, , , host, port] = message.split(' ');
      if (name === this.name && host && port) this.switchTo({ host, port: Number(port) });
    });
    void (async () => {
      try {
        await subscriber.connect();
        await subscriber.subscribe('+switch-master');
        subscribed = true;
        // The master now, asked after subscribing so that no switch falls between the two.
        const asker = subscriber.duplicate();
        asker.on('error', () => undefined);
        try {
          await asker.connect();
          const [host, port] = ((await asker.call('sentinel', 'get-master-addr-by-name', this.name)) as string[] | null) ?? [];
          if (host && port && this.subscriber === subscriber) this.switchTo({ host, port: Number(port) });
        } finally {
          asker.disconnect();
        }
      } catch {
        subscriber.disconnect();
      }
    })();
  }

  private switchTo(address: Address): void {
    if (this.master && this.master.address.host === address.host && this.master.address.port === address.port) return;
    const ips = isIP(address.host)
      ? Promise.resolve(new Set([address.host]))
      : lookup(address.host, { all: true }).then((found) => new Set(found.map((a) => a.address)), () => new Set<string>());
    this.master = { address, ips };
    for (const redis of this.connections) void this.check(redis);
  }

  /** Closes `redis` when it is up on a server that is not the master (it reconnects through the sentinels). */
  private async check(redis: Redis): Promise<void> {
    const master = this.master;
    if (!master || (redis.status !== 'ready' && redis.status !== 'connect')) return;
    const { remoteAddress, remotePort } = redis.stream ?? {};
    if (!remoteAddress || !remotePort) return;
    const ips = await master.ips;
    // Not sure where the master is (its name did not resolve), or it changed meanwhile: leave it be.
    if (ips.size === 0 || this.master !== master) return;
    const onMaster = remotePort === master.address.port && ips.has(remoteAddress.replace(/^::ffff:/, ''));
    if (!onMaster && (redis.status === 'ready' || redis.status === 'connect')) redis.disconnect(true);
  }
}
