import { existsSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { AgentRegistry } from '@niclab/shared/stores/agent-registry';
import type { Config } from '@niclab/shared/runtime/config';
import { Keys } from '@niclab/shared/stores/keys';
import { createRedis } from '@niclab/shared/runtime/redis';
import { alignTable } from '@niclab/shared/domain/text-table';
import { LabError, labAddHost, labDown, labStatus, labUp, type LabHost } from './lab.js';

interface LabFlags {
  json?: boolean;
  hosts?: string;
  rate?: string;
  name?: string;
  'agent-prefix'?: string;
  labels?: string;
  'file-dir'?: string;
}

/** Ready means usable: every lab agent has registered, so a job naming it is accepted. */
async function untilOnline(hosts: LabHost[], redisUrl: string, prefix: string): Promise<void> {
  const redis = createRedis(redisUrl, { name: 'niclab-lab' });
  try {
    const registry = new AgentRegistry(redis, new Keys(prefix));
    const deadline = Date.now() + 30_000;
    for (const host of hosts) {
      while (!(await registry.get(host.agentId))?.online) {
        if (Date.now() > deadline) throw new LabError(`agent ${host.agentId} did not come online within 30 s; see ${host.log}`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  } finally {
    redis.disconnect();
  }
}

function printHosts(hosts: LabHost[]): void {
  const labelText = (h: LabHost) => Object.entries(h.labels ?? {}).map(([k, v]) => `${k}=${v}`).join(',') || '-';
  console.log(alignTable([['host', 'agent', 'interface', 'address', 'rate', 'labels', 'namespace'], ...hosts.map((h) => [h.name, h.agentId, h.interface, h.address, h.rate ?? 'unshaped', labelText(h), h.namespace])]));
}

/** `niclab lab up|add|down|status`: prints what it did; returns the exit code. */
export async function labCommand(sub: string | undefined, flags: LabFlags, config: Config): Promise<number> {
  const name = flags.name ?? config.labName;
  try {
    if (sub === 'up') {
      // Lab agents live in other network namespaces: they reach Redis over its unix socket.
      const socket = join(config.dataDir, 'redis', 'redis.sock');
      const redisUrl = config.redisUrl ?? (existsSync(socket) ? `unix://${socket}` : undefined);
      if (!redisUrl) throw new LabError('no Redis to join: start niclab first (npm start), or set REDIS_URL=unix:///path/to/redis.sock');
      const state = await labUp({
        name, hosts: Number(flags.hosts ?? 4), rate: flags.rate ?? '100mbit', redisUrl, prefix: config.prefix,
        dataDir: config.dataDir, agentPrefix: flags['agent-prefix'], labels: flags.labels, heartbeatSeconds: config.heartbeatSeconds,
        ...(flags['file-dir'] ? { fileRoot: resolve(flags['file-dir']) } : {}),
      });
      await untilOnline(state.hosts, redisUrl, config.prefix);
      console.log(`lab ${name} is up: ${state.hosts.length} hosts on a switch (${state.switchNamespace}), agents online`);
      printHosts(state.hosts);
      return 0;
    }
    if (sub === 'add') {
      // A host that joins the lab (with its labels) while it runs: schedules over a group take it in at their next firing.
      const host = await labAddHost(config.dataDir, name, { rate: flags.rate ?? '100mbit', labels: flags.labels, heartbeatSeconds: config.heartbeatSeconds });
      const state = (await labStatus(config.dataDir, name))!.state;
      await untilOnline([host], state.redisUrl, state.prefix);
      console.log(`lab ${name}: host ${host.name} added, agent online`);
      printHosts([host]);
      return 0;
    }
    if (sub === 'down') {
      const removed = await labDown(config.dataDir, name);
      console.log(removed.length ? `lab ${name} is down: removed ${removed.join(', ')}` : `lab ${name}: nothing to remove`);
      return 0;
    }
    if (sub === 'status') {
      const status = await labStatus(config.dataDir, name);
      if (!status) {
        console.log(flags.json ? JSON.stringify(null) : `lab ${name} does not exist`);
        return 1;
      }
      const healthy = status.hosts.every((h) => h.namespacePresent && h.agentRunning);
      if (flags.json) {
        console.log(JSON.stringify({ name, createdAt: status.state.createdAt, redisUrl: status.state.redisUrl, healthy, hosts: status.hosts }, null, 2));
        return healthy ? 0 : 1;
      }
      console.log(`lab ${name}, created ${status.state.createdAt}, Redis ${status.state.redisUrl}`);
      console.log(alignTable([
        ['host', 'agent', 'interface', 'address', 'rate', 'namespace', 'agent pid'],
        ...status.hosts.map((h) => [h.name, h.agentId, h.interface, h.address, h.rate ?? 'unshaped', h.namespacePresent ? h.namespace : `${h.namespace} (missing)`, h.agentRunning ? String(h.agentPid) : 'not running']),
      ]));
      return healthy ? 0 : 1;
    }
    console.error('niclab lab: say up, add, down or status');
    return 2;
  } catch (error) {
    console.error(`niclab lab ${sub}: ${(error as Error).message}`);
    return error instanceof LabError ? 2 : 1;
  }
}
