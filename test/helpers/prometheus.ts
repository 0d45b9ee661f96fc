/**
 * A real Prometheus with the shipped configuration (deploy/prometheus), pointed at one niclab
 * API and scraping every second, in a directory of its own that stop() removes.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { waitFor } from './processes.js';
import { freePort } from './redis.js';

export const DEPLOY = new URL('../../deploy/', import.meta.url).pathname;
export const RULES = join(DEPLOY, 'prometheus/rules/niclab.yml');

export interface TestPrometheus {
  query(expr: string): Promise<{ status: string; error?: string; data?: { result: unknown[] } }>;
  stop(): Promise<void>;
}

export async function startPrometheus(apiPort: string): Promise<TestPrometheus> {
  const dir = mkdtempSync(join(tmpdir(), 'niclab-prom-'));
  const config = parse(readFileSync(join(DEPLOY, 'prometheus/prometheus.yml'), 'utf8')) as { global: unknown; rule_files: string[]; scrape_configs: { static_configs: unknown }[] };
  config.global = { scrape_interval: '1s', evaluation_interval: '1s' };
  config.rule_files = [RULES];
  config.scrape_configs[0]!.static_configs = [{ targets: [`127.0.0.1:${apiPort}`] }];
  writeFileSync(join(dir, 'prometheus.yml'), stringify(config));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const child = spawn('prometheus', [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`], { stdio: 'ignore' });
  const stop = async () => {
    if (child.pid && child.exitCode === null) {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
    rmSync(dir, { recursive: true, force: true });
  };
  const query = async (expr: string) => {
    const res = await fetch(`${base}/api/v1/query?${new URLSearchParams({ query: expr })}`);
    return (await res.json()) as { status: string; error?: string; data?: { result: unknown[] } };
  };
  try {
    await waitFor('Prometheus ready', async () => (await fetch(`${base}/-/ready`).catch(() => null))?.ok ?? false, 30_000);
  } catch (error) {
    await stop();
    throw error;
  }
  return { query, stop };
}
