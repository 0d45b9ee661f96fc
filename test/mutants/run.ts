/**
 * `npm run test:mutants [-- --only ID,ID] [-- --list] [-- --no-baseline]`: plants each bug of
 * `mutants.ts` in a copy of this checkout, runs the tests that should catch it, and fails if
 * any mutant survives (its tests all pass) or no longer applies (its code moved: update it).
 * The copy is made once (tracked and untracked files as they are in the work tree, and
 * node_modules), so the checkout itself is never touched. Before the mutants, each test
 * selection runs once unmutated: a test that fails anyway kills nothing. Lab tests need root.
 */
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MUTANTS, type Mutant } from './mutants.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const args = process.argv.slice(2);
const flag = (name: string) => args.includes(name);
const only = args.find((a) => a.startsWith('--only='))?.slice('--only='.length).split(',') ?? (args.includes('--only') ? args[args.indexOf('--only') + 1]!.split(',') : null);

if (flag('--list')) {
  for (const m of MUTANTS) console.log(`${m.id.padEnd(24)} ${m.file}\n${' '.repeat(25)}${m.what}\n${' '.repeat(25)}caught by: ${m.tests.join(' ')}${m.pattern ? ` (tests matching /${m.pattern}/)` : ''}`);
  process.exit(0);
}
const chosen = only ? MUTANTS.filter((m) => only.includes(m.id)) : MUTANTS;
if (only && chosen.length !== only.length) {
  console.error(`unknown mutant: ${only.filter((id) => !MUTANTS.some((m) => m.id === id)).join(', ')} (see --list)`);
  process.exit(2);
}

/** The checkout's tracked and untracked (not ignored) files, and node_modules, copied once. */
function copyCheckout(): string {
  const work = mkdtempSync(join(tmpdir(), 'niclab-mutants-'));
  const listed = spawnSync('git', ['ls-files', '-z', '--cached', '--others', '--exclude-standard'], { cwd: ROOT, encoding: 'utf8' });
  if (listed.status !== 0) throw new Error(`git ls-files: ${listed.stderr}`);
  for (const file of listed.stdout.split('\0').filter(Boolean)) {
    mkdirSync(dirname(join(work, file)), { recursive: true });
    try {
      cpSync(join(ROOT, file), join(work, file), { verbatimSymlinks: true });
    } catch (error) {
      if ((error as { code?: string }).code !== 'ENOENT') throw error; // deleted in the work tree
    }
  }
  // Workspace links in node_modules are relative (../../services/x), so in the copy they lead into the copy.
  cpSync(join(ROOT, 'node_modules'), join(work, 'node_modules'), { recursive: true, verbatimSymlinks: true });
  return work;
}

function build(work: string): string | null {
  const tsc = spawnSync(process.execPath, [join(work, 'node_modules/typescript/bin/tsc'), '-b', 'services/cli'], { cwd: work, encoding: 'utf8' });
  return tsc.status === 0 ? null : tsc.stdout + tsc.stderr;
}

interface TestRun {
  passed: boolean;
  failed: string[];
  /** The tests that ran and passed (the reporter's count; a test the pattern skips is not one). */
  ran: number;
  seconds: number;
  tail: string;
}

/** The longest one selection of tests may run before it is ended (a hang is a failure). */
const RUN_TIMEOUT_MS = 10 * 60_000;

/** Runs test files in the copy as `npm test` does; the names of the tests that failed. */
function runTests(work: string, tests: string[], pattern?: string): Promise<TestRun> {
  const started = Date.now();
  const argv = ['--import', 'tsx', '--conditions=niclab-source', '--test', '--test-concurrency=1', '--test-reporter=tap'];
  if (pattern) argv.push(`--test-name-pattern=${pattern}`);
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...argv, ...tests], { cwd: work, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c));
    child.stderr.on('data', (c: Buffer) => (output += c));
    // A mutant can make a test wait forever (a stream that never resumes): past the limit the
    // run is ended with its process group, and counts as failed (the mutant is caught).
    const timer = setTimeout(() => {
      output += `\nnot ok 0 - killed after ${RUN_TIMEOUT_MS / 60_000} min\n`;
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    }, RUN_TIMEOUT_MS);
    child.on('close', (code) => {
      clearTimeout(timer);
      const failed = [...output.matchAll(/^\s*not ok \d+ - (.*)$/gm)].map((m) => m[1]!.trim());
      const ran = Number(output.match(/^# pass (\d+)$/m)?.[1] ?? 0);
      resolve({ passed: code === 0, failed: [...new Set(failed)], ran, seconds: (Date.now() - started) / 1000, tail: output.split('\n').slice(-40).join('\n') });
    });
  });
}

function apply(work: string, mutant: Mutant): () => void {
  const path = join(work, mutant.file);
  const original = readFileSync(path, 'utf8');
  const count = original.split(mutant.from).length - 1;
  if (count !== 1) throw new Error(`mutant ${mutant.id}: its code occurs ${count} times in ${mutant.file} (expected once): update mutants.ts`);
  writeFileSync(path, original.replace(mutant.from, () => mutant.to));
  return () => writeFileSync(path, original);
}

/** Why a selection that ran no test judges nothing: a pattern that names no test passes with or without the bug. */
const noTestRan = (m: Mutant) => `no test ran in ${m.tests.join(' ')}: ${m.pattern ? `the pattern /${m.pattern}/ matches none, or ` : ''}every test was skipped`;
const selection = (m: Mutant) => `${m.tests.join(' ')}${m.pattern ? ` /${m.pattern}/` : ''}`;

async function main(): Promise<number> {
  const work = copyCheckout();
  console.log(`copy of the checkout: ${work}`);
  try {
    const broken = build(work);
    if (broken) throw new Error(`the unmutated copy does not build:\n${broken}`);
    // A selection that fails unmutated (twice: these machines are shared and noisy) judges nothing.
    const unjudged = new Map<string, string[]>();
    if (!flag('--no-baseline')) {
      for (const m of chosen) {
        if (unjudged.has(selection(m)) || chosen.indexOf(m) !== chosen.findIndex((o) => selection(o) === selection(m))) continue;
        let run = await runTests(work, m.tests, m.pattern);
        if (!run.passed) run = await runTests(work, m.tests, m.pattern);
        console.log(`baseline ${run.passed ? 'pass' : 'FAIL'} (${run.seconds.toFixed(0)} s, ${run.ran} tests): ${selection(m)}`);
        if (!run.passed) {
          console.log(run.tail);
          unjudged.set(selection(m), run.failed);
        } else if (run.ran === 0) {
          unjudged.set(selection(m), [noTestRan(m)]);
        }
      }
    }
    const results: { mutant: Mutant; outcome: 'killed' | 'SURVIVED' | 'INVALID'; by: string[]; seconds: number }[] = [];
    for (const m of chosen) {
      let restore: (() => void) | undefined;
      const failing = unjudged.get(selection(m));
      if (failing) {
        const why = failing[0] === noTestRan(m) ? failing[0] : `its tests fail without the mutant: ${failing.join('; ')}`;
        results.push({ mutant: m, outcome: 'INVALID', by: [why], seconds: 0 });
        console.log(`INVALID  ${m.id}: ${why}`);
        continue;
      }
      try {
        restore = apply(work, m);
        const broken = build(work);
        if (broken) {
          results.push({ mutant: m, outcome: 'INVALID', by: [`does not compile: ${broken.split('\n')[0]}`], seconds: 0 });
        } else {
          const run = await runTests(work, m.tests, m.pattern);
          if (run.passed && run.ran === 0) results.push({ mutant: m, outcome: 'INVALID', by: [noTestRan(m)], seconds: run.seconds });
          else results.push({ mutant: m, outcome: run.passed ? 'SURVIVED' : 'killed', by: run.failed, seconds: run.seconds });
        }
      } catch (error) {
        results.push({ mutant: m, outcome: 'INVALID', by: [(error as Error).message], seconds: 0 });
      } finally {
        restore?.();
      }
      const r = results.at(-1)!;
      console.log(`${r.outcome.padEnd(8)} ${m.id} (${r.seconds.toFixed(0)} s): ${r.by.slice(0, 4).join(' | ') || '(every test passed)'}`);
    }
    console.log('\nmutant                   outcome   killed by');
    for (const r of results) console.log(`${r.mutant.id.padEnd(24)} ${r.outcome.padEnd(9)} ${r.by.slice(0, 3).join(' | ')}`);
    const bad = results.filter((r) => r.outcome !== 'killed');
    console.log(`\n${results.length - bad.length} killed, ${bad.length} survived or invalid`);
    return bad.length === 0 ? 0 : 1;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

process.exitCode = await main();
