import { Redis, type RedisOptions } from 'ioredis';

/**
 * Connects to redis://, rediss:// or unix:///path URLs. BullMQ workers need
 * maxRetriesPerRequest: null; everything else fails fast instead of queueing commands forever.
 */
export function createRedis(url: string, options: { blocking?: boolean; name?: string } = {}): Redis {
  const redis = connect(url, options);
  // ioredis reconnects by itself and failed commands reject; without a listener it would print
  // every reconnect attempt as an "Unhandled error event".
  redis.on('error', () => undefined);
  return redis;
}

function connect(url: string, options: { blocking?: boolean; name?: string }): Redis {
  const common: RedisOptions = {
    maxRetriesPerRequest: options.blocking ? null : 2,
    enableOfflineQueue: true,
    connectionName: options.name,
    retryStrategy: (times) => Math.min(times * 200, 2000),
  };
  if (url.startsWith('unix://')) {
    return new Redis({ ...common, path: new URL(url).pathname });
  }
  return new Redis(url, common);
}

export type Script = (keys: string[], ...args: (string | number)[]) => Promise<number>;

/** A Lua script as a function of its keys and arguments, registered once per connection (EVALSHA). */
export function defineScript(redis: Redis, name: string, lua: string): Script {
  const commands = redis as unknown as Record<string, (...args: (string | number)[]) => Promise<number>>;
  if (!commands[name]) redis.defineCommand(name, { lua });
  return (keys, ...args) => commands[name]!.call(redis, keys.length, ...keys, ...args);
}
