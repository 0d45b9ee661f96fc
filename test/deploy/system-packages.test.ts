import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { NOT_ROOT } from '../helpers/skip.js';

/**
 * The two commands' set-up (deploy/system-packages.mjs), tried as on a machine without the
 * packages: a PATH of this machine's commands without those the packages provide. As root on Debian it installs
 * what is missing (here: says what it would run); as anyone else `npm start` stops at once with
 * the command to run, before it builds or starts anything.
 */
const exec = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const SCRIPT = join(ROOT, 'deploy/system-packages.mjs');
const { NEEDS } = (await import(SCRIPT)) as { NEEDS: Record<'start' | 'test' | 'ci', { packages: string[]; command?: string }[]> };

/** A PATH of everything this machine has but the commands the packages provide (so sh, node and apt-get stay). */
const bare = mkdtempSync(join(tmpdir(), 'niclab-bare-'));
chmodSync(bare, 0o755);
const provided = new Set(NEEDS.ci.flatMap((n) => (n.command ? [n.command] : [])));
for (const dir of ['/usr/local/bin', '/usr/bin', '/bin', '/usr/sbin', '/sbin']) {
  for (const name of readdirSync(dir)) {
    if (!provided.has(name) && !existsSync(join(bare, name))) symlinkSync(join(dir, name), join(bare, name));
  }
}
if (!existsSync(join(bare, 'node'))) symlinkSync(process.execPath, join(bare, 'node'));
after(() => rmSync(bare, { recursive: true, force: true }));

async function run(argv: string[], env: Record<string, string>, asNobody = false): Promise<{ code: number; stderr: string; stdout: string }> {
  const [file, args] = asNobody ? ['/usr/bin/setpriv', ['--reuid=65534', '--regid=65534', '--clear-groups', ...argv]] as const : [argv[0]!, argv.slice(1)] as const;
  try {
    const { stdout, stderr } = await exec(file, args, { cwd: ROOT, env: { HOME: bare, ...env } });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const e = error as { code: number; stdout: string; stderr: string };
    return { code: e.code, stdout: e.stdout, stderr: e.stderr };
  }
}

const unique = (set: keyof typeof NEEDS) => [...new Set(NEEDS[set].flatMap((n) => n.packages))];

test('this machine has every package of every set: the check passes at once and installs nothing', async () => {
  for (const set of ['start', 'test', 'ci']) {
    const started = performance.now();
    const r = await run([process.execPath, SCRIPT, set], { PATH: process.env.PATH ?? '' });
    assert.deepEqual([r.code, r.stderr], [0, ''], set);
    assert.ok(performance.now() - started < 5_000, `${set} took ${performance.now() - started} ms`);
  }
});

test('as root on Debian without the packages: it installs the set it needs with apt-get, and only those (a dry run)', { skip: NOT_ROOT }, async () => {
  const r = await run([process.execPath, SCRIPT, 'start'], { PATH: bare, NICLAB_PACKAGES_DRY_RUN: '1' });
  assert.equal(r.code, 0, r.stderr);
  assert.match(r.stderr, new RegExp(`would run: apt-get update -qq && apt-get install -y --no-install-recommends ${unique('start').join(' ')}$`, 'm'));
  assert.match(r.stderr, /redis-server: npm start runs a private redis-server when REDIS_URL is unset/);
  const ci = await run([process.execPath, SCRIPT, 'ci'], { PATH: bare, NICLAB_PACKAGES_DRY_RUN: '1' });
  assert.match(ci.stderr, new RegExp(`apt-get install -y --no-install-recommends ${unique('ci').join(' ')}$`, 'm'));
});

test('as another user, `npm start` stops at once with the command to run, and builds and starts nothing', { skip: NOT_ROOT }, async () => {
  const r = await run(['npm', 'start'], { PATH: bare }, true);
  assert.notEqual(r.code, 0);
  assert.match(r.stderr, new RegExp(`sudo apt-get update && sudo apt-get install -y --no-install-recommends ${unique('start').join(' ')}`));
  assert.doesNotMatch(`${r.stdout}${r.stderr}`, /tsc|started a private redis-server|listening/, 'nothing ran after the check');
  const t = await run(['npm', 'test'], { PATH: bare }, true);
  assert.notEqual(t.code, 0);
  assert.match(t.stderr, /needs system packages this machine lacks/);
  assert.match(t.stderr, /chromium: the \/ui tests drive it/);
});

test('one list: .ci/run and package.json call it and list nothing of their own; every package it names is one Debian has', async () => {
  const ci = readFileSync(join(ROOT, '.ci/run'), 'utf8');
  assert.match(ci, /^node deploy\/system-packages\.mjs ci$/m);
  assert.doesNotMatch(ci, /^\s*apt-get (update|install)/m);
  const scripts = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
  assert.match(scripts.start!, /^node deploy\/system-packages\.mjs start && /);
  assert.match(scripts.pretest!, /^node deploy\/system-packages\.mjs test && /);
  const { stdout } = await exec('apt-cache', ['show', '--no-all-versions', ...unique('ci')]);
  const known = new Set([...stdout.matchAll(/^Package: (\S+)$/gm)].map((m) => m[1]));
  assert.deepEqual(unique('ci').filter((p) => !known.has(p)), [], 'packages apt-cache does not know');
});
