import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import { ESLint } from 'eslint';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

test('ESLint (eslint.config.js: at most 6 parameters, functions of at most 100 lines in services/ and bench/) finds nothing', async () => {
  const results = await new ESLint({ cwd: ROOT }).lintFiles(['services', 'test', 'bench']);
  const problems = results.flatMap((r) => r.messages.map((m) => `${r.filePath.slice(ROOT.length)}:${m.line}: ${m.message} (${m.ruleId})`));
  assert.ok(results.length > 250, `only ${results.length} files linted`);
  assert.deepEqual(problems, []);
});
