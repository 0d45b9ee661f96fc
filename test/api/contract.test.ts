import assert from 'node:assert/strict';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import openapiTS, { astToString } from 'openapi-typescript';
import { handlers } from '@niclab/api/handlers/index';
import { AGENT_ID, INTERFACE_NAME } from '@niclab/shared/domain/names';
import { HTTP_METHODS, loadOpenApi, OPENAPI_PATH, parsedContract, type OperationObject } from '@niclab/shared/runtime/openapi';
import { parse } from 'yaml';

const root = fileURLToPath(new URL('../..', import.meta.url));

test('the committed types are what openapi-typescript generates from openapi.yaml (run npm run gen:api)', async () => {
  const generated = astToString(await openapiTS(new URL(`file://${OPENAPI_PATH}`)));
  const committed = readFileSync(join(root, 'services/shared/src/generated/openapi.ts'), 'utf8');
  // The CLI adds a banner; compare what follows it.
  const body = (text: string) => text.slice(text.indexOf('export interface paths'));
  assert.equal(body(committed).trim(), body(generated).trim());
});

test("the contract's JSON copy (a process's start reads it, not the YAML) is the YAML as parsed; a torn copy or nowhere to keep one parses the YAML", () => {
  const { text } = loadOpenApi();
  const yaml = parse(text);
  const dir = mkdtempSync(join(tmpdir(), 'niclab-contract-'));
  try {
    assert.deepEqual(parsedContract(text, dir), yaml);
    const [copy] = readdirSync(dir);
    assert.match(copy!, /^openapi-[0-9a-f]{16}\.json$/);
    assert.deepEqual(JSON.parse(readFileSync(join(dir, copy!), 'utf8')), yaml, 'the copy written');
    assert.deepEqual(parsedContract(text, dir), yaml, 'read from the copy');
    writeFileSync(join(dir, copy!), '{"openapi": "3.1');
    assert.deepEqual(parsedContract(text, dir), yaml, 'a torn copy');
    assert.deepEqual(JSON.parse(readFileSync(join(dir, copy!), 'utf8')), yaml, 'and the copy written again');
    const other = text.replace('niclab', 'niclab2');
    assert.deepEqual(parsedContract(other, dir), parse(other), 'another text, another copy');
    assert.equal(readdirSync(dir).length, 2);
    assert.deepEqual(parsedContract(text, '/dev/null/nowhere'), yaml, 'nowhere to write');
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
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

test('only shared/runtime/problem.ts writes problem bodies (one error shape)', () => {
  const offenders = sources(join(root, 'services'))
    .filter((path) => !path.endsWith('shared/src/runtime/problem.ts'))
    .filter((path) => /niclab\.dev\/problems|['"]application\/problem\+json['"]|title:\s*['"]/.test(readFileSync(path, 'utf8')));
  assert.deepEqual(offenders, []);
});

test('only shared/runtime/config.ts reads process.env (config is read once)', () => {
  const offenders = sources(join(root, 'services'))
    // @niclab/client is a library for users' scripts: it takes NICLAB_API and NICLAB_TOKEN as defaults, as the CLI does.
    .filter((path) => !path.endsWith('shared/src/runtime/config.ts') && !path.endsWith('cli/src/main.ts') && !path.endsWith('client/src/index.ts'))
    .filter((path) => /process\.env/.test(readFileSync(path, 'utf8')));
  assert.deepEqual(offenders, []);
});

const CHILD_PROCESS = String.raw`['"\`](?:node:)?child_process['"\`]`;
/** A shell by name or path (sh, bash, dash, zsh, ksh, /bin/sh, /usr/bin/bash) as a string literal. */
const SHELL = String.raw`['"\`](?:/usr)?(?:/bin/)?(?:ba|da|z|k)?sh['"\`]`;

/** Why `text` may run a command line through a shell; empty when it only spawns argument arrays. */
function shellUses(text: string): string[] {
  const found: string[] = [];
  const namesExec = (clause: string) => /\bexec(?:Sync)?\b/.test(clause);
  const loaded = String.raw`(?:require|(?:await\s+)?import)\s*\(\s*${CHILD_PROCESS}\s*\)`;
  // The names the module object goes by: import * as cp, import cp, const cp = require(...).
  const modules: (string | undefined)[] = [];
  for (const [, clause] of text.matchAll(new RegExp(String.raw`import\s+([^;]*?)\s*from\s*${CHILD_PROCESS}`, 'g'))) {
    if (namesExec(/\{[^}]*\}/.exec(clause!)?.[0] ?? '')) found.push('imports exec');
    modules.push(/\*\s*as\s+([\w$]+)/.exec(clause!)?.[1], /^([\w$]+)\s*(?:,|$)/.exec(clause!)?.[1]);
  }
  for (const [, binding] of text.matchAll(new RegExp(String.raw`(?:const|let|var)\s+(\{[^}]*\}|[\w$]+)\s*=\s*${loaded}`, 'g'))) {
    if (binding!.startsWith('{')) {
      if (namesExec(binding!)) found.push('destructures exec');
    } else modules.push(binding);
  }
  for (const name of modules.filter((m): m is string => !!m)) {
    const member = String.raw`(?<![\w$.])${name.replace(/\$/g, '\\$')}\s*(?:\.\s*exec(?:Sync)?\b|\[\s*['"\`]exec(?:Sync)?['"\`]\s*\])`;
    if (new RegExp(member).test(text)) found.push(`${name}.exec`);
  }
  if (new RegExp(String.raw`${loaded}\s*\)?\s*\.\s*exec(?:Sync)?\b`).test(text)) found.push('require(child_process).exec');
  if (/\bshell\s*:\s*(?:true|['"`])/.test(text)) found.push('shell option');
  // A shell as the program: spawn('sh', ...), execFile('/bin/sh', ...), command('bash', ...).
  if (new RegExp(String.raw`\b(?:spawn|spawnSync|execFile|execFileSync|fork|command)\s*\(\s*${SHELL}`).test(text)) found.push('a shell as the program');
  // A shell handed a command line, wherever it sits in the arguments: [..., 'sh', '-c', line].
  if (new RegExp(String.raw`${SHELL}\s*,\s*\[?\s*['"\`]-\w*c['"\`]`).test(text)) found.push('sh -c');
  return found;
}

test('child processes are spawned with argument arrays, never a shell', () => {
  const offenders = sources(join(root, 'services')).flatMap((path) => {
    const uses = shellUses(readFileSync(path, 'utf8'));
    return uses.length > 0 ? [`${path}: ${uses.join(', ')}`] : [];
  });
  assert.deepEqual(offenders, []);
});

test('the never-a-shell guard sees every way in to a shell, and not spawn with an argument array', () => {
  const shells = [
    "import { exec } from 'node:child_process';",
    "import { execSync as run } from 'child_process';",
    "import * as cp from 'node:child_process';\ncp.exec(`ip link show ${name}`);",
    "import * as cp from 'node:child_process';\nconst out = cp.execSync(line);",
    "import cp from 'child_process';\ncp.exec(line, done);",
    "import childProcess, { spawn } from 'node:child_process';\nchildProcess.exec(line);",
    "const cp = require('child_process');\ncp.exec(line);",
    "const { execSync } = require('node:child_process');",
    "require('child_process').exec(line);",
    "const cp = await import('node:child_process');\ncp['exec'](line);",
    "(await import('node:child_process')).execSync(line);",
    "spawn('ethtool', ['-S', name], { shell: true });",
    "spawn('ethtool', ['-S', name], { shell: '/bin/bash' });",
    "spawn('sh', ['-c', line]);",
    "spawn('bash', [script]);",
    "execFile('/bin/sh', ['-c', line], done);",
    "cp.spawnSync('/usr/bin/bash', ['-lc', line]);",
    "command('ip', ['netns', 'exec', ns, 'sh', '-c', line]);",
  ];
  for (const text of shells) assert.notDeepEqual(shellUses(text), [], `not caught: ${text}`);
  const arrays = [
    "import { execFile, spawn } from 'node:child_process';\nspawn('ethtool', ['-S', name]);\nexecFile('ip', ['-j', 'link'], done);",
    "import * as cp from 'node:child_process';\ncp.execFile('tc', ['-s', '-j', 'qdisc', 'show', 'dev', name]);",
    "const child = fork(script, [], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] });",
    "spawn('ip', ['netns', 'exec', ns, process.execPath, cli, 'agent']);",
  ];
  for (const text of arrays) assert.deepEqual(shellUses(text), [], text);
});
