/**
 * What every benchmark shares: a virtual lab with niclab on it, bare tools run in the same
 * namespaces for reference, and figures written to bench/results/<name>.json.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { cpus, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { command } from '@niclab/shared/runtime/command';
import { waitFor } from '../test/helpers/processes.js';
import { freePort } from '../test/helpers/redis.js';

export { startTestLab as startLab, flow, mbit } from '../test/helpers/lab.js';

const here = dirname(fileURLToPath(import.meta.url));

/** USER_HZ: the unit of /proc/<pid>/stat's CPU times on Linux. */
const CLOCK_TICKS = 100;

const CLI = fileURLToPath(new URL('../services/cli/dist/main.js', import.meta.url));

/**
 * `niclab api` as a process of its own on core 1, without a coordinator (the API's figures
 * alone), once it answers; the calling benchmark moves itself to core 0. `env` names at
 * least REDIS_URL and NICLAB_PREFIX. With BENCH_CPU_PROF=<dir> in the benchmark's own
 * environment, the API writes a CPU profile there when it stops (node --cpu-prof).
 */
export async function startPinnedApi(env: Record<string, string>): Promise<{ base: string; cpuMs(): number; stop(): Promise<void> }> {
  await command('taskset', ['-p', '-c', '0', String(process.pid)]);
  const port = await freePort();
  const profile = process.env.BENCH_CPU_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_CPU_PROF}`] : [];
  const api = spawn('taskset', ['-c', '1', process.execPath, ...profile, CLI, 'api'], {
    env: { PATH: process.env.PATH ?? '', NICLAB_LOG_LEVEL: 'warn', ...env, NICLAB_PORT: String(port), NICLAB_COORDINATOR: 'false' },
    stdio: 'inherit',
  });
  const base = `http://127.0.0.1:${port}`;
  try {
    await waitFor('the API', async () => (await fetch(`${base}/readyz`).catch(() => null))?.ok ?? false);
  } catch (error) {
    api.kill('SIGTERM');
    throw error;
  }
  const exited = new Promise((resolve) => api.once('exit', resolve));
  return {
    base,
    // CPU time the API has used so far (user + system): on a shared machine, what a scrape costs
    // the API is steadier than how long it takes.
    cpuMs: () => {
      const fields = readFileSync(`/proc/${api.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
      return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
    },
    stop: async () => {
      api.kill('SIGTERM');
      await exited;
    },
  };
}

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** Median and the spread (min, max) of per-pair ratios. */
export function ratioSummary(ratios: number[]) {
  return { median: round(median(ratios)), min: round(Math.min(...ratios)), max: round(Math.max(...ratios)), pairs: ratios.map((r) => round(r)) };
}

export const round = (value: number, digits = 4) => Math.round(value * 10 ** digits) / 10 ** digits;

export function machine() {
  return { cpus: cpus().length, cpuModel: cpus()[0]?.model ?? 'unknown', memoryGiB: Math.round(totalmem() / 2 ** 30), node: process.version, kernel: '' };
}

export async function writeResult(name: string, figures: Record<string, unknown>): Promise<string> {
  const dir = join(here, 'results');
  mkdirSync(dir, { recursive: true });
  const file = join(dir, `${name}.json`);
  const kernel = (await command('uname', ['-r'])).trim();
  writeFileSync(file, `${JSON.stringify({ benchmark: name, at: new Date().toISOString(), machine: { ...machine(), kernel }, ...figures }, null, 2)}\n`);
  return file;
}

export { bareIperf3, bareIperf3Udp } from '../test/helpers/lab.js';
