import { spawn, type ChildProcess } from 'node:child_process';
import type { LabHost } from '@niclab/cli/lab/lab';

/** One irtt round trip: when it was sent (epoch ms) and how long it took. */
export interface RttSample {
  at: number;
  rttMs: number;
}

const PORT = 2112;

/** irtt's server on a lab host's address (a reference for round trips); stop it with kill(). */
export function irttServer(host: LabHost): ChildProcess {
  return spawn('ip', ['netns', 'exec', host.namespace, 'irtt', 'server', '-b', `${host.address}:${PORT}`], { stdio: 'ignore' });
}

/** irtt's client from `from` to `to`'s server for `seconds`, one probe every `everyMs`: each round trip with its send time. */
export function irttClient(from: LabHost, to: LabHost, seconds: number, everyMs = 10): Promise<RttSample[]> {
  return new Promise((resolve, reject) => {
    const child = spawn('ip', ['netns', 'exec', from.namespace, 'irtt', 'client', '-i', `${everyMs}ms`, '-d', `${seconds}s`, '-Q', '-o', '-', `${to.address}:${PORT}`], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`irtt client exited ${code}`));
      const trips = (JSON.parse(out) as { round_trips: { lost: string; timestamps: { client: { send: { wall: number } } }; delay?: { rtt: number } }[] }).round_trips;
      resolve(trips.filter((r) => r.lost === 'false' && r.delay).map((r) => ({ at: r.timestamps.client.send.wall / 1e6, rttMs: r.delay!.rtt / 1e6 })));
    });
  });
}

/** The q-quantile of `values` (nearest rank). */
export const quantile = (values: number[], q: number): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
};
