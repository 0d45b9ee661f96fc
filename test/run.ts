/**
 * `npm test`: every test file, in two tiers. The serial tier (test/tiers.ts: the files that
 * measure ratios and timings) runs one file at a time with nothing beside it; then the rest run
 * NICLAB_TEST_CONCURRENCY at a time (default 2: at 3 the tier held both cores and starved
 * in-process agents of their heartbeats), each file in a process of its own as
 * `node --test` runs it, with the few files that mostly wait on timers (WAITING) one at a time
 * in a third lane beside them. Exits 1 when any file failed in either tier, and prints the slowest
 * files with their seconds, so the suite's budget (.ci/run in 25 minutes) stays in sight.
 *
 * `npm test -- FILE...` runs only those files (in their tiers); `--tier serial|concurrent` one tier.
 */
import { spawn } from 'node:child_process';
import { setPriority } from 'node:os';
import { mkdirSync, readFileSync, readdirSync, rmdirSync, statSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { FIRST, OWN_LANE, OWN_LANE_NICE, SERIAL, WAITING } from './tiers.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** A file still running after this long is killed (with its process group) and failed. */
const FILE_TIMEOUT_MS = 20 * 60_000;

interface FileResult {
  file: string;
  tier: Tier;
  seconds: number;
  passed: boolean;
  counts: string;
  /** What the spec reporter printed from its "failing tests:" summary on, for the run's end. */
  failures: string;
  /** CPU seconds the file's whole process tree used (its cgroup's count), or null where none could be made. */
  cpuSeconds: number | null;
}
type Tier = 'serial' | 'concurrent';

function testFiles(dir = join(ROOT, 'test')): string[] {
  return readdirSync(dir)
    .sort()
    .flatMap((name) => {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) return name === 'mutants' ? [] : testFiles(path);
      return /\.(test|container)\.ts$/.test(name) ? [relative(ROOT, path)] : [];
    });
}

/** The spec reporter's closing counts (tests, pass, fail, skipped), as one line. */
function countsOf(output: string): string {
  const count = (name: string) => output.match(new RegExp(`^ℹ ${name} (\\d+)$`, 'm'))?.[1];
  return ['tests', 'pass', 'fail', 'skipped'].map((n) => `${n} ${count(n) ?? '?'}`).join(', ');
}

/** The reporter's closing list of failed tests with their errors (or the output's tail when the file died before it), kept short. */
function failuresOf(output: string): string {
  const at = output.lastIndexOf('✖ failing tests:');
  const text = at >= 0 ? output.slice(at) : output.slice(-3000);
  return text.length > 6000 ? `${text.slice(0, 6000)}\n...` : text;
}

/**
 * A cgroup (v1 cpuacct, as root) per file, so the runner can say what CPU each file cost: its
 * test process joins it at once and everything it starts (Redis, agents, engines) inherits it.
 * Null where cgroups cannot be made; the timings then carry no CPU.
 */
const CPUACCT = '/sys/fs/cgroup/cpuacct';
function cpuGroup(file: string, pid: number | undefined): { seconds(): number | null } {
  const dir = join(CPUACCT, `niclab-test-${process.pid}-${pid}`);
  const remove = () => {
    // Anything of the file's still alive (it should not be) goes back to the root group, one by one (one may have exited meanwhile).
    try {
      for (const p of readFileSync(join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) {
        try {
          writeFileSync(join(CPUACCT, 'cgroup.procs'), p);
        } catch {
          // gone already
        }
      }
      rmdirSync(dir);
    } catch (error) {
      console.error(`test/run.ts: ${file}'s CPU group ${dir}: ${(error as Error).message}`);
    }
  };
  const none = { seconds: () => null };
  if (pid === undefined) return none;
  try {
    mkdirSync(dir);
  } catch {
    return none;
  }
  try {
    writeFileSync(join(dir, 'cgroup.procs'), String(pid));
  } catch {
    remove();
    return none;
  }
  return {
    seconds() {
      let usage: number | null = null;
      try {
        usage = Number(readFileSync(join(dir, 'cpuacct.usage'), 'utf8')) / 1e9;
      } catch (error) {
        console.error(`test/run.ts: ${file}'s CPU: ${(error as Error).message}`);
      }
      remove();
      return usage;
    },
  };
}

function runFile(file: string, tier: Tier): Promise<FileResult> {
  const started = performance.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=niclab-source', '--test', '--test-reporter=spec', file], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
      env: { ...process.env, FORCE_COLOR: '0' },
    });
    // A file of its own lane paces traffic through a shaper and mostly waits: at a higher
    // priority (its processes inherit it), the lanes beside it cannot stall its senders for the
    // tens of ms that a shaper's queue holds (see OWN_LANE). Both niclab and its bare references run there.
    if (file in OWN_LANE && process.getuid?.() === 0) setPriority(child.pid!, OWN_LANE_NICE);
    const cpu = cpuGroup(file, child.pid);
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c));
    child.stderr.on('data', (c: Buffer) => (output += c));
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    }, FILE_TIMEOUT_MS);
    child.on('close', (code) => {
      clearTimeout(timer);
      const seconds = (performance.now() - started) / 1000;
      const passed = code === 0 && !timedOut;
      const cpuSeconds = cpu.seconds();
      const result = { file, tier, seconds, passed, counts: countsOf(output), failures: passed ? '' : failuresOf(output), cpuSeconds };
      const head = `${passed ? 'ok' : 'FAILED'}  ${seconds.toFixed(1).padStart(6)} s  ${cpuText(cpuSeconds)}  ${tier.padEnd(10)}  ${file}  (${result.counts})${timedOut ? `  killed after ${FILE_TIMEOUT_MS / 60_000} min` : ''}`;
      process.stdout.write(`\n=== ${head}\n${output.trimEnd()}\n=== end ${file}\n`);
      resolve(result);
    });
  });
}

/** The machine's CPU time so far (all CPUs, in jiffies): busy and total, from /proc/stat's first line. */
function cpuTimes(): { busy: number; total: number } | null {
  try {
    const [, ...fields] = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/);
    const n = fields.map(Number);
    const total = n.slice(0, 8).reduce((a, b) => a + b, 0); // user nice system idle iowait irq softirq steal
    return { busy: total - n[3]! - n[4]!, total };
  } catch {
    return null;
  }
}

/** Runs `files` at most `concurrency` at a time, in the order given; and how busy the machine was meanwhile (all CPUs, from /proc/stat). */
async function pool(files: string[], tier: Tier, concurrency: number): Promise<{ results: FileResult[]; busy: number | null }> {
  const results: FileResult[] = [];
  const queue = [...files];
  const first = cpuTimes();
  const worker = async () => {
    for (let file = queue.shift(); file; file = queue.shift()) results.push(await runFile(file, tier));
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, files.length)) }, worker));
  const last = cpuTimes();
  return { results, busy: first && last ? (last.busy - first.busy) / Math.max(1, last.total - first.total) : null };
}

const cpuText = (cpuSeconds: number | null) => `${cpuSeconds === null ? '     ?' : cpuSeconds.toFixed(1).padStart(6)} s CPU`;

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const tierArg = args.includes('--tier') ? args[args.indexOf('--tier') + 1] : undefined;
  const chosen = args.filter((a, i) => !a.startsWith('--') && args[i - 1] !== '--tier');
  const all = testFiles();
  const unknownSerial = [...Object.keys(SERIAL), ...Object.keys(WAITING), ...Object.keys(OWN_LANE), ...FIRST].filter((f) => !all.includes(f));
  if (unknownSerial.length) throw new Error(`test/tiers.ts names files that do not exist: ${unknownSerial.join(', ')}`);
  const files = chosen.length ? chosen.map((f) => relative(ROOT, join(process.cwd(), f))) : all;
  const missing = files.filter((f) => !all.includes(f));
  if (missing.length) throw new Error(`no such test file: ${missing.join(', ')}`);
  const concurrency = Number(process.env.NICLAB_TEST_CONCURRENCY ?? 2);
  const started = performance.now();
  const serial = tierArg === 'concurrent' ? [] : files.filter((f) => f in SERIAL);
  const rank = (f: string) => (FIRST.includes(f) ? FIRST.indexOf(f) : FIRST.length);
  const concurrent = tierArg === 'serial' ? [] : files.filter((f) => !(f in SERIAL)).sort((a, b) => rank(a) - rank(b));
  const waiting = concurrent.filter((f) => f in WAITING);
  const ownLanes = concurrent.filter((f) => f in OWN_LANE);
  const lanes = concurrent.filter((f) => !(f in WAITING) && !(f in OWN_LANE));
  console.log(`niclab tests: ${serial.length} files alone (serial tier), then ${concurrent.length} files (concurrent tier): ${lanes.length} of them ${concurrency} at a time, and beside them the ${waiting.length} that mostly wait, one at a time, and ${ownLanes.length} in a lane of its own`);
  const serialStarted = performance.now();
  const { results } = await pool(serial, 'serial', 1);
  const serialSeconds = (performance.now() - serialStarted) / 1000;
  const concurrentStarted = performance.now();
  const [shared, beside, ...own] = await Promise.all([pool(lanes, 'concurrent', concurrency), pool(waiting, 'concurrent', 1), ...ownLanes.map((f) => pool([f], 'concurrent', 1))]);
  results.push(...shared.results, ...beside.results, ...own.flatMap((o) => o.results));
  const concurrentSeconds = (performance.now() - concurrentStarted) / 1000;
  const total = (performance.now() - started) / 1000;

  const failed = results.filter((r) => !r.passed);
  const slowest = [...results].sort((a, b) => b.seconds - a.seconds).slice(0, 10);
  console.log(`\nslowest files:`);
  for (const r of slowest) console.log(`  ${r.seconds.toFixed(1).padStart(6)} s  ${cpuText(r.cpuSeconds)}  ${r.tier.padEnd(10)}  ${r.file}`);
  const cpuOf = (tier: Tier) => {
    const counted = results.filter((r) => r.tier === tier && r.cpuSeconds !== null);
    return counted.length ? counted.reduce((sum, r) => sum + r.cpuSeconds!, 0).toFixed(0) : '?';
  };
  console.log(`\nserial tier ${serialSeconds.toFixed(0)} s (${serial.length} files, ${cpuOf('serial')} s CPU), concurrent tier ${concurrentSeconds.toFixed(0)} s (${concurrent.length} files, ${lanes.length} at ${concurrency}, ${waiting.length} beside them and ${ownLanes.length} in lanes of their own, ${cpuOf('concurrent')} s CPU, the machine ${shared.busy === null ? '?' : (shared.busy * 100).toFixed(0)}% busy), total ${total.toFixed(0)} s`);
  mkdirSync(join(ROOT, 'test-output'), { recursive: true });
  writeFileSync(join(ROOT, 'test-output', 'timings.json'), JSON.stringify({ total, serialSeconds, concurrentSeconds, concurrency, concurrentBusy: shared.busy, files: results }, null, 2));
  if (failed.length) {
    console.log(`\n${failed.length} of ${results.length} files FAILED:`);
    for (const r of failed) console.log(`  ${r.file}  (${r.counts})`);
    // Again at the very end, where a CI log's tail shows it: each failed file's failures.
    for (const r of failed) console.log(`\n--- ${r.file}\n${r.failures.trimEnd()}`);
    return 1;
  }
  console.log(`all ${results.length} files passed`);
  return 0;
}

main().then(
  (code) => process.exit(code),
  (error: Error) => {
    console.error(`test/run.ts: ${error.message}`);
    process.exit(2);
  },
);
