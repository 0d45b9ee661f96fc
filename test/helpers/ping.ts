import { spawn } from 'node:child_process';
import type { IrttHost, RttSample } from './irtt.js';

/**
 * iputils ping from `from` to `to` every `everyMs` until `done` settles: each echo's round trip
 * and when it came back (epoch ms). ping stamps a reply with the kernel's receive time
 * (SO_TIMESTAMP; `-U` would give its process's) and the far end's kernel answers it (no process
 * there): a round trip without either end's wake-up, the reference for a kernel-stamped probe.
 */
export async function pingUntil(from: Pick<IrttHost, 'namespace'>, to: string, done: Promise<unknown>, everyMs = 10): Promise<RttSample[]> {
  const argv = ['ping', '-n', '-D', '-i', String(everyMs / 1000), '-w', '600', to];
  const child = from.namespace ? spawn('ip', ['netns', 'exec', from.namespace, ...argv], { stdio: ['ignore', 'pipe', 'pipe'] }) : spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'pipe'] });
  const samples: RttSample[] = [];
  let rest = '';
  child.stdout.on('data', (chunk: Buffer) => {
    const lines = (rest + chunk.toString()).split('\n');
    rest = lines.pop()!;
    for (const line of lines) {
      const m = /^\[(\d+\.\d+)\].* time=([\d.]+) ms/.exec(line);
      // -D prints the reply's arrival; its send was a round trip before.
      if (m) samples.push({ at: Number(m[1]) * 1000 - Number(m[2]), rttMs: Number(m[2]) });
    }
  });
  const exited = new Promise<void>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', () => resolve());
  });
  await done.catch(() => undefined);
  child.kill('SIGINT');
  await exited;
  return samples;
}
