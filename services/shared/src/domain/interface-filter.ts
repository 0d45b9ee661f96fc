/**
 * Which of its host's interfaces an agent reports (NICLAB_AGENT_INTERFACES): comma-separated
 * globs (`*` any run of characters, `?` one), a leading `!` excluding. An interface is reported
 * when it matches an include (or none is given) and no exclude: `eth*,ens*` keeps only those;
 * `!veth*,!cali*` keeps all but a Kubernetes node's pod veths. Each reported interface is a
 * metric series and a lease key, so a host's container plumbing costs Redis and the scrape.
 */
export interface InterfaceFilter {
  include: RegExp[];
  exclude: RegExp[];
}

const GLOB = /^[A-Za-z0-9._*?-]{1,15}$/;

/** Parses the setting, each glob compiled once (an agent filters every heartbeat); throws an Error naming the bad pattern. */
export function parseInterfaceFilter(raw: string): InterfaceFilter {
  const filter: InterfaceFilter = { include: [], exclude: [] };
  for (const item of raw.split(',').map((p) => p.trim()).filter(Boolean)) {
    const exclude = item.startsWith('!');
    const glob = exclude ? item.slice(1) : item;
    if (!GLOB.test(glob)) throw new Error(`"${item}" is not an interface name pattern (letters, digits, ".", "_", "-", "*", "?"; "!" in front excludes)`);
    (exclude ? filter.exclude : filter.include).push(matcher(glob));
  }
  return filter;
}

function matcher(glob: string): RegExp {
  return new RegExp(`^${glob.replace(/[.]/g, '\\.').replace(/\*/g, '.*').replace(/\?/g, '.')}$`);
}

/** Whether an interface of this name is reported. */
export function keepsInterface(filter: InterfaceFilter, name: string): boolean {
  if (filter.include.length > 0 && !filter.include.some((glob) => glob.test(name))) return false;
  return !filter.exclude.some((glob) => glob.test(name));
}
