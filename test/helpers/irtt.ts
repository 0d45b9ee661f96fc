import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LabHost } from '@niclab/cli/lab/lab';
import { command } from '@niclab/shared/runtime/command';

/** One irtt round trip: when it was sent (epoch ms) and how long it took. */
export interface RttSample {
  at: number;
  rttMs: number;
}
export type IrttSample = RttSample;

/** irtt's own figures over its run (ns): its timer's error, its round-trip IPDV, its server's processing time. */
export interface IrttStats {
  timer_error: { mean: number; max: number; median?: number };
  ipdv_round_trip: { median?: number; mean: number };
  server_processing_time: { mean: number; median?: number; max: number };
  /** Round trips whose request irtt's server got (it says so in its replies), and replies the client got. */
  server_packets_received: number;
  packets_received: number;
}

/** Where irtt runs: a lab host (its namespace), or this host's own stack (no namespace), on a port of its own or 2112. */
export type IrttHost = Pick<LabHost, 'address'> & { namespace?: string; port?: number };

const PORT = 2112;
/** `argv` run in `host`'s namespace, or here. */
const inHost = (host: IrttHost, argv: string[]): [string, string[]] => (host.namespace ? ['ip', ['netns', 'exec', host.namespace, ...argv]] : [argv[0]!, argv.slice(1)]);

/** irtt's server on a host's address (a reference for round trips); stop it with kill(). */
export function irttServer(host: IrttHost): ChildProcess {
  return spawn(...inHost(host, ['irtt', 'server', '-b', `${host.address}:${host.port ?? PORT}`]), { stdio: 'ignore' });
}

/** irtt's server (see irttServer), once its socket is bound. */
export async function startIrttServer(host: IrttHost): Promise<ChildProcess> {
  const server = irttServer(host);
  const deadline = Date.now() + 10_000;
  const [file, args] = inHost(host, ['ss', '-Hlun', `sport = :${host.port ?? PORT}`]);
  while (!(await command(file, args)).trim()) {
    if (server.exitCode !== null || Date.now() > deadline) {
      server.kill();
      throw new Error(`irtt server on ${host.namespace ?? 'this host'} did not listen on ${host.port ?? PORT}`);
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return server;
}

/** The longest an irtt client runs when nobody stops it (a test that hangs must not leave it behind). */
const MAX_SECONDS = 600;

/**
 * irtt's client from `from` to `to`'s server, one probe every `everyMs`, until `stop()` (or
 * `seconds`): stopped with SIGINT, on which irtt still prints its results. Each round trip with
 * its send time, and irtt's own stats.
 */
export function irttStart(from: IrttHost, to: IrttHost, everyMs = 10, seconds = MAX_SECONDS): { stop(): Promise<{ samples: RttSample[]; stats: IrttStats }>; done: Promise<{ samples: RttSample[]; stats: IrttStats }> } {
  // irtt writes its JSON on SIGINT only to a file: to `-o -` an interrupted client writes nothing.
  const dir = mkdtempSync(join(tmpdir(), 'niclab-irtt-'));
  const output = join(dir, 'irtt.json');
  const child = spawn(...inHost(from, ['irtt', 'client', '-i', `${everyMs}ms`, '-d', `${seconds}s`, '-Q', '-o', output, `${to.address}:${to.port ?? PORT}`]), { stdio: ['ignore', 'ignore', 'pipe'] });
  const done = new Promise<{ samples: RttSample[]; stats: IrttStats }>((resolve, reject) => {
    let errors = '';
    child.stderr.on('data', (c: Buffer) => (errors += c));
    child.on('error', reject);
    child.on('close', (code) => {
      try {
        if (code !== 0) throw new Error(`irtt client exited ${code}: ${errors.trim()}`);
        const parsed = JSON.parse(readFileSync(output, 'utf8')) as { stats: IrttStats; round_trips: { lost: string; timestamps: { client: { send: { wall: number } } }; delay?: { rtt: number } }[] };
        const samples = parsed.round_trips.filter((r) => r.lost === 'false' && r.delay).map((r) => ({ at: r.timestamps.client.send.wall / 1e6, rttMs: r.delay!.rtt / 1e6 }));
        resolve({ samples, stats: parsed.stats });
      } catch (error) {
        reject(error as Error);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
  // A failure is the caller's to see when it stops the client; until then it must not crash the file.
  done.catch(() => undefined);
  return {
    done,
    stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGINT');
      return done;
    },
  };
}

/** irtt from `from` to `to` for as long as `work` takes: what `work` gave, and irtt's round trips over it. */
export async function irttDuring<T>(from: IrttHost, to: IrttHost, work: () => Promise<T>, everyMs = 10): Promise<[T, RttSample[]]> {
  const irtt = irttStart(from, to, everyMs);
  try {
    const result = await work();
    return [result, (await irtt.stop()).samples];
  } catch (error) {
    await irtt.stop().catch(() => undefined);
    throw error;
  }
}

/** The q-quantile of `values` (nearest rank). */
export const quantile = (values: number[], q: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
};
