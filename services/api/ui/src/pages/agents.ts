import { getJson, type Schemas } from '../api.js';
import { h, jobLink, table, when } from '../dom.js';
import type { PageContext } from '../page.js';

type Agent = Schemas['Agent'];

function speed(bps: number | null): string {
  if (bps === null) return '–';
  return bps >= 1e9 ? `${bps / 1e9} Gbit/s` : `${bps / 1e6} Mbit/s`;
}

/**
 * The interfaces running jobs use now. A running job's current run holds a lease on each
 * interface its flows name, so this is what is leased, read from the public API.
 */
async function leasedNow(signal: AbortSignal): Promise<Map<string, string>> {
  const running = (await getJson<Schemas['JobPage']>('/v1/jobs?status=running&limit=200', signal)).items;
  const leased = new Map<string, string>();
  for (const job of running) for (const flow of job.spec.flows) for (const end of [flow.from, flow.to]) leased.set(`${end.agent}:${end.interface}`, job.id);
  return leased;
}

function agentSection(agent: Agent, leased: Map<string, string>): HTMLElement {
  const engines = Object.entries(agent.engines).map(([name, e]) => `${name}${e.available ? (e.version ? ` ${e.version}` : '') : ' (unavailable)'}`).join(', ');
  const rows = agent.interfaces.map((i) => {
    const job = leased.get(`${agent.id}:${i.name}`);
    return [i.name, i.operstate, speed(i.speedBitsPerSecond), i.mtu ?? '–', i.addresses.map((a) => `${a.address}/${a.prefixLength}`).join(' '), i.driver ?? '–', job ? h('span', { class: 'leased' }, 'by ', jobLink(job)) : 'free'];
  });
  return h('section', { class: 'agent', 'data-agent': agent.id },
    h('h2', {}, agent.id, ' ', h('span', { class: `status ${agent.online ? 'status-online' : 'status-offline'}` }, agent.online ? 'online' : 'offline')),
    h('p', {}, `${agent.hostname} · kernel ${agent.kernel} · niclab ${agent.version} · seen ${when(agent.lastSeen)} · engines: ${engines}`),
    table(['interface', 'state', 'speed', 'MTU', 'addresses', 'driver', 'leased now'], rows, { class: 'interfaces' }));
}

/** Agents and their interfaces, read again every 5 s. */
export async function agentsPage({ root, signal, every }: PageContext): Promise<void> {
  const list = h('div', { id: 'agents' });
  root.replaceChildren(h('h1', {}, 'Agents'), list);
  every(5000, async () => {
    const [agents, leased] = await Promise.all([getJson<{ items: Agent[] }>('/v1/agents', signal), leasedNow(signal)]);
    list.replaceChildren(...(agents.items.length ? agents.items.map((a) => agentSection(a, leased)) : [h('p', {}, 'No agent has registered.')]));
  });
}
