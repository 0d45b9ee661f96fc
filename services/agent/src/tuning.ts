import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { command } from '@niclab/shared/runtime/command';
import type { Logger } from '@niclab/shared/runtime/logger';
import { FEATURES, RINGS, type Tuning } from '@niclab/shared/domain/tuning-rules';
import { isUsable } from '@niclab/shared/domain/interfaces';
import { nextTbfBurst, planQdisc, qdiscSetup, tbfChangeArgs, type RestoreStep, type TcQdisc } from '@niclab/shared/domain/qdisc-rules';
import { isDeepStrictEqual } from 'node:util';
import { readInterface } from './interfaces.js';

/** What a run changed on one interface, as it was before. */
interface InterfaceBefore {
  mtu?: number;
  txqueuelen?: number;
  features?: Record<string, 'on' | 'off'>;
  rings?: Record<string, number>;
  /** How the qdisc setup comes back, planned before it changed. */
  qdisc?: { parent: string; restore: RestoreStep[] };
}

/** Everything one run changed on this host, as it was before: restored when the run ends. */
interface RunBefore {
  interfaces: Record<string, InterfaceBefore>;
  sysctl: Record<string, string>;
}

/** The durable record: written (and fsynced) before each change, so a crash loses none. */
interface Record_ {
  runs: Record<string, RunBefore>;
}

/** The tuning in force on an end, read back after applying it. */
export interface AppliedTuning {
  mtu?: number;
  txqueuelen?: number;
  sysctl?: Record<string, string>;
  ethtool?: Record<string, string | number>;
  qdisc?: { kind: string; handle: string; parent: string; options: Record<string, unknown> };
}

/** After an MTU change a link may go down and up again: wait this long for it. */
const LINK_SETTLE_MS = 10_000;

async function linkUsable(iface: string): Promise<void> {
  const settle = Date.now() + LINK_SETTLE_MS;
  for (;;) {
    const now = await readInterface(iface);
    if ((now && isUsable(now)) || Date.now() > settle) return;
    await new Promise((r) => setTimeout(r, 100));
  }
}

const sysctlPath = (name: string) => `/proc/sys/${name.replaceAll('.', '/')}`;
const sysPath = (iface: string, file: string) => `/sys/class/net/${iface}/${file}`;
const onOff = (value: string | number | boolean): 'on' | 'off' => (value === true || value === 'on' ? 'on' : 'off');

async function readNumber(path: string): Promise<number> {
  return Number((await readFile(path, 'utf8')).trim());
}

/** Every qdisc of `iface`, tbf's own default child too (`invisible`). */
async function readQdiscs(iface: string): Promise<TcQdisc[]> {
  return JSON.parse(await command('tc', ['-j', 'qdisc', 'show', 'dev', iface, 'invisible'])) as TcQdisc[];
}

/** How many times a tbf is set again, its burst searched for the one that reads back as before, before restoring gives up. */
const TBF_ATTEMPTS = 16;

/** Runs one planned restore step; a setup that did not come back exactly is an error. */
async function restoreQdisc(step: RestoreStep): Promise<void> {
  if ('tc' in step) {
    await command('tc', step.tc);
    return;
  }
  const tbf = step.tbfDefaultChild;
  // With its child removed tbf holds noop (it drops everything) until the change makes its default
  // child again. The delete may find the child gone already (a restore that died between its two
  // steps, run again by recover()): the change below is what matters, and its read-back decides.
  await command('tc', ['qdisc', 'del', 'dev', tbf.dev, 'parent', `${tbf.handle}1`]).catch(() => undefined);
  const search = {};
  let burst = nextTbfBurst(tbf.burstBytes, search);
  let now: TcQdisc[] = [];
  let failed: Error | null = null;
  for (let attempt = 0; attempt < TBF_ATTEMPTS; attempt++) {
    // A change that fails (tc killed by its timeout on a loaded host) is tried again: giving up
    // here would leave the link on noop, dropping everything.
    const changed = await command('tc', tbfChangeArgs(tbf, burst)).then(() => true, (error: Error) => ((failed = error), false));
    if (!changed) continue;
    now = qdiscSetup(await readQdiscs(tbf.dev));
    if (isDeepStrictEqual(now, tbf.expect)) return;
    const read = now.find((q) => q.root)?.options?.burst;
    burst = nextTbfBurst(tbf.burstBytes, search, burst, typeof read === 'number' ? read : 0);
  }
  throw new Error(`${tbf.dev}'s qdiscs are ${JSON.stringify(now)}, were ${JSON.stringify(tbf.expect)}${failed ? ` (last tc error: ${(failed as Error).message})` : ''}`);
}

/** `ethtool -k` output: "generic-receive-offload: on" (possibly "[fixed]"). */
async function readFeatures(iface: string): Promise<Record<string, 'on' | 'off'>> {
  const out = await command('ethtool', ['-k', iface]);
  const features: Record<string, 'on' | 'off'> = {};
  for (const line of out.split('\n')) {
    const match = /^([a-z0-9-]+): (on|off)/.exec(line.trim());
    if (match) features[match[1]!] = match[2] as 'on' | 'off';
  }
  return features;
}

/** `ethtool -g`: the "Current hardware settings" RX/TX sizes. */
async function readRings(iface: string): Promise<Record<string, number>> {
  const out = await command('ethtool', ['-g', iface]);
  const current = out.split(/Current hardware settings:/i)[1] ?? '';
  const rings: Record<string, number> = {};
  for (const param of Object.values(RINGS)) {
    const match = new RegExp(`^${param.toUpperCase()}:\\s+(\\d+)`, 'm').exec(current);
    if (match) rings[param] = Number(match[1]);
  }
  return rings;
}

/**
 * Applies a job's tuning for the length of a run and always puts it back. The previous values
 * go to a file (fsynced) before anything changes; an agent that died mid-run restores them from
 * it when it starts again, before it takes work. The ends of one run on this agent share one
 * application: the first applies, the last to finish restores.
 */
export class Tuner {
  private readonly file: string;
  private readonly users = new Map<string, number>();
  private queue: Promise<unknown> = Promise.resolve();

  constructor(dataDir: string, agentId: string, private readonly log: Logger) {
    this.file = join(dataDir, 'agents', agentId, 'tuning.json');
  }

  /** Runs changes one at a time, so two ends of a run never interleave their bookkeeping. */
  private serial<T>(work: () => Promise<T>): Promise<T> {
    const next = this.queue.then(work, work);
    this.queue = next.catch(() => undefined);
    return next;
  }

  private load(): Record_ {
    try {
      return JSON.parse(readFileSync(this.file, 'utf8')) as Record_;
    } catch {
      return { runs: {} };
    }
  }

  private save(record: Record_): void {
    mkdirSync(dirname(this.file), { recursive: true, mode: 0o700 });
    const tmp = `${this.file}.tmp`;
    const fd = openSync(tmp, 'w', 0o600);
    try {
      writeSync(fd, JSON.stringify(record));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, this.file);
  }

  /** Restores whatever a previous life of this agent left applied. Call before taking work. */
  async recover(): Promise<string[]> {
    const runs = Object.keys(this.load().runs);
    for (const runId of runs) await this.serial(() => this.restoreNow(runId));
    if (runs.length > 0) this.log.warn({ runs }, 'tuning left by a previous agent process restored');
    return runs;
  }

  /** Applies `tuning` to `iface` (and the host's sysctls) for `runId`; returns what is in force. */
  apply(runId: string, iface: string, tuning: Tuning): Promise<AppliedTuning> {
    return this.serial(async () => {
      this.users.set(runId, (this.users.get(runId) ?? 0) + 1);
      const record = this.load();
      const before: RunBefore = (record.runs[runId] ??= { interfaces: {}, sysctl: {} });
      const mine: InterfaceBefore = (before.interfaces[iface] ??= {});
      const remember = () => this.save(record);
      try {
        if (tuning.mtu !== undefined && mine.mtu === undefined) {
          mine.mtu = await readNumber(sysPath(iface, 'mtu'));
          remember();
          await command('ip', ['link', 'set', 'dev', iface, 'mtu', String(tuning.mtu)]);
          await linkUsable(iface);
        }
        if (tuning.txqueuelen !== undefined && mine.txqueuelen === undefined) {
          mine.txqueuelen = await readNumber(sysPath(iface, 'tx_queue_len'));
          remember();
          await command('ip', ['link', 'set', 'dev', iface, 'txqueuelen', String(tuning.txqueuelen)]);
        }
        for (const [name, value] of Object.entries(tuning.sysctl ?? {})) {
          if (before.sysctl[name] !== undefined) continue;
          before.sysctl[name] = (await readFile(sysctlPath(name), 'utf8')).trim();
          remember();
          await writeFile(sysctlPath(name), value);
        }
        const features = Object.entries(tuning.ethtool ?? {}).filter(([name]) => FEATURES[name]);
        if (features.length > 0 && !mine.features) {
          const now = await readFeatures(iface);
          mine.features = Object.fromEntries(features.map(([name]) => [name, now[FEATURES[name]!] ?? 'off']));
          remember();
          await command('ethtool', ['-K', iface, ...features.flatMap(([name, value]) => [name, onOff(value)])]);
        }
        const rings = Object.entries(tuning.ethtool ?? {}).filter(([name]) => RINGS[name]);
        if (rings.length > 0 && !mine.rings) {
          mine.rings = await readRings(iface);
          remember();
          await command('ethtool', ['-G', iface, ...rings.flatMap(([name, value]) => [RINGS[name]!, String(value)])]);
        }
        // Last: a pfifo without a limit takes the txqueuelen set above.
        if (tuning.qdisc && !mine.qdisc) {
          const plan = planQdisc(iface, tuning.qdisc, await readQdiscs(iface));
          if (typeof plan === 'string') throw new Error(`qdisc not changed: ${plan}`);
          mine.qdisc = { parent: plan.parent, restore: plan.restore };
          remember();
          // tc replaces a qdisc in one step: when it refuses (a kind this kernel lacks), nothing changed and nothing is to be put back.
          await command('tc', plan.apply).catch((error: Error) => {
            delete mine.qdisc;
            remember();
            throw error;
          });
        }
      } catch (error) {
        // Whatever did change goes back before the run fails.
        await this.restoreNow(runId).catch(() => undefined);
        this.users.delete(runId);
        throw new Error(`tuning ${iface} failed: ${(error as Error).message}`);
      }
      return this.inForce(runId, iface, tuning);
    });
  }

  /** Reads back the settings the job named, as the kernel now has them. */
  private async inForce(runId: string, iface: string, tuning: Tuning): Promise<AppliedTuning> {
    const applied: AppliedTuning = {};
    if (tuning.mtu !== undefined) applied.mtu = await readNumber(sysPath(iface, 'mtu'));
    if (tuning.txqueuelen !== undefined) applied.txqueuelen = await readNumber(sysPath(iface, 'tx_queue_len'));
    if (tuning.sysctl) {
      applied.sysctl = {};
      for (const name of Object.keys(tuning.sysctl)) applied.sysctl[name] = (await readFile(sysctlPath(name), 'utf8')).trim().replace(/\s+/g, ' ');
    }
    if (tuning.ethtool) {
      const [features, rings] = await Promise.all([
        Object.keys(tuning.ethtool).some((n) => FEATURES[n]) ? readFeatures(iface) : {},
        Object.keys(tuning.ethtool).some((n) => RINGS[n]) ? readRings(iface) : {},
      ]);
      applied.ethtool = {};
      for (const name of Object.keys(tuning.ethtool)) {
        const value = FEATURES[name] ? (features as Record<string, string>)[FEATURES[name]!] : (rings as Record<string, number>)[RINGS[name]!];
        if (value !== undefined) applied.ethtool[name] = value;
      }
    }
    if (tuning.qdisc) {
      const parent = this.load().runs[runId]?.interfaces[iface]?.qdisc?.parent;
      const found = (await readQdiscs(iface)).find((q) => (parent === 'root' ? q.root : q.parent === parent));
      if (found) applied.qdisc = { kind: found.kind, handle: found.handle, parent: parent!, options: found.options ?? {} };
    }
    return applied;
  }

  /** One end of the run is done; the last one puts everything back. */
  release(runId: string): Promise<void> {
    return this.serial(async () => {
      const left = (this.users.get(runId) ?? 1) - 1;
      if (left > 0) {
        this.users.set(runId, left);
        return;
      }
      this.users.delete(runId);
      await this.restoreNow(runId);
    });
  }

  /** Puts back what the record says, then forgets the run. A value that cannot be restored is logged, and the rest still are. */
  private async restoreNow(runId: string): Promise<void> {
    const record = this.load();
    const before = record.runs[runId];
    if (!before) return;
    const failed: string[] = [];
    const attempt = async (what: string, work: () => Promise<unknown>) => {
      await work().catch((error: Error) => {
        failed.push(what);
        this.log.error({ err: error, runId, what }, 'could not restore a tuned setting');
      });
    };
    for (const [iface, was] of Object.entries(before.interfaces)) {
      // First: the qdisc came last, and a default root that follows txqueuelen is made again before it changes back.
      if (was.qdisc) for (const step of was.qdisc.restore) await attempt(`${iface} qdisc`, () => restoreQdisc(step));
      if (was.rings) await attempt(`${iface} rings`, () => command('ethtool', ['-G', iface, ...Object.entries(was.rings!).flatMap(([p, v]) => [p, String(v)])]));
      if (was.features) await attempt(`${iface} features`, () => command('ethtool', ['-K', iface, ...Object.entries(was.features!).flatMap(([n, v]) => [n, v])]));
      if (was.txqueuelen !== undefined) await attempt(`${iface} txqueuelen`, () => command('ip', ['link', 'set', 'dev', iface, 'txqueuelen', String(was.txqueuelen)]));
      if (was.mtu !== undefined) await attempt(`${iface} mtu`, () => command('ip', ['link', 'set', 'dev', iface, 'mtu', String(was.mtu)]));
    }
    for (const [name, value] of Object.entries(before.sysctl)) await attempt(name, () => writeFile(sysctlPath(name), value));
    delete record.runs[runId];
    this.save(record);
    if (failed.length) this.log.error({ runId, failed }, 'tuning restored except what failed');
    else this.log.info({ runId, interfaces: Object.keys(before.interfaces), sysctl: Object.keys(before.sysctl) }, 'tuning restored');
  }
}
