import assert from 'node:assert/strict';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import openapiTS, { astToString } from 'openapi-typescript';
import { handlers } from '@niclab/api/handlers/index';
import { AGENT_ID, INTERFACE_NAME } from '@niclab/shared/names';
import { HTTP_METHODS, loadOpenApi, OPENAPI_PATH, type OperationObject } from '@niclab/shared/openapi';

const root = fileURLToPath(new URL('../..', import.meta.url));

test('the committed types are what openapi-typescript generates from openapi.yaml (run npm run gen:api)', async () => {
  const generated = astToString(await openapiTS(new URL(`file://${OPENAPI_PATH}`)));
  const committed = readFileSync(join(root, 'services/shared/src/generated/openapi.ts'), 'utf8');
  // The CLI adds a banner; compare what follows it.
  const body = (text: string) => text.slice(text.indexOf('export interface paths'));
  assert.equal(body(committed).trim(), body(generated).trim());
});

test('every operation in openapi.yaml has a handler, and every handler an operation', () => {
  const { doc } = loadOpenApi();
  const operations = Object.values(doc.paths).flatMap((item) => HTTP_METHODS.map((m) => (item[m] as OperationObject | undefined)?.operationId).filter(Boolean));
  assert.deepEqual([...operations].sort(), Object.keys(handlers).sort());
});

test('openapi.yaml and the agent check names with the same patterns', () => {
  const schemas = loadOpenApi().doc.components.schemas as Record<string, { pattern: string }>;
  assert.equal(schemas.AgentId?.pattern, AGENT_ID.source);
  assert.equal(schemas.InterfaceName?.pattern, INTERFACE_NAME.source);
});

function sources(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (name === 'node_modules' || name === 'dist' || name === 'generated') return [];
    return statSync(path).isDirectory() ? sources(path) : path.endsWith('.ts') ? [path] : [];
  });
}

test('only shared/problem.ts writes problem bodies (one error shape)', () => {
  const offenders = sources(join(root, 'services'))
    .filter((path) => !path.endsWith('shared/src/problem.ts'))
    .filter((path) => /niclab\.dev\/problems|['"]application\/problem\+json['"]|title:\s*['"]/.test(readFileSync(path, 'utf8')));
  assert.deepEqual(offenders, []);
});

test('only shared/config.ts reads process.env (config is read once)', () => {
  const offenders = sources(join(root, 'services'))
    .filter((path) => !path.endsWith('shared/src/config.ts') && !path.endsWith('cli/src/main.ts'))
    .filter((path) => /process\.env/.test(readFileSync(path, 'utf8')));
  assert.deepEqual(offenders, []);
});

test('child processes are spawned with argument arrays, never a shell', () => {
  const offenders = sources(join(root, 'services')).filter((path) => {
    const text = readFileSync(path, 'utf8');
    const importsExec = /import\s*\{[^}]*\bexec(Sync)?\b[^}]*\}\s*from\s*['"](node:)?child_process['"]/.test(text);
    return importsExec || /shell:\s*true/.test(text);
  });
  assert.deepEqual(offenders, []);
});
