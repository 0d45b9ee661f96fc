/**
 * `niclab run` options to a job spec: sizes like 8k, rates like 70kpps or 1gbit, endpoints
 * like A:eth1, sweeps like w=8k,16k. Everything is checked here for a readable message, and
 * again by the API against openapi.yaml.
 */
import type { FlowGroup, GroupMembers, JobRequest, JobSpec } from '@niclab/shared/domain/contract';
import { PROBE_DEFAULTS } from '@niclab/shared/domain/test-kinds/probe/index';
import type { components } from '@niclab/shared/generated/openapi';
import { AGENT_ID, INTERFACE_NAME } from '@niclab/shared/domain/names';
import { FEATURES, RINGS, type EndTuning } from '@niclab/shared/domain/tuning-rules';

export class ArgumentError extends Error {}

type UdpRate = components['schemas']['UdpRate'];

const UNITS: Record<string, number> = { '': 1, k: 1024, m: 1024 ** 2, g: 1024 ** 3 };

/** Bytes: `1500`, `8k` (KiB, as nttcp -w 8 and iperf -w 8K mean), `1m`. */
export function parseSize(text: string, what: string): number {
  const m = /^(\d+(?:\.\d+)?)([kmg]?)(?:i?b)?$/i.exec(text.trim());
  if (!m) throw new ArgumentError(`${what}: "${text}" is not a size like 1500, 8k or 1m`);
  return Math.round(Number(m[1]) * UNITS[m[2]!.toLowerCase()]!);
}

/** A UDP rate: `70kpps` (datagrams/s) or `1gbit`, `100mbit`, `500kbit` (bits/s, decimal). */
export function parseRate(text: string): UdpRate {
  const m = /^(\d+(?:\.\d+)?)([kmg]?)(pps|bit|bps|bit\/s)$/i.exec(text.trim());
  if (!m) throw new ArgumentError(`--rate: "${text}" is not a rate like 70kpps or 100mbit`);
  const value = Math.round(Number(m[1]) * { '': 1, k: 1e3, m: 1e6, g: 1e9 }[m[2]!.toLowerCase() as '' | 'k' | 'm' | 'g']);
  return m[3]!.toLowerCase() === 'pps' ? { packetsPerSecond: value } : { bitsPerSecond: value };
}

export function parseEndpoint(text: string, what: string): { agent: string; interface: string } {
  const [agent, iface, extra] = text.split(':');
  if (!agent || !iface || extra !== undefined || !AGENT_ID.test(agent) || !INTERFACE_NAME.test(iface)) {
    throw new ArgumentError(`${what}: "${text}" is not AGENT:INTERFACE (e.g. A:eth1)`);
  }
  return { agent, interface: iface };
}

/** Flows from --from and --to: one to many, many to one (fan-in), or pairwise. */
export function flowsOf(from: string[], to: string[]): JobSpec['flows'] {
  if (from.length === 0 || to.length === 0) throw new ArgumentError('give at least one --from and one --to');
  const f = from.map((e) => parseEndpoint(e, '--from'));
  const t = to.map((e) => parseEndpoint(e, '--to'));
  if (f.length === 1) return t.map((dst) => ({ from: f[0]!, to: dst }));
  if (t.length === 1) return f.map((src) => ({ from: src, to: t[0]! }));
  if (f.length === t.length) return f.map((src, i) => ({ from: src, to: t[i]! }));
  throw new ArgumentError(`${f.length} --from and ${t.length} --to: give one of either, or as many of each (pairs)`);
}

/** `--mesh rack=a,role=lab:eth1` or `--mesh rack=a:198.18.1.0/24`: the members by labels, and an interface by name or by an address prefix. */
export function parseMembers(text: string, what: string): GroupMembers {
  const at = text.indexOf(':');
  const labelsText = at < 0 ? '' : text.slice(0, at);
  const selector = text.slice(at + 1);
  if (at < 0 || !selector) throw new ArgumentError(`${what}: "${text}" is not LABELS:INTERFACE (e.g. rack=a:eth1 or rack=a:198.18.1.0/24)`);
  const labels: Record<string, string> = {};
  for (const pair of labelsText.split(',').filter(Boolean)) {
    const m = /^([A-Za-z0-9._-]+)=([A-Za-z0-9._-]*)$/.exec(pair);
    if (!m) throw new ArgumentError(`${what}: "${pair}" is not KEY=VALUE`);
    labels[m[1]!] = m[2]!;
  }
  if (selector.includes('/')) return { labels, prefix: selector };
  if (!INTERFACE_NAME.test(selector)) throw new ArgumentError(`${what}: "${selector}" is not an interface name or an address prefix`);
  return { labels, interface: selector };
}

const SWEEP_NAMES: Record<string, { field: keyof NonNullable<JobSpec['sweep']>; parse: (v: string) => unknown }> = {
  l: { field: 'bufferLength', parse: (v) => parseSize(v, '--sweep l') },
  w: { field: 'socketBuffer', parse: (v) => parseSize(v, '--sweep w') },
  P: { field: 'streams', parse: (v) => integer(v, '--sweep P') },
  nodelay: { field: 'noDelay', parse: (v) => boolean(v, '--sweep nodelay') },
  size: { field: 'packetSize', parse: (v) => parseSize(v, '--sweep size') },
  rate: { field: 'rate', parse: (v) => parseRate(v) },
  request: { field: 'requestSize', parse: (v) => parseSize(v, '--sweep request') },
  response: { field: 'responseSize', parse: (v) => parseSize(v, '--sweep response') },
  dir: { field: 'direction', parse: (v) => direction(v) },
  mtu: { field: 'mtu', parse: (v) => integer(v, '--sweep mtu') },
  io: { field: 'io', parse: (v) => io(v) },
};

function io(text: string): 'memory' | 'file' {
  if (text !== 'memory' && text !== 'file') throw new ArgumentError(`--sweep io: "${text}" is not memory or file`);
  return text;
}

function direction(text: string): 'forward' | 'reverse' | 'bidir' {
  if (text !== 'forward' && text !== 'reverse' && text !== 'bidir') throw new ArgumentError(`--sweep dir: "${text}" is not forward, reverse or bidir`);
  return text;
}

function integer(text: string, what: string): number {
  if (!/^\d+$/.test(text)) throw new ArgumentError(`${what}: "${text}" is not a whole number`);
  return Number(text);
}

function boolean(text: string, what: string): boolean {
  if (!['on', 'off', 'true', 'false'].includes(text)) throw new ArgumentError(`${what}: "${text}" is not on/off`);
  return text === 'on' || text === 'true';
}

/** `w=8k,16k,32k` → sweep.socketBuffer; names as nttcp and iperf spell them (l, w, P, ...). */
export function parseSweep(texts: string[]): JobSpec['sweep'] | undefined {
  if (texts.length === 0) return undefined;
  const sweep: Record<string, unknown[]> = {};
  for (const text of texts) {
    const [name, list] = text.split('=');
    const dimension = name ? SWEEP_NAMES[name] : undefined;
    if (!dimension || !list) throw new ArgumentError(`--sweep: "${text}" is not NAME=V1,V2,... with NAME one of ${Object.keys(SWEEP_NAMES).join(', ')}`);
    sweep[dimension.field] = list.split(',').map(dimension.parse);
  }
  return sweep as JobSpec['sweep'];
}

/** One `KEY=VALUE` of a tuning flag into `tuning`: mtu, txqueuelen, a sysctl (`net.…`), an offload (gro=off), a ring size, qdisc=KIND and qdisc.limit. */
function tuneOne(tuning: EndTuning, key: string, value: string, flag: string): void {
  const ethtool = (): NonNullable<EndTuning['ethtool']> => (tuning.ethtool ??= {});
  if (key === 'mtu' || key === 'txqueuelen') tuning[key] = integer(value, `${flag} ${key}`);
  else if (key.startsWith('net.')) tuning.sysctl = { ...tuning.sysctl, [key]: value.trim().replace(/\s+/g, ' ') };
  else if (FEATURES[key]) (ethtool() as Record<string, string>)[key] = boolean(value, `${flag} ${key}`) ? 'on' : 'off';
  else if (RINGS[key]) (ethtool() as Record<string, number>)[key] = integer(value, `${flag} ${key}`);
  else if (key === 'qdisc') tuning.qdisc = { ...tuning.qdisc, kind: value as NonNullable<EndTuning['qdisc']>['kind'] };
  else if (key === 'qdisc.limit') tuning.qdisc = { ...tuning.qdisc!, limit: integer(value, `${flag} qdisc.limit`) };
  else throw new ArgumentError(`${flag}: "${key}" is not a setting: mtu, txqueuelen, a sysctl (net.…), ${[...Object.keys(FEATURES), ...Object.keys(RINGS)].join(', ')}, qdisc or qdisc.limit`);
}

/**
 * `--tune-sender 'net.ipv4.tcp_wmem=4096 16384 4194304,mtu=9000'`: settings for one end (or,
 * `--tune`, both), comma-separated KEY=VALUE pairs, the flag given as often as wanted. The API
 * checks the names and values against its allow-lists.
 */
export function parseTuning(texts: string[], flag: string): EndTuning | undefined {
  if (texts.length === 0) return undefined;
  const tuning: EndTuning = {};
  for (const pair of texts.flatMap((t) => t.split(','))) {
    const at = pair.indexOf('=');
    if (at < 1 || at === pair.length - 1) throw new ArgumentError(`${flag}: "${pair}" is not KEY=VALUE (e.g. net.ipv4.tcp_rmem=4096 131072 4194304 or mtu=9000)`);
    tuneOne(tuning, pair.slice(0, at).trim(), pair.slice(at + 1), flag);
  }
  if (tuning.qdisc && !tuning.qdisc.kind) throw new ArgumentError(`${flag}: qdisc.limit needs qdisc=KIND`);
  return tuning;
}

/** `--tune`, `--tune-sender`, `--tune-receiver` into a job's `tuning` (undefined when none is given). */
export function tuningOf(o: Pick<RunOptions, 'tune' | 'tune-sender' | 'tune-receiver'>): JobSpec['tuning'] {
  const shorthand = parseTuning(o.tune ?? [], '--tune');
  const sender = parseTuning(o['tune-sender'] ?? [], '--tune-sender');
  const receiver = parseTuning(o['tune-receiver'] ?? [], '--tune-receiver');
  if (!shorthand && !sender && !receiver) return undefined;
  return { ...shorthand, ...(sender ? { sender } : {}), ...(receiver ? { receiver } : {}) };
}

export interface RunOptions {
  from?: string[];
  to?: string[];
  engine?: string;
  t?: string;
  l?: string;
  w?: string;
  P?: string;
  nodelay?: boolean;
  udp?: boolean;
  rate?: string;
  size?: string;
  rr?: boolean;
  /** Latency under load: an rr flow (builtin, 1 stream, TCP_NODELAY) beside each path's load, idle first for `idle` seconds (default 3, 0 for none). */
  'with-rr'?: boolean;
  /** A job of the UDP latency probe (`test: probe`). */
  probe?: boolean;
  /** Latency under load: a probe flow (builtin) beside each path's load, idle first as with --with-rr. */
  'with-probe'?: boolean;
  /** The probe's interval (ms, `10` or `10ms`) and datagram size (bytes). */
  'probe-interval'?: string;
  'probe-size'?: string;
  idle?: string;
  request?: string;
  response?: string;
  reverse?: boolean;
  bidir?: boolean;
  repeat?: string;
  sweep?: string[];
  interval?: string;
  label?: string[];
  /** `niclab search`: a partial drop rate (e.g. 0.1%) instead of the no-drop rate, the bounds, the resolution, confirming trials. */
  pdr?: string;
  min?: string;
  max?: string;
  resolution?: string;
  confirm?: string;
  /** `niclab search --goal ndr --goal pdr=0.5%`: an MLRsearch of these goals instead of a binary search. */
  goal?: string[];
  mlrsearch?: boolean;
  /** `--latency-at 10%,50%,90%`: an MLRsearch's latency runs at these fractions of its PDR. */
  'latency-at'?: string;
  /** `--exceed-ratio 70%`, `--duration-sum 31`: every MLRsearch goal's Goal Exceed Ratio and Goal Duration Sum (s). */
  'exceed-ratio'?: string;
  'duration-sum'?: string;
  /** Both directions of each flow, one after the other (sweep.direction). */
  'both-directions'?: boolean;
  /** A mesh group instead of --from/--to: LABELS:INTERFACE. */
  mesh?: string;
  /** A disjoint group: side a, then side b, each LABELS:INTERFACE. */
  disjoint?: string[];
  /** A star group: the center, then the members, each LABELS:INTERFACE. */
  star?: string[];
  /** A star's direction: to the center, from it, or both (default). */
  'star-direction'?: string;
  /** Tuning for both ends, the sender only, the receiver only: KEY=VALUE,... (admin). */
  tune?: string[];
  'tune-sender'?: string[];
  'tune-receiver'?: string[];
  /** A factorial over which ends are tuned: none, sender, receiver, both, each --repeat times. */
  factorial?: boolean;
  /** File I/O (iperf3 -F): each sender reads this file from its agent's file directory. */
  'from-file'?: string;
  /** File I/O: each receiver writes what it gets to a temporary file in its agent's file directory. */
  'to-file'?: boolean;
  /** The sink writes synchronously (ioMode dsync). */
  dsync?: boolean;
  /** The source's page cache is dropped before it is read. */
  'drop-cache'?: boolean;
}

/** The group --mesh, --disjoint or --star asks for (at most one of them, never beside --from/--to), or null. */
export function groupOf(o: RunOptions): FlowGroup | null {
  const given = (['mesh', 'disjoint', 'star'] as const).filter((name) => (name === 'mesh' ? o.mesh !== undefined : (o[name]?.length ?? 0) > 0));
  if (given.length === 0) {
    if (o['star-direction'] !== undefined) throw new ArgumentError('--star-direction applies to --star only');
    return null;
  }
  if (given.length > 1) throw new ArgumentError(`--${given[0]} and --${given[1]} exclude each other`);
  const shape = given[0]!;
  if (o.from?.length || o.to?.length) throw new ArgumentError(`--${shape} excludes --from and --to`);
  if (o['star-direction'] !== undefined && shape !== 'star') throw new ArgumentError('--star-direction applies to --star only');
  if (shape === 'mesh') return { shape, members: parseMembers(o.mesh!, '--mesh') };
  const sides = o[shape]!;
  if (sides.length !== 2) throw new ArgumentError(`--${shape} is given twice: ${shape === 'disjoint' ? 'side a, then side b' : 'the center, then the members'} (e.g. --${shape} rack=a:eth1 --${shape} rack=b:eth1); got ${sides.length}`);
  const [first, second] = sides.map((side) => parseMembers(side, `--${shape}`)) as [GroupMembers, GroupMembers];
  if (shape === 'disjoint') return { shape, a: first, b: second };
  const direction = o['star-direction'] ?? 'both';
  if (direction !== 'to' && direction !== 'from' && direction !== 'both') throw new ArgumentError(`--star-direction: "${direction}" is not to, from or both`);
  return { shape, center: first, members: second, starDirection: direction };
}

function seconds(text: string, what: string): number {
  const value = Number(text.replace(/s$/, ''));
  if (!Number.isFinite(value) || value <= 0) throw new ArgumentError(`${what}: "${text}" is not a number of seconds`);
  return value;
}

export function specOf(o: RunOptions): Partial<JobRequest> & { flows: JobRequest['flows'] } {
  if (o.reverse && o.bidir) throw new ArgumentError('--reverse and --bidir exclude each other');
  if (o.udp && o.rr) throw new ArgumentError('--udp and --rr exclude each other');
  const flows: JobRequest['flows'] = groupOf(o) ?? flowsOf(o.from ?? [], o.to ?? []);
  const spec: Partial<JobRequest> & { flows: JobRequest['flows'] } = { flows };
  if (o.engine) spec.engine = o.engine as JobSpec['engine'];
  if (o.t) spec.duration = seconds(o.t, '-t');
  if (o.l) spec.bufferLength = parseSize(o.l, '-l');
  if (o.w) spec.socketBuffer = parseSize(o.w, '-w');
  if (o.P) spec.streams = integer(o.P, '-P');
  if (o.nodelay) spec.noDelay = true;
  if (o.interval) spec.interval = seconds(o.interval, '--interval');
  if (o.udp) {
    spec.protocol = 'udp';
    spec.udp = { packetSize: o.size ? parseSize(o.size, '--size') : 1470, rate: parseRate(o.rate ?? '1mbit') };
  } else if (o.rate || o.size) throw new ArgumentError('--rate and --size need --udp');
  const rr = { requestSize: o.request ? parseSize(o.request, '--request') : 1, responseSize: o.response ? parseSize(o.response, '--response') : 1 };
  if (o.rr) {
    spec.test = 'rr';
    spec.rr = rr;
  } else if ((o.request || o.response) && !o['with-rr']) throw new ArgumentError('--request and --response need --rr or --with-rr');
  if (o.probe) {
    if (o.udp || o.rr) throw new ArgumentError('--probe is a test of its own: not with --udp or --rr');
    spec.test = 'probe';
    spec.probe = probeParams(o);
  } else if ((o['probe-interval'] || o['probe-size']) && !o['with-probe']) throw new ArgumentError('--probe-interval and --probe-size need --probe or --with-probe');
  if (o['with-rr']) withLatency(spec, o, '--with-rr', { kind: 'rr', engine: 'builtin', streams: 1, noDelay: true, rr });
  if (o['with-probe']) withLatency(spec, o, '--with-probe', { kind: 'probe', engine: 'builtin', probe: probeParams(o) });
  if (o.idle && !o['with-rr'] && !o['with-probe']) throw new ArgumentError('--idle needs --with-rr or --with-probe');
  if (o.reverse) spec.direction = 'reverse';
  if (o.bidir) spec.direction = 'bidir';
  if (o.repeat) spec.repeat = integer(o.repeat, '--repeat');
  const sweep = parseSweep(o.sweep ?? []);
  if (sweep) spec.sweep = sweep;
  if (o['both-directions']) {
    if (o.reverse || o.bidir) throw new ArgumentError('--both-directions excludes --reverse and --bidir');
    spec.sweep = { ...spec.sweep, direction: ['forward', 'reverse'] };
  }
  const tuning = tuningOf(o);
  if (tuning) spec.tuning = tuning;
  if (o.factorial) spec.factorial = { of: 'ends' };
  const file = fileOf(o);
  if (file) spec.file = file;
  if (o.label?.length) {
    spec.labels = Object.fromEntries(
      o.label.map((l) => {
        const at = l.indexOf('=');
        if (at < 1) throw new ArgumentError(`--label: "${l}" is not KEY=VALUE`);
        return [l.slice(0, at), l.slice(at + 1)];
      }),
    );
  }
  return spec;
}

/** `--from-file PATH` and/or `--to-file` (with `--dsync`, `--drop-cache`): the job's file block, or none. */
function fileOf(o: RunOptions): JobRequest['file'] | undefined {
  const source = o['from-file'];
  if (source === undefined && !o['to-file']) {
    if (o.dsync || o['drop-cache']) throw new ArgumentError('--dsync and --drop-cache need --from-file or --to-file');
    return undefined;
  }
  if (o.dsync && !o['to-file']) throw new ArgumentError('--dsync is the sink\'s: it needs --to-file');
  if (o['drop-cache'] && source === undefined) throw new ArgumentError('--drop-cache is the source\'s: it needs --from-file');
  return {
    ...(source !== undefined ? { source } : {}),
    ...(o['to-file'] ? { sink: true } : {}),
    ...(o.dsync ? { ioMode: 'dsync' as const } : {}),
    ...(o['drop-cache'] ? { dropCache: true } : {}),
  } as JobRequest['file'];
}

/** A latency flow's own test, as `--with-rr` and `--with-probe` add it. */
type LatencyFlowTest = NonNullable<Extract<JobRequest['flows'], unknown[]>[number]['test']>;

/** `--probe-interval` and `--probe-size`, over the probe's defaults. */
function probeParams(o: RunOptions): NonNullable<JobRequest['probe']> {
  const params: NonNullable<JobRequest['probe']> = { ...PROBE_DEFAULTS };
  if (o['probe-interval']) {
    const ms = Number(o['probe-interval'].replace(/ms$/, ''));
    if (!Number.isFinite(ms) || ms <= 0) throw new ArgumentError(`--probe-interval: "${o['probe-interval']}" is not a number of milliseconds`);
    params.interval = ms;
  }
  if (o['probe-size']) params.packetSize = parseSize(o['probe-size'], '--probe-size');
  return params;
}

/**
 * `--with-rr` / `--with-probe`: one latency flow of that kind per distinct path of the load
 * (an rr flow: builtin, 1 connection, TCP_NODELAY), started with it after the idle baseline.
 */
function withLatency(spec: Partial<JobRequest> & { flows: JobRequest['flows'] }, o: RunOptions, flag: string, test: LatencyFlowTest): void {
  if (o.rr || o.udp || o.probe) throw new ArgumentError(`${flag} adds a ${test.kind} flow beside a TCP stream: not with --rr, --udp or --probe`);
  const flows = spec.flows;
  if (!Array.isArray(flows)) throw new ArgumentError(`${flag} adds a ${test.kind} flow beside each --from/--to path: not with --mesh, --disjoint or --star`);
  // The load's paths only: with both flags, the second does not add a flow beside the first one's.
  const load = flows.filter((f) => !f.test);
  const paths = new Map(load.map((f) => [`${f.from.agent}:${f.from.interface}>${f.to.agent}:${f.to.interface}`, f]));
  for (const { from, to } of paths.values()) flows.push({ from, to, test });
  const idle = o.idle === undefined ? 3 : Number(o.idle.replace(/s$/, ''));
  if (!Number.isFinite(idle) || idle < 0) throw new ArgumentError(`--idle: "${o.idle}" is not a number of seconds`);
  if (idle > 0) spec.idleBaseline = idle;
}

/** An MLRsearch goal: `ndr` (no loss), `pdr` (0.5%, CSIT's), `pdr=0.1%`. */
function goalOf(text: string): { lossRatio: number } {
  const [name, loss] = text.trim().split('=', 2);
  if (name === 'ndr' && loss === undefined) return { lossRatio: 0 };
  if (name === 'pdr') return { lossRatio: loss === undefined ? 0.005 : lossRatio(loss, '--goal pdr') };
  throw new ArgumentError(`--goal: "${text}" is not ndr, pdr or pdr=LOSS (like pdr=0.5%)`);
}

/** `--latency-at 10%,50%,90%` (or 0.1,0.5,0.9): fractions above 0, at most 1 (the API checks the range). */
const fractions = (text: string) => text.split(',').map((part) => lossRatio(part, '--latency-at', 'a fraction like 50% or 0.5'));

/** A loss ratio: `0.1%` or `0.001`. */
function lossRatio(text: string, flag = '--pdr', what = 'a loss like 0.1% or 0.001'): number {
  const m = /^(\d+(?:\.\d+)?)(%?)$/.exec(text.trim());
  if (!m) throw new ArgumentError(`${flag}: "${text}" is not ${what}`);
  return m[2] ? Number(m[1]) / 100 : Number(m[1]);
}

/** `niclab search`: a UDP stream job whose campaign is a rate search (RFC 2544), NDR unless --pdr. */
export function searchSpecOf(o: RunOptions): Partial<JobRequest> & { flows: JobRequest['flows'] } {
  if (o.rr || o.rate || o.repeat) throw new ArgumentError('--rr, --rate and --repeat do not apply to a search');
  const min = o.min ? parseRate(o.min) : undefined;
  const max = o.max ? parseRate(o.max) : undefined;
  const spec = specOf({ ...o, udp: true, rate: undefined });
  // The search sets each trial's rate; the spec's own rate is the first one tried.
  spec.udp = { packetSize: o.size ? parseSize(o.size, '--size') : 1470, rate: max ?? min ?? { packetsPerSecond: 1000 } };
  type Search = NonNullable<JobSpec['search']>;
  if (o.goal || o.mlrsearch || o['latency-at'] || o['exceed-ratio'] || o['duration-sum']) {
    if (o.pdr || o.resolution || o.confirm) throw new ArgumentError('--pdr, --resolution and --confirm are a binary search\'s: an MLRsearch takes --goal ndr|pdr[=LOSS]');
    // Every goal's, the listed ones or the default NDR and PDR 0.5%; the API checks the ranges.
    const shared = {
      ...(o['exceed-ratio'] ? { exceedRatio: lossRatio(o['exceed-ratio'], '--exceed-ratio', 'a share like 70% or 0.7') } : {}),
      ...(o['duration-sum'] ? { durationSum: seconds(o['duration-sum'], '--duration-sum') } : {}),
    };
    const goals = (o.goal ?? (Object.keys(shared).length ? ['ndr', 'pdr'] : [])).map((g) => ({ ...goalOf(g), ...shared }));
    const search: Search = { algorithm: 'mlrsearch', ...(goals.length ? { goals } : {}), ...(o['latency-at'] ? { latencyAt: fractions(o['latency-at']) } : {}) };
    if (min) search.min = min;
    if (max) search.max = max;
    spec.search = search; // the API fills in the defaults it leaves out
    return spec;
  }
  const search: Partial<Search> & Pick<Search, 'target'> = o.pdr ? { target: 'pdr', lossRatio: lossRatio(o.pdr) } : { target: 'ndr' };
  if (min) search.min = min;
  if (max) search.max = max;
  if (o.resolution) search.resolutionPercent = Number(o.resolution.replace(/%$/, ''));
  if (o.confirm) search.confirmations = integer(o.confirm, '--confirm');
  spec.search = search as Search; // the API fills in the defaults it leaves out
  return spec;
}
