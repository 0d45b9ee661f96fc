import { spawn } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { isRunning } from '@niclab/shared/runtime/process';
import { command } from '@niclab/shared/runtime/command';

/** The niclab command this lab's agents run: the compiled one, from src/lab and dist/lab alike. */
const CLI = fileURLToPath(new URL('../../dist/main.js', import.meta.url));

export const LAB_NAME = /^[a-z][a-z0-9]{0,9}$/;
const RATE = /^(\d+(\.\d+)?)(kbit|mbit|gbit)$/;
/** Where lab hosts take their addresses: RFC 2544's benchmark range, inside the lab's namespaces only. */
const SUBNET = '198.18.0';

export interface LabHost {
  name: string;
  agentId: string;
  namespace: string;
  interface: string;
  address: string;
  rate: string | null;
  /** The agent's NICLAB_AGENT_LABELS, as groups of flows select agents by. */
  labels?: Record<string, string>;
  /** The agent's NICLAB_FILE_DIR: where jobs with `file` read their source and write their sink. */
  fileDir?: string;
  agentPid: number | null;
  log: string;
}

export interface LabState {
  name: string;
  createdAt: string;
  switchNamespace: string;
  redisUrl: string;
  prefix: string;
  hosts: LabHost[];
}

export interface LabOptions {
  name: string;
  hosts: number;
  /** "100mbit", "none", or per host: "A=100mbit,B=1gbit" (hosts not named are unshaped). */
  rate: string;
  redisUrl: string;
  prefix: string;
  dataDir: string;
  heartbeatSeconds?: number;
  /** Prepended to host names to form agent ids, so two labs can share one niclab. */
  agentPrefix?: string;
  /** Per-host agent labels: "A,B,C:rack=a;D,E,F:rack=b,role=lab" (hosts not named have none). */
  labels?: string;
  logLevel?: string;
  /** Per-host file directories (NICLAB_FILE_DIR), by host name; hosts not named have none. */
  fileDirs?: Record<string, string>;
  /** Or one directory for all: each host's is `<fileRoot>/<host>`, made when missing (`lab up --file-dir`). */
  fileRoot?: string;
}

export class LabError extends Error {}

const hostNames = (count: number) => Array.from({ length: count }, (_, i) => String.fromCharCode(65 + i));
const statePath = (dataDir: string, name: string) => join(dataDir, 'labs', `${name}.json`);

export function parseRates(spec: string, hosts: string[]): Map<string, string | null> {
  const rates = new Map<string, string | null>(hosts.map((h) => [h, null]));
  const check = (rate: string) => {
    if (rate !== 'none' && !RATE.test(rate)) throw new LabError(`--rate: "${rate}" is not a rate like 100mbit, 1gbit or none`);
    return rate === 'none' ? null : rate;
  };
  if (!spec.includes('=')) {
    const rate = check(spec);
    for (const host of hosts) rates.set(host, rate);
    return rates;
  }
  for (const part of spec.split(',')) {
    const [host, rate] = part.split('=');
    if (!host || !rate || !rates.has(host)) throw new LabError(`--rate: "${part}" does not name one of the hosts ${hosts.join(', ')}`);
    rates.set(host, check(rate));
  }
  return rates;
}

const LABEL = /^[A-Za-z0-9._-]{1,63}=[A-Za-z0-9._-]{0,63}$/;

/** `--labels "A,B,C:rack=a;D,E:rack=b,role=lab"`: each host's agent labels. */
export function parseLabels(spec: string, hosts: string[]): Map<string, Record<string, string>> {
  const labels = new Map<string, Record<string, string>>(hosts.map((h) => [h, {}]));
  for (const part of spec.split(';').filter((p) => p.trim())) {
    const [names, pairs, extra] = part.trim().split(':');
    if (!names || !pairs || extra !== undefined) throw new LabError(`--labels: "${part}" is not HOSTS:KEY=VALUE[,KEY=VALUE] (e.g. A,B,C:rack=a)`);
    for (const host of names.split(',')) {
      const mine = labels.get(host);
      if (!mine) throw new LabError(`--labels: "${host}" is not one of the hosts ${hosts.join(', ')}`);
      for (const pair of pairs.split(',')) {
        if (!LABEL.test(pair)) throw new LabError(`--labels: "${pair}" is not KEY=VALUE (letters, digits, ".", "_", "-")`);
        const at = pair.indexOf('=');
        mine[pair.slice(0, at)] = pair.slice(at + 1);
      }
    }
  }
  return labels;
}

/** tbf needs a bucket of at least one full-size packet and about 4 ms of traffic. */
function burstFor(rate: string): string {
  const [, value, , unit] = RATE.exec(rate)!;
  const bits = Number(value) * { kbit: 1e3, mbit: 1e6, gbit: 1e9 }[unit as 'kbit' | 'mbit' | 'gbit'];
  return `${Math.max(16_000, Math.ceil((bits / 8) * 0.004))}b`;
}

async function shape(namespace: string, device: string, rate: string): Promise<void> {
  await command('tc', ['-n', namespace, 'qdisc', 'replace', 'dev', device, 'root', 'tbf', 'rate', rate, 'burst', burstFor(rate), 'latency', '50ms']);
}

export function readLabState(dataDir: string, name: string): LabState | null {
  const path = statePath(dataDir, name);
  return existsSync(path) ? (JSON.parse(readFileSync(path, 'utf8')) as LabState) : null;
}

export async function namespaces(): Promise<string[]> {
  const out = await command('ip', ['netns', 'list']);
  return out.split('\n').map((line) => line.split(' ')[0] ?? '').filter(Boolean);
}

function requireRoot(): void {
  if (process.getuid?.() !== 0) throw new LabError('the virtual lab needs root (it creates network namespaces)');
}

/**
 * Creates the lab: a switch namespace with a bridge, one namespace per host joined to it by a
 * veth whose host end is `eth1`, each end shaped with tbf, and an agent started in each host.
 */
export async function labUp(options: LabOptions): Promise<LabState> {
  requireRoot();
  if (!LAB_NAME.test(options.name)) throw new LabError(`--name: "${options.name}" must be 1-10 lower-case letters and digits, starting with a letter`);
  if (!Number.isInteger(options.hosts) || options.hosts < 1 || options.hosts > 26) throw new LabError('--hosts must be 1 to 26');
  if (!options.redisUrl.startsWith('unix://')) throw new LabError('lab agents reach Redis over a unix socket: REDIS_URL must be unix:///path (npm start provides one)');
  if (!existsSync(CLI)) throw new LabError(`${CLI} is missing: run npm run build first`);
  const existing = await namespaces();
  const switchNamespace = `${options.name}-sw`;
  if (existing.includes(switchNamespace) || readLabState(options.dataDir, options.name)) {
    throw new LabError(`lab "${options.name}" exists already: niclab lab down --name ${options.name} first`);
  }
  const names = hostNames(options.hosts);
  const rates = parseRates(options.rate, names);
  const labels = parseLabels(options.labels ?? '', names);
  const dir = join(options.dataDir, 'labs', options.name);
  mkdirSync(dir, { recursive: true });
  const state: LabState = { name: options.name, createdAt: new Date().toISOString(), switchNamespace, redisUrl: options.redisUrl, prefix: options.prefix, hosts: [] };
  const save = () => writeFileSync(statePath(options.dataDir, options.name), JSON.stringify(state, null, 2));
  save(); // written first, so `lab down` can clean up after a failed `lab up`

  await command('ip', ['netns', 'add', switchNamespace]);
  await command('ip', ['-n', switchNamespace, 'link', 'set', 'lo', 'up']);
  await command('ip', ['-n', switchNamespace, 'link', 'add', 'br0', 'type', 'bridge', 'forward_delay', '0']);
  await command('ip', ['-n', switchNamespace, 'link', 'set', 'br0', 'up']);
  for (const [i, host] of names.entries()) {
    state.hosts.push(await wireHost(state, { host, i, rate: rates.get(host) ?? null, hostLabels: labels.get(host) ?? {}, agentPrefix: options.agentPrefix ?? '', dir }));
    save();
  }
  for (const host of state.hosts) {
    const fileDir = options.fileDirs?.[host.name] ?? (options.fileRoot ? join(options.fileRoot, host.name) : undefined);
    if (fileDir) {
      if (options.fileRoot) mkdirSync(fileDir, { recursive: true });
      host.fileDir = fileDir;
    }
    host.agentPid = startAgent(host, options);
    save();
  }
  return state;
}

/** A host's namespace on the lab's switch: its eth1 (a veth whose peer is a bridge port), its address, its shaping. */
async function wireHost(state: LabState, { host, i, rate, hostLabels, agentPrefix, dir }: { host: string; i: number; rate: string | null; hostLabels: Record<string, string>; agentPrefix: string; dir: string }): Promise<LabHost> {
  const { switchNamespace } = state;
  const namespace = `${state.name}-${host}`;
  const port = `p${host}`;
  const address = `${SUBNET}.${i + 1}`;
  await command('ip', ['netns', 'add', namespace]);
  await command('ip', ['-n', namespace, 'link', 'set', 'lo', 'up']);
  await command('ip', ['link', 'add', 'eth1', 'netns', namespace, 'type', 'veth', 'peer', 'name', port, 'netns', switchNamespace]);
  // The switch takes jumbo frames, as a lab switch would: a job may raise a host's MTU.
  await command('ip', ['-n', switchNamespace, 'link', 'set', port, 'mtu', '9000']);
  await command('ip', ['-n', switchNamespace, 'link', 'set', port, 'master', 'br0']);
  await command('ip', ['-n', switchNamespace, 'link', 'set', port, 'up']);
  await command('ip', ['-n', namespace, 'addr', 'add', `${address}/24`, 'dev', 'eth1']);
  await command('ip', ['-n', namespace, 'link', 'set', 'eth1', 'up']);
  if (rate) {
    // Both directions: the host's sending side, and the switch port that feeds the host's receive side.
    await shape(namespace, 'eth1', rate);
    await shape(switchNamespace, port, rate);
  }
  return { name: host, agentId: `${agentPrefix}${host}`, namespace, interface: 'eth1', address, rate, ...(Object.keys(hostLabels).length ? { labels: hostLabels } : {}), agentPid: null, log: join(dir, `${host}.log`) };
}

/**
 * Adds a host to a lab that is up (the next letter, on the same switch) and starts its agent
 * with these labels: how a lab grows while schedules run over it.
 */
export async function labAddHost(dataDir: string, name: string, options: { rate: string; labels?: string; heartbeatSeconds?: number; logLevel?: string }): Promise<LabHost> {
  requireRoot();
  const state = readLabState(dataDir, name);
  if (!state) throw new LabError(`lab "${name}" is not up: niclab lab up --name ${name} first`);
  const i = state.hosts.length;
  if (i >= 26) throw new LabError('a lab has at most 26 hosts');
  const host = hostNames(i + 1)[i]!;
  const rate = parseRates(options.rate, [host]).get(host) ?? null;
  const labels = parseLabels(options.labels ? `${host}:${options.labels}` : '', [host]).get(host) ?? {};
  // The new agent's id follows the lab's (lab up's --agent-prefix).
  const agentPrefix = state.hosts[0] ? state.hosts[0].agentId.slice(0, -state.hosts[0].name.length) : '';
  const added = await wireHost(state, { host, i, rate, hostLabels: labels, agentPrefix, dir: join(dataDir, 'labs', name) });
  const save = () => writeFileSync(statePath(dataDir, name), JSON.stringify(state, null, 2));
  state.hosts.push(added);
  save();
  added.agentPid = startAgent(added, { name, hosts: 1, rate: options.rate, redisUrl: state.redisUrl, prefix: state.prefix, dataDir, heartbeatSeconds: options.heartbeatSeconds, logLevel: options.logLevel });
  save();
  return added;
}

/** Starts (or starts again) the agent of a lab host; returns its PID. */
export function startAgent(host: LabHost, options: LabOptions): number {
  const log = openSync(host.log, 'a');
  const child = spawn('ip', ['netns', 'exec', host.namespace, process.execPath, CLI, 'agent', '--id', host.agentId], {
    detached: true,
    stdio: ['ignore', log, log],
    env: {
      PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin',
      REDIS_URL: options.redisUrl,
      NICLAB_PREFIX: options.prefix,
      NICLAB_HEARTBEAT_SECONDS: String(options.heartbeatSeconds ?? 2),
      NICLAB_LOG_LEVEL: options.logLevel ?? 'info',
      ...(host.labels ? { NICLAB_AGENT_LABELS: Object.entries(host.labels).map(([k, v]) => `${k}=${v}`).join(',') } : {}),
      ...(host.fileDir ? { NICLAB_FILE_DIR: host.fileDir } : {}),
      // The agent's own files (its tuning record) live with the lab's.
      NICLAB_DATA_DIR: dirname(host.log),
    },
  });
  closeSync(log);
  child.unref();
  return child.pid!; // `ip netns exec` execs the agent, so this is the agent's PID
}

async function pidsIn(namespace: string): Promise<number[]> {
  const out = await command('ip', ['netns', 'pids', namespace]).catch(() => '');
  return out.split('\n').filter((line) => /^\d+$/.test(line)).map(Number);
}

const alive = isRunning;

/**
 * Removes everything the lab made: stops the processes inside its namespaces (SIGTERM, then
 * SIGKILL), deletes the namespaces (their veths go with them) and the state file. Works from
 * the state file or, when processes were killed and it is gone, from the namespaces' names.
 */
export async function labDown(dataDir: string, name: string): Promise<string[]> {
  requireRoot();
  if (!LAB_NAME.test(name)) throw new LabError(`--name: "${name}" is not a lab name`);
  const state = readLabState(dataDir, name);
  const ours = new RegExp(`^${name}-(sw|[A-Z])$`);
  const present = (await namespaces()).filter((ns) => ours.test(ns) || state?.hosts.some((h) => h.namespace === ns) || state?.switchNamespace === ns);
  const pids = (await Promise.all(present.map(pidsIn))).flat();
  const signal = (pid: number, name: NodeJS.Signals) => {
    try {
      process.kill(pid, name);
    } catch {
      // already gone
    }
  };
  for (const pid of pids) signal(pid, 'SIGTERM');
  const deadline = Date.now() + 3000;
  while (pids.some(alive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  for (const pid of pids.filter(alive)) signal(pid, 'SIGKILL');
  // Anything started in a namespace since (an engine mid-spawn) goes too.
  for (const ns of present) for (const pid of await pidsIn(ns)) signal(pid, 'SIGKILL');
  for (const ns of present) await command('ip', ['netns', 'del', ns]);
  rmSync(statePath(dataDir, name), { force: true });
  return present;
}

export interface HostStatus extends LabHost {
  namespacePresent: boolean;
  agentRunning: boolean;
}

export async function labStatus(dataDir: string, name: string): Promise<{ state: LabState; hosts: HostStatus[] } | null> {
  const state = readLabState(dataDir, name);
  if (!state) return null;
  const present = new Set(await namespaces());
  return {
    state,
    hosts: state.hosts.map((host) => ({ ...host, namespacePresent: present.has(host.namespace), agentRunning: host.agentPid !== null && alive(host.agentPid) })),
  };
}
