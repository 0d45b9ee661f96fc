import { Redis, type RedisOptions } from 'ioredis';
import { MasterWatch, type Address } from './master-watch.js';

/**
 * Connects to redis://, rediss:// or unix:///path URLs. BullMQ workers need
 * maxRetriesPerRequest: null. `patient` connections (the coordinator's and the agents', which
 * no user waits on) also keep their commands through a Redis restart and send them once it
 * is back, so a run in flight survives the outage; the API's fail fast (503).
 */
export function createRedis(url: string, options: { blocking?: boolean; patient?: boolean; name?: string } = {}): Redis {
  return prepared(connect(url, options), url.startsWith('redis-sentinel://') ? watchOf(url) : null);
}

/**
 * `redis`, and every connection duplicated from it (a run's blocking ones, BullMQ's), with a
 * listener for its errors (ioredis reconnects by itself and failed commands reject; without one
 * it would print every reconnect attempt as an "Unhandled error event") and, with Sentinel,
 * watched for a failover.
 */
function prepared(redis: Redis, watch: MasterWatch | null): Redis {
  redis.on('error', () => undefined);
  watch?.add(redis);
  const duplicate = redis.duplicate.bind(redis);
  redis.duplicate = (override) => prepared(duplicate(override), watch);
  return redis;
}

function connect(url: string, options: { blocking?: boolean; patient?: boolean; name?: string }): Redis {
  const common: RedisOptions = {
    maxRetriesPerRequest: options.blocking || options.patient ? null : 2,
    enableOfflineQueue: true,
    connectionName: options.name,
    retryStrategy: (times) => Math.min(times * 200, 2000),
  };
  if (url.startsWith('unix://')) {
    return new Redis({ ...common, path: new URL(url).pathname });
  }
  if (url.startsWith('redis-sentinel://')) return new Redis({ ...common, ...sentinelOptions(url) });
  return new Redis(url, common);
}

/** One watch of the sentinels per process and set (runtime/master-watch.ts). */
const watches = new Map<string, MasterWatch>();
function watchOf(url: string): MasterWatch {
  let watch = watches.get(url);
  if (!watch) {
    const { sentinels, name } = sentinelOptions(url);
    watch = new MasterWatch(sentinels as Address[], name!);
    watches.set(url, watch);
  }
  return watch;
}

/**
 * `redis-sentinel://[user:password@]host:port,host:port/master[?tls=1]` (config.ts builds it
 * from NICLAB_REDIS_SENTINELS and NICLAB_REDIS_MASTER): ioredis asks the sentinels for the
 * master, and again after a failover. A connection left on a master that came back as a
 * replica gets READONLY for its writes: it reconnects, to the master the sentinels name now,
 * and sends the command again.
 */
export function sentinelOptions(url: string): RedisOptions {
  const match = /^redis-sentinel:\/\/(?:([^:@/]*):([^@/]*)@)?([^/]+)\/([^?]+)(\?tls=1)?$/.exec(url);
  if (!match) throw new Error(`not a redis-sentinel:// address: ${url}`);
  const [, username, password, hosts, name, tls] = match;
  return {
    sentinels: hosts!.split(',').map((hostPort) => {
      const at = hostPort.lastIndexOf(':');
      return { host: hostPort.slice(0, at).replace(/^\[|\]$/g, ''), port: Number(hostPort.slice(at + 1)) };
    }),
    name,
    ...(username ? { username: decodeURIComponent(username) } : {}),
    ...(password ? { password: decodeURIComponent(password) } : {}),
    ...(tls ? { tls: {}, enableTLSForSentinelMode: true } : {}),
    sentinelRetryStrategy: (times: number) => Math.min(times * 200, 2000),
    // Told of a failover by the sentinels (+switch-master) through the process's MasterWatch,
    // not ioredis's failoverDetector, which can end a connection for good (master-watch.ts).
    failoverDetector: false,
    reconnectOnError: (error: Error) => (error.message.startsWith('READONLY') ? 2 : false),
  };
}

export type Script = (keys: string[], ...args: (string | number)[]) => Promise<number>;

/** A Lua script as a function of its keys and arguments, registered once per connection (EVALSHA). */
export function defineScript(redis: Redis, name: string, lua: string): Script {
  const commands = redis as unknown as Record<string, (...args: (string | number)[]) => Promise<number>>;
  if (!commands[name]) redis.defineCommand(name, { lua });
  return (keys, ...args) => commands[name]!.call(redis, keys.length, ...keys, ...args);
}
