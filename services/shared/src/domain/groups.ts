/**
 * Groups of flows chosen by agent labels (perfSONAR pSConfig's mesh, disjoint and star):
 * expanded against the live inventory into pairs, each a run of its own, with the members
 * left out and why. Pure: the inventory is given.
 */
import { BlockList, isIP, isIPv4 } from 'node:net';
import type { Agent, AgentInterface, Endpoint, FieldError, FlowGroup, FlowSpec, GroupMembers, Job, JobRequest, JobSpec, SkippedMember } from './contract.js';
import { bindAddress, isUsable } from './interfaces.js';
import { planRounds } from './rounds.js';

export interface Expansion {
  pairs: FlowSpec[];
  skipped: SkippedMember[];
}

/** True when every label the members ask for is the agent's. */
function hasLabels(agent: Agent, labels: Record<string, string>): boolean {
  return Object.entries(labels).every(([key, value]) => agent.labels[key] === value);
}

/** A prefix as a matcher of addresses (`198.18.1.0/24`, `2001:db8::/32`). */
function prefixMatcher(prefix: string): (address: string) => boolean {
  const [network = '', length = ''] = prefix.split('/');
  const family = isIPv4(network) ? 'ipv4' : 'ipv6';
  const list = new BlockList();
  list.addSubnet(network, Number(length), family);
  return (address) => (isIPv4(address) ? family === 'ipv4' : family === 'ipv6') && list.check(address, family);
}

/** Prefixes the pattern lets through that are not addresses (`2:a/3`, `1.2.3.4/40`), named by field under `root`. */
export function groupErrors(group: FlowGroup, root: string): FieldError[] {
  const errors: FieldError[] = [];
  for (const side of ['members', 'a', 'b', 'center'] as const) {
    const prefix = group[side]?.prefix;
    if (prefix === undefined) continue;
    const [network = '', length = ''] = prefix.split('/');
    const family = isIP(network);
    if (family === 0 || Number(length) > (family === 4 ? 32 : 128)) errors.push({ field: `${root}.${side}.prefix`, message: `"${prefix}" is not an address prefix (e.g. 198.18.1.0/24)` });
  }
  return errors;
}

/** The interfaces of an agent that the members' `interface` or `prefix` selects. */
function selectInterfaces(agent: Agent, members: GroupMembers): AgentInterface[] {
  if (members.interface !== undefined) return agent.interfaces.filter((i) => i.name === members.interface);
  const inPrefix = prefixMatcher(members.prefix!);
  return agent.interfaces.filter((i) => i.addresses.some((a) => inPrefix(a.address)));
}

/** The endpoints a set of members names now, one per agent, and the agents left out with the reason. */
export function selectMembers(members: GroupMembers, agents: readonly Agent[]): { endpoints: Endpoint[]; skipped: SkippedMember[] } {
  const endpoints: Endpoint[] = [];
  const skipped: SkippedMember[] = [];
  const wanted = members.interface ?? `the interface in ${members.prefix}`;
  for (const agent of [...agents].sort((a, b) => a.id.localeCompare(b.id))) {
    if (!hasLabels(agent, members.labels)) continue;
    const skip = (reason: SkippedMember['reason'], message: string, iface: string | null = null) => skipped.push({ agent: agent.id, interface: iface, reason, message });
    if (!agent.online) {
      skip('offline', `agent "${agent.id}" is offline (last seen ${agent.lastSeen})`, members.interface ?? null);
      continue;
    }
    const found = selectInterfaces(agent, members);
    const iface = found[0];
    if (!iface) skip('no_interface', `agent "${agent.id}" has no ${members.interface ? `interface "${wanted}"` : `interface with an address in ${members.prefix}`}`, members.interface ?? null);
    else if (found.length > 1) skip('ambiguous_interface', `agent "${agent.id}" has ${found.length} interfaces with an address in ${members.prefix} (${found.map((i) => i.name).join(', ')})`);
    else if (!isUsable(iface)) skip('interface_down', `interface "${iface.name}" on agent "${agent.id}" is ${iface.operstate}`, iface.name);
    else if (!bindAddress(iface)) skip('no_address', `interface "${iface.name}" on agent "${agent.id}" has no address`, iface.name);
    else endpoints.push({ agent: agent.id, interface: iface.name });
  }
  return { endpoints, skipped };
}

/** Every pair from `froms` to `tos`, in order, leaving out pairs within one agent (they would not cross a wire). */
function product(froms: Endpoint[], tos: Endpoint[]): FlowSpec[] {
  return froms.flatMap((from) => tos.filter((to) => to.agent !== from.agent).map((to) => ({ from, to })));
}

/** A member skipped in two sets is reported once. */
function uniqueSkips(lists: SkippedMember[][]): SkippedMember[] {
  const seen = new Set<string>();
  return lists.flat().filter((s) => {
    const key = `${s.agent}\u0000${s.interface}\u0000${s.reason}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/** A group's pairs against the inventory now: a mesh's every ordered pair, disjoint's a × b, a star's to and/or from the center. */
export function expandGroup(group: FlowGroup, agents: readonly Agent[]): Expansion {
  const select = (members: GroupMembers | undefined) => selectMembers(members ?? { labels: {}, interface: '' }, agents);
  if (group.shape === 'mesh') {
    const { endpoints, skipped } = select(group.members);
    return { pairs: product(endpoints, endpoints), skipped };
  }
  if (group.shape === 'disjoint') {
    const a = select(group.a);
    const b = select(group.b);
    return { pairs: product(a.endpoints, b.endpoints), skipped: uniqueSkips([a.skipped, b.skipped]) };
  }
  const members = select(group.members);
  const center = select(group.center);
  const direction = group.starDirection ?? 'both';
  const pairs = [
    ...(direction !== 'from' ? product(members.endpoints, center.endpoints) : []),
    ...(direction !== 'to' ? product(center.endpoints, members.endpoints) : []),
  ];
  return { pairs, skipped: uniqueSkips([center.skipped, members.skipped]) };
}

/** A submitted spec with its flows as pairs: a list as given; a group expanded now, with its rounds and skipped members. */
export function expandSpec(input: JobRequest, agents: readonly Agent[]): { spec: JobSpec; expansion?: NonNullable<Job['expansion']>; errors: FieldError[] } {
  if (Array.isArray(input.flows)) return { spec: { ...input, flows: input.flows }, errors: [] };
  const group = input.flows;
  const errors = groupErrors(group, 'body.flows');
  if (errors.length > 0) return { spec: { ...input, flows: [], group }, errors };
  const { pairs, skipped } = expandGroup(group, agents);
  if (pairs.length === 0) {
    const why = skipped.length > 0 ? `; skipped: ${skipped.map((s) => s.message).join('; ')}` : '';
    errors.push({ field: 'body.flows', message: `the group has no pair now: fewer than two members match its labels and interface${why}` });
  }
  if (input.search) errors.push({ field: 'body.search', message: 'does not apply to a group of flows' });
  if (typeof input.repeat === 'object') errors.push({ field: 'body.repeat', message: 'must be a number with a group of flows (each pair runs `repeat` times)' });
  return { spec: { ...input, flows: pairs, group }, expansion: { rounds: planRounds(pairs), skipped }, errors };
}

/** A stored spec as it was asked for: a group's pairs back to the group (a schedule keeps it so, to expand it at each firing). */
export function asRequest(spec: JobSpec): JobRequest {
  const { group, ...rest } = spec;
  return group ? { ...rest, flows: group } : rest;
}
