import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before } from 'node:test';
import type { Redis } from 'ioredis';
import { startPrivateRedis, type PrivateRedis } from '@niclab/shared/runtime/private-redis';
import { createRedis } from '@niclab/shared/runtime/redis';

export async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (!address || typeof address !== 'object') throw new Error('no port');
  return address.port;
}

export interface TestRedis extends PrivateRedis {
  dir: string;
  /** The same server over TCP on loopback (for containers on the host's network). */
  tcpUrl: string;
}

/** A real redis-server of the test's own, on a free port and a unix socket in a temporary folder. */
export async function startTestRedis(): Promise<TestRedis> {
  const dir = mkdtempSync(join(tmpdir(), 'niclab-test-'));
  const port = await freePort();
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
