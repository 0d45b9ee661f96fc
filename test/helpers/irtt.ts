import { spawn } from 'node:child_process';

/** One irtt round trip: its send time (epoch ms) and its RTT (ms). */
export interface IrttSample { at: number; rttMs: number }
/** irtt's own figures over its run (ns): its timer's error, its round-trip IPDV, its server's processing time. */
export interface IrttStats {
  timer_error: { mean: number; max: number; median?: number };
  ipdv_round_trip: { median?: number; mean: number };
  server_processing_time: { mean: number; median?: number; max: number };
}

/** irtt's client in `namespace` for `seconds`, every 10 ms, to an irtt server at `target` (address:port). */
export function irttClient(namespace: string, target: string, seconds: number): Promise<{ samples: IrttSample[]; stats: IrttStats }> {
  return new Promise((resolve, reject) => {
    const child = spawn('ip', ['netns', 'exec', namespace, 'irtt', 'client', '-i', '10ms', '-d', `${seconds}s`, '-Q', '-o', '-', target], { stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) return reject(new Error(`irtt client exited ${code}`));
      const parsed = JSON.parse(out) as { stats: IrttStats; round_trips: { lost: string; timestamps: { client: { send: { wall: number } } }; delay?: { rtt: number } }[] };
      const samples = parsed.round_trips.filter((r) => r.lost === 'false' && r.delay).map((r) => ({ at: r.timestamps.client.send.wall / 1e6, rttMs: r.delay!.rtt / 1e6 }));
      resolve({ samples, stats: parsed.stats });
    });
  });
}
