/**
 * Proves that a path carries an MTU before a run believes a result at it (seeds 003 and 004 set
 * 9000 and 16080 on both ends; a hop left at 1500 turns a jumbo-frame test into a fragmenting or
 * black-holed one). ICMP echoes with don't-fragment set, each its own `ping` with an argument
 * array; the sizes are IP packets, as an MTU is.
 */
import { execFile } from 'node:child_process';
import { isIPv6 } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { EndDiagnostics } from '@niclab/shared/domain/contract';

export type PathMtuProof = NonNullable<EndDiagnostics['pathMtu']>;

/**
 * How long one echo is waited for. A lab path answers in well under a millisecond; a size a
 * bridge drops is never answered, and a refused MTU is found by halving (about 13 echoes from
 * 9000, half of them unanswered), so the whole proof stays within a few seconds.
 */
const ECHO_WAIT_SECONDS = 0.25;
/** Echoes of the MTU's own size before it counts as refused: the first may meet a link still settling after the change. */
const FULL_SIZE_TRIES = 3;

interface Echo {
  answered: boolean;
  /** What refused it, when something said so: the kernel's own interface, or a router's ICMP. */
  refusal: string | null;
}

/** One echo of `size` bytes as an IP packet from `iface` to `address`, don't-fragment set. */
function echo(iface: string, address: string, size: number, signal: AbortSignal): Promise<Echo> {
  const v6 = isIPv6(address);
  const payload = size - (v6 ? 40 : 20) - 8;
  const args = [v6 ? '-6' : '-4', '-n', '-c', '1', '-W', String(ECHO_WAIT_SECONDS), '-M', 'do', '-I', iface, '-s', String(payload), address];
  return new Promise((resolve, reject) => {
    execFile('ping', args, { timeout: 5_000, signal }, (error, stdout, stderr) => {
      if (signal.aborted) return reject(signal.reason instanceof Error ? signal.reason : new Error('canceled'));
      const text = `${stdout}\n${stderr}`;
      // iputils prints `mtu=1500` for IPv4, `mtu: 1500` for IPv6.
      const local = /message too long, mtu[=:] ?(\d+)/.exec(text);
      const router = /From (\S+) icmp_seq=\d+ Frag needed and DF set \(mtu = (\d+)\)/.exec(text) ?? /From (\S+) icmp_seq=\d+ Packet too big: mtu=(\d+)/.exec(text);
      const refusal = local ? `the sender's own interface ${iface} (its MTU ${local[1]})` : router ? `the router ${router[1]} (its next link's MTU ${router[2]}, by ICMP)` : null;
      // ping exits 0 when answered, 1 when not, 2 on other errors (no route, a bad address).
      if (error && (error as { code?: unknown }).code !== 1) {
        return reject(new Error(`ping ${args.join(' ')}: ${stderr.trim() || error.message}`));
      }
      resolve({ answered: !error, refusal });
    });
  });
}

/**
 * Sends echoes of `mtu` bytes; when none is answered, finds the largest size that is by halving
 * between the smallest packet and the MTU.
 */
export async function provePathMtu(iface: string, address: string, mtu: number, signal: AbortSignal): Promise<PathMtuProof> {
  const started = performance.now();
  let probes = 0;
  let refusedBy: string | null = null;
  const send = async (size: number) => {
    probes++;
    const result = await echo(iface, address, size, signal);
    if (!result.answered) refusedBy ??= result.refusal;
    return result.answered;
  };
  const done = (passed: boolean, largestPassed: number | null): PathMtuProof => ({
    mtu, passed, largestPassed, probes,
    refusedBy: passed ? null : refusedBy ?? (largestPassed === null ? `the receiver ${address}, which answered no echo at all (is ICMP echo blocked?)` : `a hop between the two interfaces that says nothing when it drops a frame: a bridge, a switch port, or the receiver's own interface at a smaller MTU`),
    seconds: Math.round(performance.now() - started) / 1000,
  });
  for (let i = 0; i < FULL_SIZE_TRIES; i++) if (await send(mtu)) return done(true, mtu);
  // The smallest packet an IPv4 host must take (RFC 791); IPv6's is 1280.
  let low = isIPv6(address) ? 1280 : 68;
  if (!(await send(low))) return done(false, null);
  let high = mtu;
  while (high - low > 1) {
    const middle = Math.floor((low + high) / 2);
    if (await send(middle)) low = middle;
    else high = middle;
  }
  return done(false, low);
}

/** The run's error for a proof that failed: the largest size that passed and who refused (and the receiver's MTU, when the run set it smaller). */
export function pathMtuMessage(proof: PathMtuProof, from: string, to: string, peerMtu?: number): string {
  const largest = proof.largestPassed === null ? 'no size got an answer' : `the largest that did was ${proof.largestPassed} B`;
  const peer = peerMtu !== undefined && peerMtu < proof.mtu ? `; this run set the receiver's interface to MTU ${peerMtu}, below the sender's ${proof.mtu}` : '';
  return `the path from ${from} to ${to} does not carry MTU ${proof.mtu} with don't-fragment set: ${largest}; refused by ${proof.refusedBy} (${proof.probes} echoes in ${proof.seconds} s)${peer}`;
}
