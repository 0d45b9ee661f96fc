import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const REDOCLY = fileURLToPath(new URL('../../node_modules/@redocly/cli/bin/cli.js', import.meta.url));

interface LintProblem { ruleId: string; severity: string; message: string; location: { pointer?: string }[] }

test('openapi.yaml lints clean with Redocly\'s recommended rules: no error, no warning', async () => {
  const output = await new Promise<string>((resolve, reject) => {
    // Redocly exits 1 when it finds errors; its JSON report is on stdout either way.
    execFile(process.execPath, [REDOCLY, 'lint', 'openapi.yaml', '--format=json'], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' }, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (!stdout.trim()) reject(new Error(`redocly printed no report: ${error?.message ?? ''} ${stderr}`));
      else resolve(stdout);
    });
  });
  const report = JSON.parse(output.slice(output.indexOf('{'))) as { totals: { errors: number; warnings: number }; problems: LintProblem[] };
  const problems = report.problems.map((p) => `${p.severity} ${p.ruleId} at ${p.location[0]?.pointer ?? '?'}: ${p.message}`);
  assert.deepEqual(problems, []);
  assert.deepEqual(report.totals, { errors: 0, warnings: 0, ignored: 0 });
});
