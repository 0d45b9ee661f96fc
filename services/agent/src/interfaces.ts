import { readFile, readdir, readlink } from 'node:fs/promises';
import { networkInterfaces, release } from 'node:os';
import { basename } from 'node:path';
import { command } from '@niclab/shared/runtime/command';
import type { AgentInterface, EndDiagnostics, NicDelta } from '@niclab/shared/domain/contract';
import { isInterfaceName } from '@niclab/shared/domain/names';
import { VERSION } from '@niclab/shared/runtime/version';

const SYS = '/sys/class/net';

async function read(path: string): Promise<string | null> {
  try {
    return (await readFile(path, 'utf8')).trim();
  } catch {
    return null; // absent or unreadable (e.g. speed of a link that is down): reported as null
  }
}

function int(text: string | null): number | null {
  if (text === null || !/^-?\d+$/.test(text)) return null;
  return Number(text);
}

/** The host's interfaces as /sys/class/net and the kernel's address list describe them, each with its MTU range. */
export async function readInterfaces(): Promise<AgentInterface[]> {
  const names = (await readdir(SYS)).filter(isInterfaceName).sort();
  const addresses = networkInterfaces();
  const found = (await Promise.all(names.map((name) => readInterface(name, addresses)))).filter((iface): iface is AgentInterface => iface !== null);
  const ranges = await mtuRanges(found.map((iface) => `${iface.name}#${iface.mac}`).join(' '));
  return found.map((iface) => ({ ...iface, mtuRange: ranges.get(iface.name) ?? null }));
}

type MtuRange = NonNullable<AgentInterface['mtuRange']>;
let knownRanges: { key: string; ranges: Map<string, MtuRange> } | undefined;

/**
 * Each interface's MTU range as the kernel has it (`ip -d -j link show`: min_mtu and max_mtu,
 * which /sys does not show). A driver's range does not change, so `ip` runs again only when the
 * interfaces do (`key`: their names and MACs, which readInterface has read already; a veth made
 * again gets a new MAC), not at every heartbeat. A max_mtu of 0 is no
 * limit (lo): no range. Without `ip`, no ranges, asked again at the next heartbeat.
 */
async function mtuRanges(key: string): Promise<Map<string, MtuRange>> {
  if (knownRanges?.key === key) return knownRanges.ranges;
  try {
    const links = JSON.parse(await command('ip', ['-d', '-j', 'link', 'show'])) as { ifname?: unknown; min_mtu?: unknown; max_mtu?: unknown }[];
    const ranges = new Map<string, MtuRange>();
    for (const link of links) {
      if (typeof link.ifname !== 'string' || typeof link.min_mtu !== 'number' || typeof link.max_mtu !== 'number' || link.max_mtu <= 0) continue;
      ranges.set(link.ifname, { min: link.min_mtu, max: link.max_mtu });
    }
    knownRanges = { key, ranges };
    return ranges;
  } catch {
    return new Map();
  }
}

/** One interface, or null when the host has none of that name. */
export async function readInterface(name: string, addresses = networkInterfaces()): Promise<AgentInterface | null> {
  if (!isInterfaceName(name)) return null;
  const dir = `${SYS}/${name}`;
  const [mac, mtu, speed, operstate, driverLink] = await Promise.all([
    read(`${dir}/address`),
    read(`${dir}/mtu`),
    read(`${dir}/speed`),
    read(`${dir}/operstate`),
    readlink(`${dir}/device/driver`).catch(() => null),
  ]);
  if (operstate === null) return null; // no such interface (or it vanished while we looked)
  const mbps = int(speed);
  return {
    name,
    mac,
    mtu: int(mtu),
    speedBitsPerSecond: mbps !== null && mbps > 0 ? mbps * 1_000_000 : null,
    operstate,
    driver: driverLink ? basename(driverLink) : null,
    addresses: (addresses[name] ?? []).map((a) => ({
      family: a.family,
      address: a.address,
      prefixLength: Number(a.cidr?.split('/')[1] ?? (a.family === 'IPv4' ? 32 : 128)),
    })),
  };
}

/** The address a test binds to on this interface: IPv4 first, then a global IPv6 address. */
export type Counters = Omit<NicDelta, 'agent' | 'interface'>;

const COUNTERS: Record<keyof Counters, string> = {
  rxBytes: 'rx_bytes', txBytes: 'tx_bytes', rxPackets: 'rx_packets', txPackets: 'tx_packets',
  rxErrors: 'rx_errors', txErrors: 'tx_errors', rxDropped: 'rx_dropped', txDropped: 'tx_dropped',
};

/** The interface's statistics counters; null when the interface is gone. */
export async function readCounters(name: string): Promise<Counters | null> {
  if (!isInterfaceName(name)) return null;
  const entries = await Promise.all(
    Object.entries(COUNTERS).map(async ([key, file]) => [key, int(await read(`${SYS}/${name}/statistics/${file}`))] as const),
  );
  if (entries.some(([, value]) => value === null)) return null;
  return Object.fromEntries(entries) as Counters;
}

export function counterDelta(before: Counters, after: Counters): Counters {
  const out = {} as Counters;
  for (const key of Object.keys(COUNTERS) as (keyof Counters)[]) out[key] = after[key] - before[key];
  return out;
}

type Environment = NonNullable<EndDiagnostics['environment']>;
type DriverInfo = { driver: string | null; firmware: string | null };
const drivers = new Map<string, { at: number; info: Promise<DriverInfo> }>();

function askEthtool(name: string): Promise<DriverInfo> {
  return command('ethtool', ['-i', name]).then(
    (out) => {
      const field = (key: string) => out.match(new RegExp(`^${key}:[ \\t]*(.*)$`, 'm'))?.[1]?.trim() || null;
      return { driver: field('driver'), firmware: field('firmware-version') };
    },
    () => ({ driver: null, firmware: null }),
  );
}

/**
 * `ethtool -i`: driver and firmware, asked at most once a minute per interface. An answer
 * older than that is still given while a fresh one is asked in the background: only the very
 * first task on an interface (or primeDriverInfo at start) waits for ethtool's process.
 */
function driverInfo(name: string): Promise<DriverInfo> {
  const cached = drivers.get(name);
  if (!cached) {
    const entry = { at: Date.now(), info: askEthtool(name) };
    drivers.set(name, entry);
    return entry.info;
  }
  if (Date.now() - cached.at >= 60_000) {
    cached.at = Date.now();
    void askEthtool(name).then((info) => drivers.set(name, { at: Date.now(), info: Promise.resolve(info) }));
  }
  return cached.info;
}

/** Asks ethtool about these interfaces now, so that no task's setup waits for it. */
export async function primeDriverInfo(names: string[]): Promise<void> {
  await Promise.all(names.map((name) => driverInfo(name)));
}

/** The qdiscs of an interface as found (`tc -j qdisc show`): kind, handle, parent and the options tc prints; null without tc. */
async function readQdiscs(name: string): Promise<Environment['qdiscs']> {
  try {
    const raw = JSON.parse(await command('tc', ['-j', 'qdisc', 'show', 'dev', name])) as { kind?: unknown; handle?: unknown; parent?: unknown; root?: unknown; options?: unknown }[];
    return raw.map((q) => ({
      kind: String(q.kind),
      handle: String(q.handle),
      parent: q.root === true ? 'root' : String(q.parent ?? ''),
      options: typeof q.options === 'object' && q.options !== null ? (q.options as Record<string, unknown>) : {},
    }));
  } catch {
    return null;
  }
}

/** The offloads the driver lets be changed (`ethtool --json -k`), each on or off; null without ethtool. */
async function readOffloads(name: string): Promise<Environment['offloads']> {
  try {
    const [features] = JSON.parse(await command('ethtool', ['--json', '-k', name])) as Record<string, unknown>[];
    const out: Record<string, boolean> = {};
    for (const [feature, state] of Object.entries(features ?? {})) {
      if (typeof state === 'object' && state !== null && 'active' in state && (state as { fixed?: unknown }).fixed !== true) out[feature] = (state as { active: unknown }).active === true;
    }
    return out;
  } catch {
    return null;
  }
}

/** ethtool's "Current hardware settings" block (of -g or -l) as label -> count, `n/a` as null; null where the driver has none. */
async function ethtoolCurrent(name: string, flag: '-g' | '-l'): Promise<Map<string, number | null> | null> {
  try {
    const current = (await command('ethtool', [flag, name])).split(/^Current hardware settings:$/m)[1];
    if (current === undefined) return null;
    return new Map([...current.matchAll(/^([A-Za-z][A-Za-z ]*):[ \t]+(\S+)$/gm)].map((m) => [m[1]!, int(m[2]!)]));
  } catch {
    return null; // "Operation not supported": veth has no rings, loopback no channels
  }
}

async function readRings(name: string): Promise<Environment['rings']> {
  const current = await ethtoolCurrent(name, '-g');
  return current ? { rx: current.get('RX') ?? null, tx: current.get('TX') ?? null } : null;
}

async function readChannels(name: string): Promise<Environment['channels']> {
  const current = await ethtoolCurrent(name, '-l');
  return current ? { rx: current.get('RX') ?? null, tx: current.get('TX') ?? null, other: current.get('Other') ?? null, combined: current.get('Combined') ?? null } : null;
}

let pciIds: Promise<string | null> | undefined;

/** A PCI device's model as the host's pci.ids names it (pciutils' or hwdata's copy), read once. */
async function pciModel(id: string): Promise<string | null> {
  pciIds ??= read('/usr/share/misc/pci.ids').then((text) => text ?? read('/usr/share/hwdata/pci.ids'));
  const text = await pciIds;
  const [vendor, device] = id.split(':');
  if (!text || !vendor || !device) return null;
  const block = new RegExp(`^${vendor}  (.+)$([\\s\\S]*?)^(?=[0-9a-f]{4}  )`, 'm').exec(text);
  const model = block?.[2]?.match(new RegExp(`^\\t${device}  (.+)$`, 'm'))?.[1];
  return model ? `${block![1]} ${model}` : null;
}

/** The NIC's PCI identity from its device's uevent; null for a virtual interface (no device). */
async function readPci(name: string): Promise<Environment['pci']> {
  const uevent = await read(`${SYS}/${name}/device/uevent`);
  const id = uevent?.match(/^PCI_ID=([0-9A-Fa-f]{4}:[0-9A-Fa-f]{4})$/m)?.[1]?.toLowerCase();
  if (!id) return null;
  return { id, slot: uevent!.match(/^PCI_SLOT_NAME=(\S+)$/m)?.[1] ?? null, model: await pciModel(id) };
}

/** The CPU's model name, as /proc/cpuinfo gives it for the first CPU. */
async function cpuModel(): Promise<string | null> {
  const info = await read('/proc/cpuinfo');
  return info?.match(/^model name\s*:\s*(.+)$/m)?.[1]?.trim() ?? null;
}

/**
 * The host under an end, as found at the start of the run (not only as niclab tuned it): what a
 * comparison reads, and what a change point names when it differs between two runs.
 */
export async function readEnvironment(iface: AgentInterface): Promise<Environment> {
  const [{ driver, firmware }, rmemMax, wmemMax, qdiscs, congestionControl, tcpRmem, tcpWmem, model, governor, offloads, rings, channels, pci] = await Promise.all([
    driverInfo(iface.name),
    read('/proc/sys/net/core/rmem_max'),
    read('/proc/sys/net/core/wmem_max'),
    readQdiscs(iface.name),
    read('/proc/sys/net/ipv4/tcp_congestion_control'),
    read('/proc/sys/net/ipv4/tcp_rmem'),
    read('/proc/sys/net/ipv4/tcp_wmem'),
    cpuModel(),
    read('/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor'),
    readOffloads(iface.name),
    readRings(iface.name),
    readChannels(iface.name),
    readPci(iface.name),
  ]);
  const spaced = (text: string | null) => text?.split(/\s+/).join(' ') ?? null;
  return {
    kernel: release(),
    driver: driver ?? iface.driver,
    firmware,
    mtu: iface.mtu,
    speedBitsPerSecond: iface.speedBitsPerSecond,
    rmemMax: int(rmemMax),
    wmemMax: int(wmemMax),
    qdiscs,
    congestionControl,
    tcpRmem: spaced(tcpRmem),
    tcpWmem: spaced(tcpWmem),
    cpuModel: model,
    cpuGovernor: governor,
    niclabVersion: VERSION,
    offloads,
    rings,
    channels,
    pci,
  };
}
