import { flowsOf, getJson, type Schemas } from '../api.js';
import { h, jobLink, shortId, table, when } from '../dom.js';
import type { PageContext } from '../page.js';

type Agent = Schemas['Agent'];

function speed(bps: number | null): string {
  if (bps === null) return '–';
  return bps >= 1e9 ? `${bps / 1e9} Gbit/s` : `${bps / 1e6} Mbit/s`;
}

/** Which running job names each interface, to link a lease's run to its job. */
async function runningJobs(signal: AbortSignal): Promise<Map<string, string>> {
  const running = (await getJson<Schemas['JobPage']>('/v1/jobs?status=running&limit=200', signal)).items;
  const byInterface = new Map<string, string>();
  for (const job of running) for (const flow of flowsOf(job)) for (const end of [flow.from, flow.to]) byInterface.set(`${end.agent}:${end.interface}`, job.id);
  return byInterface;
}

function agentSection(agent: Agent, jobs: Map<string, string>): HTMLElement {
  const engines = Object.entries(agent.engines).map(([name, e]) => `${name}${e.available ? (e.version ? ` ${e.version}` : '') : ' (unavailable)'}`).join(', ');
  const rows = agent.interfaces.map((i) => {
    const job = jobs.get(`${agent.id}:${i.name}`);
    const lease = i.leasedBy ? h('span', { class: 'leased', title: `run ${i.leasedBy}` }, 'by ', job ? jobLink(job) : `run ${shortId(i.leasedBy)}`) : 'free';
    return [i.name, i.operstate, speed(i.speedBitsPerSecond), i.mtu ?? '–', i.addresses.map((a) => `${a.address}/${a.prefixLength}`).join(' '), i.driver ?? '–', lease];
  });
  return h('section', { class: 'agent', 'data-agent': agent.id },
    h('h2', {}, agent.id, ' ', h('span', { class: `status ${agent.online ? 'status-online' : 'status-offline'}` }, agent.online ? 'online' : 'offline')),
    h('p', {}, `${agent.hostname} · kernel ${agent.kernel} · niclab ${agent.version} · seen ${when(agent.lastSeen)} · engines: ${engines}`),
    table(['interface', 'state', 'speed', 'MTU', 'addresses', 'driver', 'leased now'], rows, { class: 'interfaces' }));
}

/** Agents and their interfaces, with the run that holds each now (linked to its job), read again every 5 s. */
export async function agentsPage({ root, signal, every }: PageContext): Promise<void> {
  const list = h('div', { id: 'agents' });
  root.replaceChildren(h('h1', {}, 'Agents'), list);
  every(5000, async () => {
    const [agents, jobs] = await Promise.all([getJson<{ items: Agent[] }>('/v1/agents', signal), runningJobs(signal)]);
    list.replaceChildren(...(agents.items.length ? agents.items.map((a) => agentSection(a, jobs)) : [h('p', {}, 'No agent has registered.')]));
  });
}
