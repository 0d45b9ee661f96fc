import { createServer, connect, type Server, type Socket } from 'node:net';

/**
 * A TCP relay to a real server that a test can cut: `cut()` drops every connection and
 * refuses new ones (as a pulled cable or a firewall would), `restore()` lets them in again.
 */
export interface TcpProxy {
  port: number;
  cut(): void;
  restore(): void;
  close(): Promise<void>;
}

/**
 * With `replicationLagMs`, what the server sends to a Redis replica (a connection whose client
 * has said REPLCONF or PSYNC) reaches it that much later, as to a replica on a slower link;
 * every other connection is as fast as loopback. `cut()` drops what it still holds, as a host
 * that dies takes with it what its network had not delivered.
 */
export async function startTcpProxy(targetPort: number, { replicationLagMs = 0 } = {}): Promise<TcpProxy> {
  const sockets = new Set<Socket>();
  const held = new Set<NodeJS.Timeout>();
  let open = true;
  const server: Server = createServer((client) => {
    if (!open) {
      client.destroy();
      return;
    }
    const upstream = connect(targetPort, '127.0.0.1');
    sockets.add(client).add(upstream);
    const drop = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    if (replicationLagMs === 0) {
      client.pipe(upstream).pipe(client);
      return;
    }
    let replica = false;
    client.on('data', (chunk: Buffer) => {
      replica ||= /REPLCONF|PSYNC/i.test(chunk.toString('latin1'));
      upstream.write(chunk);
    });
    // Timers of one duration fire in the order they were set: the stream stays in order.
    upstream.on('data', (chunk: Buffer) => {
      if (!replica) return void client.write(chunk);
      const timer = setTimeout(() => {
        held.delete(timer);
        if (!client.destroyed) client.write(chunk);
      }, replicationLagMs);
      held.add(timer);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const dropAll = () => {
    for (const timer of held) clearTimeout(timer);
    held.clear();
    for (const socket of sockets) socket.destroy();
    sockets.clear();
  };
  return {
    port: typeof address === 'object' && address ? address.port : 0,
    cut() {
      open = false;
      dropAll();
    },
    restore() {
      open = true;
    },
    async close() {
      open = false;
      dropAll();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
