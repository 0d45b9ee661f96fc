/**
 * One process of bench/fleet.ts's simulated fleet: many agents, each the product's own
 * AgentService (registration, a heartbeat every NICLAB_HEARTBEAT_SECONDS, its BullMQ worker on
 * its own queue with its stalled-job checks, its cancel subscription: the same connections
 * and Redis traffic as an agent on a host of its own), each reporting a host of its own.
 * Driven over IPC: { start: string[] }, { stop: string[] }; answers { started | stopped: n }.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AgentService, type AgentHost } from '@niclab/agent/agent';
import type { AgentInterface } from '@niclab/shared/domain/contract';
import { loadConfig } from '@niclab/shared/runtime/config';
import { createLogger } from '@niclab/shared/runtime/logger';

/** Interfaces per simulated host: four NICs, and FLEET_VETHS pod veths beside them. */
const NICS = ['eth1', 'eth2', 'eth3', 'eth4'];
const VETHS = Number(process.env.FLEET_VETHS ?? 0);
const dataDir = mkdtempSync(join(tmpdir(), 'niclab-fleet-'));
const log = createLogger('warn', { role: 'fleet-agent' });
const agents = new Map<string, AgentService>();

function hostOf(id: string, n: number): AgentHost {
  const nic = (name: string, k: number, address: string | null): AgentInterface => ({
    name, mac: `02:${(n >> 8).toString(16).padStart(2, '0')}:${(n & 255).toString(16).padStart(2, '0')}:00:00:${k.toString(16).padStart(2, '0')}`,
    mtu: 9000, speedBitsPerSecond: name.startsWith('veth') ? 10e9 : 25e9, operstate: 'up', driver: name.startsWith('veth') ? 'veth' : 'mlx5_core',
    addresses: address ? [{ family: 'IPv4', address, prefixLength: 15 }] : [],
  });
  const interfaces = [
    ...NICS.map((name, k) => nic(name, k, `198.${18 + (k >> 1)}.${n >> 8}.${(n & 255) | ((k & 1) << 7)}`)),
    ...Array.from({ length: VETHS }, (_, k) => nic(`veth${(n * 131 + k * 7919).toString(16).padStart(8, '0').slice(-8)}`, 16 + k, null)),
  ];
  return { hostname: () => id, readInterfaces: async () => interfaces };
}

async function start(ids: string[]): Promise<void> {
  // In groups: each start writes a heartbeat and opens its connections.
  for (let i = 0; i < ids.length; i += 25) {
    await Promise.all(ids.slice(i, i + 25).map(async (id) => {
      const config = loadConfig(process.env, { agentId: id, dataDir, logLevel: 'warn' }) as ReturnType<typeof loadConfig> & { redisUrl: string };
      const agent = new AgentService(config, log, hostOf(id, Number(id.replace(/\D/g, '')) || 0));
      await agent.start();
      agents.set(id, agent);
    }));
  }
}

async function stop(ids: string[]): Promise<void> {
  await Promise.all(ids.map(async (id) => {
    await agents.get(id)?.stop();
    agents.delete(id);
  }));
}

process.on('message', (message: { start?: string[]; stop?: string[] }) => {
  const work = message.start ? start(message.start).then(() => ({ started: message.start!.length })) : stop(message.stop ?? []).then(() => ({ stopped: message.stop?.length ?? 0 }));
  work.then((reply) => process.send!(reply), (error: unknown) => process.send!({ error: String((error as Error).stack ?? error) }));
});
process.on('SIGTERM', () => {
  void stop([...agents.keys()]).finally(() => {
    rmSync(dataDir, { recursive: true, force: true });
    process.exit(0);
  });
});
process.send!({ ready: true });
