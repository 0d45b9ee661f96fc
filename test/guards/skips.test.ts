import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const TEST = fileURLToPath(new URL('..', import.meta.url));
const SKIP_HELPER = fileURLToPath(new URL('../helpers/skip.ts', import.meta.url));

function testFiles(dir = TEST): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return testFiles(path);
    return /\.(test|container)\.ts$/.test(name) ? [path] : [];
  });
}

/** A suite file whose prerequisite check runs with the given CI variable: its exit code and output. */
function suiteWithMissingPrerequisite(ci: string | undefined): Promise<{ code: number; output: string }> {
  const script = `import { test } from 'node:test'; import { skipUnlessProvided } from ${JSON.stringify(SKIP_HELPER)};
test('needs a thing', { skip: skipUnlessProvided('needs a thing this machine lacks') }, () => {});`;
  const env: Record<string, string> = { PATH: process.env.PATH ?? '' };
  if (ci !== undefined) env.CI = ci;
  const dir = mkdtempSync(join(tmpdir(), 'niclab-skip-'));
  writeFileSync(join(dir, 'suite.test.ts'), script);
  return new Promise((resolve) => {
    execFile(process.execPath, ['--import', 'tsx', '--test', join(dir, 'suite.test.ts')], { env, cwd: TEST }, (error, stdout, stderr) => {
      rmSync(dir, { recursive: true, force: true });
      resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, output: stdout + stderr });
    });
  });
}

test('a suite whose prerequisite is missing skips on a developer machine and fails under CI, naming the prerequisite', async () => {
  const dev = await suiteWithMissingPrerequisite(undefined);
  assert.equal(dev.code, 0, dev.output);
  assert.match(dev.output, /# SKIP needs a thing this machine lacks/);
  const ci = await suiteWithMissingPrerequisite('true');
  assert.notEqual(ci.code, 0, ci.output);
  assert.match(ci.output, /CI is set, so this suite may not skip, but it needs a thing this machine lacks/);
});

test('every skip in test/ goes through skipUnlessProvided, and every todo names the issue that ends it', () => {
  const offenders: string[] = [];
  for (const file of testFiles()) {
    const text = readFileSync(file, 'utf8');
    const name = relative(TEST, file);
    if (name === 'guards/skips.test.ts') continue;
    // node:test's own ways to skip at run time bypass the CI rule.
    if (/\b(test|it|describe|suite|t|ctx)\.skip\s*\(/.test(text)) offenders.push(`${name}: .skip() call`);
    for (const [, value] of text.matchAll(/\bskip:\s*([^,}\s)]+)/g)) {
      if (value !== 'NOT_ROOT' && !/^skipUnlessProvided\(/.test(value!)) offenders.push(`${name}: skip: ${value}`);
    }
    if (/\{\s*skip\s*\}/.test(text) && !/const skip = skipUnlessProvided\(/.test(text)) offenders.push(`${name}: { skip } not from skipUnlessProvided`);
    for (const [, value] of text.matchAll(/\btodo:\s*(['"`][^'"`]*['"`])/g)) {
      if (!/issue \d+/.test(value!)) offenders.push(`${name}: todo ${value} names no issue`);
    }
  }
  assert.deepEqual(offenders, []);
});
