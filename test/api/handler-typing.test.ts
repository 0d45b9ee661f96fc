import assert from 'node:assert/strict';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = fileURLToPath(new URL('../..', import.meta.url));
const FIXTURE = fileURLToPath(new URL('./handler-typing.fixture.ts', import.meta.url));

// npm test runs through tsx, which strips types without checking them; this compiles the
// handler typing for real, so a change that loosens it fails here too, not only in typecheck.
test('handlers are typed by their operation: a wrong status, body, input or registration does not compile', () => {
  const config = ts.getParsedCommandLineOfConfigFile(`${root}/test/tsconfig.json`, {}, { ...ts.sys, onUnRecoverableConfigFileDiagnostic: (d) => assert.fail(ts.flattenDiagnosticMessageText(d.messageText, '\n')) });
  assert.ok(config);
  // Without the project references, @niclab/* resolve to their sources (niclab-source), so no build is needed.
  const program = ts.createProgram({ rootNames: [FIXTURE], options: { ...config.options, noEmit: true } });
  const diagnostics = ts.getPreEmitDiagnostics(program).map((d) => {
    const where = d.file && d.start !== undefined ? `${d.file.fileName.replace(root, '')}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}: ` : '';
    return where + ts.flattenDiagnosticMessageText(d.messageText, '\n').split('\n')[0];
  });
  assert.deepEqual(diagnostics, []);
});
