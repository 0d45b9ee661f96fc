import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import type { Redis } from 'ioredis';
import { startPrivateRedis, type PrivateRedis } from '@niclab/shared/runtime/private-redis';
import { createRedis } from '@niclab/shared/runtime/redis';

/**
 * Ports for the test's own listeners come from below the kernel's ephemeral range
 * (net.ipv4.ip_local_port_range), where no outgoing connection is ever given a source port:
 * a port found free there stays free until the test binds it, unless another test's random
 * draw lands on it too (which `retryOnAddressInUse` covers).
 */
const EPHEMERAL_LOW = (() => {
  try {
    return Number(readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/)[0]) || 32768;
  } catch {
    return 32768;
  }
})();
const RANGE = EPHEMERAL_LOW > 12_000 ? ([EPHEMERAL_LOW - 10_000, EPHEMERAL_LOW - 1] as const) : ([61_000, 65_000] as const);
/** Ports other tools on this machine listen on by default: never handed out. */
const RESERVED = new Set([2112, 5201, 6379, 8080, 9090, 9093, 9094, 26379]);

function tryListen(port: number): Promise<boolean> {
  const server = createServer();
  return new Promise((resolve) => {
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = RANGE[0] + Math.floor(Math.random() * (RANGE[1] - RANGE[0] + 1));
    if (!RESERVED.has(port) && (await tryListen(port))) return port;
  }
  throw new Error(`no free port in ${RANGE.join('-')} after 200 tries`);
}

/** Runs `start` with a fresh free port until it does not fail for an address in use (another test took the port first). */
export async function retryOnAddressInUse<T>(start: (port: number) => Promise<T>, attempts = 5): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start(await freePort());
    } catch (error) {
      if (attempt >= attempts || !/EADDRINUSE|Address already in use/i.test((error as Error).message)) throw error;
    }
  }
}

export interface TestRedis extends PrivateRedis {
  dir: string;
  /** The same server over TCP on loopback (for containers on the host's network). */
  tcpUrl: string;
}

/** A real redis-server of the test's own, on a free port and a unix socket in a temporary folder. */
export async function startTestRedis(): Promise<TestRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'niclab-test-'));
  try {
    return await retryOnAddressInUse(async (port) => {
      const redis = await startPrivateRedis(dir, { port, appendonly: false, killOnSignal: true });
      return {
        ...redis,
        dir,
        tcpUrl: `redis://127.0.0.1:${port}`,
        async stop() {
          await redis.stop();
          rmSync(dir, { recursive: true, force: true });
        },
      };
    });
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
}

/** A fresh key prefix, so tests sharing one Redis never see each other's keys. */
export function uniquePrefix(): string {
  return `t${randomBytes(5).toString('hex')}`;
}

/** A Redis of the file's own and a client of it: started before the file's tests (handed to `use`), stopped after them. */
export function redisPerFile(use: (client: Redis, server: TestRedis) => void): void {
  let server: TestRedis | undefined;
  let client: Redis | undefined;
  before(async () => {
    server = await startTestRedis();
    client = createRedis(server.url);
    use(client, server);
  });
  after(async () => {
    client?.disconnect();
    await server?.stop();
  });
}
