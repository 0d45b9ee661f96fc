import { randomBytes } from 'node:crypto';
import { command } from '@niclab/shared/runtime/command';
import { spawnNiclab, type NiclabProcess } from './processes.js';

/** One namespace's UDP counters (/proc/net/snmp). */
export interface UdpCounters {
  InDatagrams: number;
  OutDatagrams: number;
  RcvbufErrors: number;
}

/**
 * A network namespace of the test's own with only its loopback, and a `niclab agent` inside it:
 * the namespace's kernel counters then count that agent's engines and nothing else, a reference
 * for the figures niclab reports (the root namespace's counters carry every other test's traffic).
 * The agent reaches Redis over the unix socket in `env.REDIS_URL`. Needs root.
 */
export async function startNamespacedAgent(agentId: string, env: Record<string, string>): Promise<{ namespace: string; agent: NiclabProcess; udp(): Promise<UdpCounters>; stop(): Promise<void> }> {
  const namespace = `nl${randomBytes(4).toString('hex')}`;
  await command('ip', ['netns', 'add', namespace]);
  let agent: NiclabProcess | undefined;
  const stop = async () => {
    await agent?.stop();
    await command('ip', ['netns', 'delete', namespace]).catch(() => undefined);
  };
  try {
    await command('ip', ['-n', namespace, 'link', 'set', 'lo', 'up']);
    agent = spawnNiclab(['agent', '--id', agentId], env, { netns: namespace });
  } catch (error) {
    await stop();
    throw error;
  }
  const udp = async (): Promise<UdpCounters> => {
    const lines = (await command('ip', ['netns', 'exec', namespace, 'cat', '/proc/net/snmp'])).split('\n').filter((l) => l.startsWith('Udp:'));
    const names = lines[0]!.split(/\s+/);
    const values = lines[1]!.split(/\s+/);
    const at = (name: keyof UdpCounters) => Number(values[names.indexOf(name)]);
    return { InDatagrams: at('InDatagrams'), OutDatagrams: at('OutDatagrams'), RcvbufErrors: at('RcvbufErrors') };
  };
  return { namespace, agent, udp, stop };
}
