/**
 * A job's `tuning.qdisc`: which qdiscs it may name, tc's words for one, and the plan that puts
 * it on an interface and the exact previous setup back. Pure: the agent reads `tc -j qdisc show
 * ... invisible`, asks for a plan, and runs it.
 */
import type { FieldError } from './contract.js';
import type { components } from '../generated/openapi.js';

export type QdiscTuning = components['schemas']['QdiscTuning'];

export const QDISC_KINDS: readonly QdiscTuning['kind'][] = ['pfifo', 'bfifo', 'pfifo_fast', 'fq_codel', 'fq'];

/** One qdisc as `tc -j qdisc show dev IF invisible` prints it. */
export interface TcQdisc {
  kind: string;
  handle: string;
  root?: boolean;
  parent?: string;
  options?: Record<string, unknown>;
}

/** A step that puts the previous setup back: one tc command, or tbf's own default child made again. */
export type RestoreStep =
  | { tc: string[] }
  | { tbfDefaultChild: { dev: string; handle: string; rateBitsPerSecond: number; burstBytes: number; limitBytes: number; expect: TcQdisc[] } };

export interface QdiscPlan {
  /** `root`, or the shaper's class the qdisc goes under (`8001:1`). */
  parent: string;
  /** tc's arguments that put the qdisc in. */
  apply: string[];
  /** In order, after the run. */
  restore: RestoreStep[];
}

const PACKETS: [number, number] = [1, 1_000_000];
const BYTES: [number, number] = [1500, 1_000_000_000];
const HANDLE = /^[0-9a-f]{1,4}:$/;

/** What the schema cannot say: each kind's own bounds (the agent checks them again before tc sees a value). */
export function qdiscErrors(q: QdiscTuning, root: string): FieldError[] {
  const errors: FieldError[] = [];
  if (!QDISC_KINDS.includes(q.kind)) return [{ field: `${root}.kind`, message: `is not a qdisc niclab may set (allowed: ${QDISC_KINDS.join(', ')})` }];
  if (q.limit !== undefined) {
    const [low, high] = q.kind === 'bfifo' ? BYTES : PACKETS;
    if (q.kind === 'pfifo_fast') errors.push({ field: `${root}.limit`, message: 'pfifo_fast takes no limit (it follows txqueuelen)' });
    else if (!Number.isInteger(q.limit) || q.limit < low || q.limit > high) errors.push({ field: `${root}.limit`, message: `must be an integer from ${low} to ${high} ${q.kind === 'bfifo' ? 'bytes' : 'packets'} for ${q.kind}` });
  }
  const seconds: [keyof QdiscTuning & ('target' | 'interval'), number, number][] = [['target', 0.0001, 1], ['interval', 0.001, 10]];
  for (const [name, low, high] of seconds) {
    const value = q[name];
    if (value === undefined) continue;
    if (q.kind !== 'fq_codel') errors.push({ field: `${root}.${name}`, message: 'applies to kind "fq_codel" only' });
    else if (typeof value !== 'number' || !(value >= low && value <= high)) errors.push({ field: `${root}.${name}`, message: `must be from ${low} to ${high} seconds` });
  }
  if (q.ecn !== undefined && q.kind !== 'fq_codel') errors.push({ field: `${root}.ecn`, message: 'applies to kind "fq_codel" only' });
  return errors;
}

const micros = (seconds: number) => `${Math.round(seconds * 1e6)}us`;

/** tc's words for the qdisc itself (after `parent X`): its kind and parameters. */
export function qdiscArgs(q: QdiscTuning): string[] {
  const args: string[] = [q.kind];
  if (q.limit !== undefined) args.push('limit', String(q.limit));
  if (q.kind === 'fq_codel') {
    if (q.target !== undefined) args.push('target', micros(q.target));
    if (q.interval !== undefined) args.push('interval', micros(q.interval));
    if (q.ecn !== undefined) args.push(q.ecn ? 'ecn' : 'noecn');
  }
  return args;
}

const integer = (value: unknown): number | null => (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : null);

/** tc's words that make a visible classless qdisc again exactly, or null when niclab cannot. */
function rebuild(q: TcQdisc): string[] | null {
  if (!HANDLE.test(q.handle)) return null;
  if (q.kind === 'pfifo_fast') return ['handle', q.handle, 'pfifo_fast'];
  if (q.kind !== 'pfifo' && q.kind !== 'bfifo') return null;
  const limit = integer(q.options?.limit);
  return limit === null ? null : ['handle', q.handle, q.kind, 'limit', String(limit)];
}

/** What `tc -j qdisc show` says about the setup, without its counters: what must be the same after. */
export function qdiscSetup(qdiscs: TcQdisc[]): TcQdisc[] {
  return qdiscs.map((q) => ({ kind: q.kind, handle: q.handle, ...(q.root ? { root: true } : {}), ...(q.parent ? { parent: q.parent } : {}), options: q.options ?? {} }));
}

/**
 * Where `wanted` goes on `dev` and how the setup `current` comes back: under a root tbf as its
 * child (tbf's queue is the link's queue), else as the root. A string says why not (nothing
 * changed): a setup niclab could not put back exactly is refused.
 */
export function planQdisc(dev: string, wanted: QdiscTuning, current: TcQdisc[]): QdiscPlan | string {
  const root = current.find((q) => q.root);
  if (!root) return `${dev} has no root qdisc`;
  if (root.kind === 'tbf') {
    if (!HANDLE.test(root.handle)) return `${dev}'s tbf has handle "${root.handle}"`;
    const cls = `${root.handle}1`;
    const apply = ['qdisc', 'replace', 'dev', dev, 'parent', cls, ...qdiscArgs(wanted)];
    const child = current.find((q) => q.parent === cls);
    if (!child) return `${dev}'s tbf ${root.handle} has no child qdisc to put back`;
    const plain = Object.keys(root.options ?? {}).every((k) => ['rate', 'burst', 'lat', 'limit'].includes(k));
    const [rate, burst, limit] = [integer(root.options?.rate), integer(root.options?.burst), integer(child.options?.limit)];
    if (child.handle === '0:' && child.kind === 'bfifo') {
      // tbf's own child (invisible, handle 0) comes back only from tbf itself: its child removed, then tbf changed with its limit.
      if (!plain || rate === null || burst === null || limit === null) return `${dev}'s tbf ${root.handle} has options niclab cannot set again (${JSON.stringify(root.options)})`;
      return { parent: cls, apply, restore: [{ tbfDefaultChild: { dev, handle: root.handle, rateBitsPerSecond: rate * 8, burstBytes: burst, limitBytes: limit, expect: qdiscSetup(current) } }] };
    }
    const again = rebuild(child);
    if (!again) return `${dev}'s tbf ${root.handle} has a ${child.kind} child niclab could not put back exactly`;
    return { parent: cls, apply, restore: [{ tc: ['qdisc', 'replace', 'dev', dev, 'parent', cls, ...again] }] };
  }
  const apply = ['qdisc', 'replace', 'dev', dev, 'root', ...qdiscArgs(wanted)];
  // Handle 0 is the kernel's own default (noqueue, pfifo_fast, mq and its children): deleting ours makes it again.
  if (root.handle === '0:') {
    const set = current.find((q) => !q.root && q.handle !== '0:');
    if (set) return `${dev} has a ${set.kind} ${set.handle} under its default root, which niclab could not put back exactly`;
    return { parent: 'root', apply, restore: [{ tc: ['qdisc', 'del', 'dev', dev, 'root'] }] };
  }
  const again = rebuild(root);
  if (!again || current.length > 1) return `${dev}'s root qdisc is ${root.kind} ${root.handle}${current.length > 1 ? ' with children' : ''}, which niclab could not put back exactly`;
  return { parent: 'root', apply, restore: [{ tc: ['qdisc', 'replace', 'dev', dev, 'root', ...again] }] };
}

/** tc's arguments that set a root tbf back as it was, at `burst` bytes (tc rounds a burst it prints down by up to one tick). */
export function tbfChangeArgs(step: Extract<RestoreStep, { tbfDefaultChild: unknown }>['tbfDefaultChild'], burst: number): string[] {
  return ['qdisc', 'change', 'dev', step.dev, 'root', 'handle', step.handle, 'tbf', 'rate', `${step.rateBitsPerSecond}bit`, 'burst', `${burst}b`, 'limit', String(step.limitBytes)];
}

/** What the bursts tried so far read back as: below the printed one (`low`) or above it (`high`). */
export interface BurstSearch {
  low?: number;
  high?: number;
}

/**
 * The burst to set tbf with next (tc prints a burst rounded down to its ticks, and turns the one
 * it is given into ticks rounding again): first one byte over the printed one; then, from what
 * the last try `tried` read back as (`read`), further up or down by what it missed, or halfway
 * between the tries that read below and above once there are both.
 */
export function nextTbfBurst(printed: number, search: BurstSearch, tried?: number, read?: number): number {
  if (tried === undefined || read === undefined) return printed + 1;
  if (read === printed) return tried;
  if (read < printed) search.low = tried;
  if (read > printed) search.high = tried;
  if (search.low !== undefined && search.high !== undefined) return Math.floor((search.low + search.high) / 2);
  return tried + (printed - read);
}
