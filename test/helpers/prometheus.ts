/**
 * A real Prometheus with the shipped configuration (deploy/prometheus), pointed at one niclab
 * API and scraping every second, in a directory of its own that stop() removes.
 */
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
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

/** `alertmanager`: host:port of the Alertmanager it sends its alerts to (the shipped configuration's, re-pointed). */
export async function startPrometheus(apiPort: string, alertmanager?: string): Promise<TestPrometheus> {
  const dir = mkdtempSync(join(tmpdir(), 'niclab-prom-'));
  const config = parse(readFileSync(join(DEPLOY, 'prometheus/prometheus.yml'), 'utf8')) as { global: unknown; rule_files: string[]; scrape_configs: { static_configs: unknown }[]; alerting: { alertmanagers: { static_configs: unknown }[] } };
  config.global = { scrape_interval: '1s', evaluation_interval: '1s' };
  config.rule_files = [RULES];
  config.scrape_configs[0]!.static_configs = [{ targets: [`127.0.0.1:${apiPort}`] }];
  if (alertmanager) config.alerting.alertmanagers[0]!.static_configs = [{ targets: [alertmanager] }];
  else delete (config as { alerting?: unknown }).alerting;
  writeFileSync(join(dir, 'prometheus.yml'), stringify(config));
  const { base, stop } = await startDaemon('Prometheus', dir, (port) => ['prometheus', `--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`]);
  const query = async (expr: string) => {
    const res = await fetch(`${base}/api/v1/query?${new URLSearchParams({ query: expr })}`);
    return (await res.json()) as { status: string; error?: string; data?: { result: unknown[] } };
  };
  return { query, stop };
}

/**
 * Starts a Prometheus-family daemon on a free port and waits for its /-/ready; stop() ends it
 * (and `more`, such as a receiver of its own) and removes its directory, and runs when it
 * never became ready.
 */
async function startDaemon(name: string, dir: string, argv: (port: number) => string[], more: () => void = () => undefined): Promise<{ base: string; port: number; stop: () => Promise<void> }> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const [file, ...args] = argv(port);
  const child = spawn(file!, args, { stdio: 'ignore' });
  const stop = async () => {
    if (child.pid && child.exitCode === null) {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
    more();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await waitFor(`${name} ready`, async () => (await fetch(`${base}/-/ready`).catch(() => null))?.ok ?? false, 30_000);
  } catch (error) {
    await stop();
    throw error;
  }
  return { base, port, stop };
}

export interface TestAlertmanager {
  /** host:port, for Prometheus. */
  address: string;
  /** Every notification the shipped receiver's webhook got, as Alertmanager posted it. */
  notifications: { status: string; alerts: { status: string; labels: Record<string, string>; annotations: Record<string, string> }[] }[];
  stop(): Promise<void>;
}

/**
 * A real Alertmanager (Debian's prometheus-alertmanager) with the shipped configuration
 * (deploy/alertmanager), its webhook pointed at a server of this test's and its group wait and
 * interval at 1 s (30 s and 5 min shipped), no cluster.
 */
export async function startAlertmanager(): Promise<TestAlertmanager> {
  const dir = mkdtempSync(join(tmpdir(), 'niclab-am-'));
  const notifications: TestAlertmanager['notifications'] = [];
  const receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      if (req.url === '/niclab') notifications.push(JSON.parse(body) as TestAlertmanager['notifications'][number]);
      res.end();
    });
  });
  receiver.listen(0, '127.0.0.1');
  await once(receiver, 'listening');
  const hookPort = (receiver.address() as AddressInfo).port;
  const config = parse(readFileSync(join(DEPLOY, 'alertmanager/alertmanager.yml'), 'utf8')) as { route: Record<string, unknown>; receivers: { webhook_configs: { url: string }[] }[] };
  config.route.group_wait = '1s';
  config.route.group_interval = '1s';
  config.receivers[0]!.webhook_configs[0]!.url = `http://127.0.0.1:${hookPort}/niclab`;
  writeFileSync(join(dir, 'alertmanager.yml'), stringify(config));
  const { port, stop } = await startDaemon('Alertmanager', dir, (p) => ['prometheus-alertmanager', `--config.file=${join(dir, 'alertmanager.yml')}`, `--storage.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${p}`, '--cluster.listen-address='], () => receiver.close());
  return { address: `127.0.0.1:${port}`, notifications, stop };
}
