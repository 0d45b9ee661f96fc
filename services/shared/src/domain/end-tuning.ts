/**
 * Each end's own tuning (openapi.yaml's Tuning): the job's shorthand for both ends merged with
 * its role's block, in a run at a sweep point (a swept MTU over both ends; a factorial's cell
 * saying whose block applies). What one host or one interface would need two of at once is
 * refused, and a run takes whole hosts only where an end of it sets sysctls.
 */
import type { FieldError, JobSpec, SweepPoint } from './contract.js';
import type { EndTuning } from './tuning-rules.js';
import { legsOf } from './plan.js';

export type Role = 'sender' | 'receiver';
export const ROLES: readonly Role[] = ['sender', 'receiver'];

/** Settings of an interface (the rest of an end's tuning, `sysctl`, is its host's). */
const INTERFACE_KEYS = ['mtu', 'txqueuelen', 'ethtool', 'qdisc'] as const;

/** A setting as canonical text (object keys sorted), so two equal settings read the same whatever their keys' order. */
const canonical = (value: unknown): string =>
  value !== null && typeof value === 'object' ? `{${Object.keys(value).sort().map((k) => `${JSON.stringify(k)}:${canonical((value as Record<string, unknown>)[k])}`).join(',')}}` : JSON.stringify(value) ?? 'undefined';

/** Whether two tunings (or settings) are the same whatever the order of their keys. */
export const sameTuning = (a: unknown, b: unknown) => canonical(a) === canonical(b);

/** Whether a run at `point` applies `role`'s block: always, but in a factorial's cell that leaves that end untuned. */
export function blockApplies(point: SweepPoint, role: Role): boolean {
  return point.tuned === undefined || point.tuned === 'both' || point.tuned === role;
}

/** The shorthand merged with a block key by key, `sysctl` and `ethtool` name by name (the block's value wins); empty maps left out. */
export function mergeTuning(shorthand: EndTuning, block: EndTuning | undefined): EndTuning {
  const merged: EndTuning = { ...shorthand, ...block };
  for (const map of ['sysctl', 'ethtool'] as const) {
    const names = { ...shorthand[map], ...block?.[map] };
    if (Object.keys(names).length > 0) (merged as Record<string, unknown>)[map] = names;
    else delete merged[map];
  }
  return merged;
}

/** The tuning one end applies in a run at `point`, or undefined when it applies none. */
export function endTuningAt(spec: Pick<JobSpec, 'tuning'>, point: SweepPoint, role: Role): EndTuning | undefined {
  const { sender, receiver, ...shorthand } = spec.tuning ?? {};
  const merged = mergeTuning(shorthand, blockApplies(point, role) ? (role === 'sender' ? sender : receiver) : undefined);
  if (point.mtu !== undefined) merged.mtu = point.mtu;
  return Object.keys(merged).length > 0 ? merged : undefined;
}

/** One end of one leg of a run, with the tuning it applies. */
export interface TunedEnd {
  agent: string;
  interface: string;
  role: Role;
  flowIndex: number;
  direction: 'forward' | 'reverse';
  tuning: EndTuning | undefined;
}

/** Every end of a run at `point`: each leg's sender and receiver. */
export function tunedEnds(spec: JobSpec, point: SweepPoint): TunedEnd[] {
  const tuning = { sender: endTuningAt(spec, point, 'sender'), receiver: endTuningAt(spec, point, 'receiver') };
  return legsOf(spec, point).flatMap((leg) =>
    ROLES.map((role) => ({ ...leg[role], role, flowIndex: leg.flowIndex, direction: leg.direction, tuning: tuning[role] })),
  );
}

/** The agents whose ends set sysctls in a run at `point`: the run takes those hosts whole. */
export function sysctlHosts(spec: JobSpec, point: SweepPoint): string[] {
  return [...new Set(tunedEnds(spec, point).filter((end) => Object.keys(end.tuning?.sysctl ?? {}).length > 0).map((end) => end.agent))];
}

const endName = (end: TunedEnd) => `${end.agent}:${end.interface} as the ${end.role} of flow ${end.flowIndex}${end.direction === 'reverse' ? "'s reverse leg" : ''}`;
const shown = (value: unknown) => (value === undefined ? 'as found' : typeof value === 'object' ? JSON.stringify(value) : String(value));

/** The field that sets `path` (`sysctl.net.ipv4.tcp_rmem`, `mtu`) for one of the two ends: its role's block, the sender's first, where one sets it. */
function fieldOf(spec: JobSpec, path: string[], ends: [TunedEnd, TunedEnd]): string {
  const sets = (role: Role) => path.reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], spec.tuning?.[role]) !== undefined;
  const role = ROLES.find((r) => ends.some((e) => e.role === r) && sets(r));
  return ['body.tuning', ...(role ? [role] : []), ...path].join('.');
}

/**
 * Where a run at `point` would need two tunings of one host (its sysctls) or one interface at
 * once: a bidir leg whose ends' blocks differ, a host that sends in one flow and receives in
 * another. Each a 422 naming the block's field that makes the difference.
 */
export function tuningConflicts(spec: JobSpec, point: SweepPoint): FieldError[] {
  const ends = tunedEnds(spec, point);
  const cell = point.tuned === undefined ? '' : ` (in the factorial's "${point.tuned}" cell)`;
  const errors: FieldError[] = [];
  // Each end against the first end on its host, and on its interface.
  const hosts = new Map<string, TunedEnd>();
  const interfaces = new Map<string, TunedEnd>();
  for (const end of ends) {
    const host = hosts.get(end.agent) ?? (hosts.set(end.agent, end), end);
    const sysctls = [host.tuning?.sysctl ?? {}, end.tuning?.sysctl ?? {}] as const;
    const name = [...new Set([...Object.keys(sysctls[0]), ...Object.keys(sysctls[1])])].find((n) => sysctls[0][n] !== sysctls[1][n]);
    if (name !== undefined) {
      errors.push({ field: fieldOf(spec, ['sysctl', name], [host, end]), message: `would set ${name} to two values on agent ${end.agent} at once${cell}: ${shown(sysctls[0][name])} for ${endName(host)}, ${shown(sysctls[1][name])} for ${endName(end)}; a host's sysctls are one for the whole run` });
    }
    const key = `${end.agent}\u0000${end.interface}`;
    const same = interfaces.get(key) ?? (interfaces.set(key, end), end);
    const setting = INTERFACE_KEYS.find((k) => canonical(same.tuning?.[k]) !== canonical(end.tuning?.[k]));
    if (setting !== undefined) {
      errors.push({ field: fieldOf(spec, [setting], [same, end]), message: `would set ${setting} of ${end.agent}:${end.interface} to two values at once${cell}: ${shown(same.tuning?.[setting])} for ${endName(same)}, ${shown(end.tuning?.[setting])} for ${endName(end)}` });
    }
  }
  return errors;
}
