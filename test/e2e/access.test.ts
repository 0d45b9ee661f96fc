import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { createHash } from 'node:crypto';
import { loadPolicy, newToken } from '@niclab/api/policy';
import { startNiclab, type TestNiclab } from '../helpers/niclab.js';
import { runNiclab, spawnNiclab } from '../helpers/processes.js';

const dir = mkdtempSync(join(tmpdir(), 'niclab-access-'));
const runner = newToken();
const reader = newToken();
let niclab: TestNiclab;

before(async () => {
  const policy = join(dir, 'policy.yaml');
  writeFileSync(policy, `tokens:\n  - { name: runner, sha256: "${runner.sha256}", scopes: [run] }\n  - { name: reader, sha256: "${reader.sha256}", scopes: [read] }\n`);
  niclab = await startNiclab(['acl'], { NICLAB_POLICY_FILE: policy, NICLAB_HOST: '0.0.0.0' }, reader.token);
});
after(async () => {
  await niclab?.stop();
});

function niclabCli(token: string | undefined, ...args: string[]) {
  return runNiclab(args, { NICLAB_API: niclab.client.base, ...(token ? { NICLAB_TOKEN: token } : {}) });
}

test('with a policy file the CLI needs a token with the scope: none fails, read cannot run, run can', async () => {
  const anonymous = await niclabCli(undefined, 'jobs');
  assert.notEqual(anonymous.code, 0);
  assert.match(anonymous.stderr, /401|token/i);
  const readOnly = await niclabCli(reader.token, 'run', '--from', 'acl:lo', '--to', 'acl:lo', '-t', '0.5');
  assert.notEqual(readOnly.code, 0);
  assert.match(readOnly.stderr, /"run" scope/);
  const run = await niclabCli(runner.token, 'run', '--from', 'acl:lo', '--to', 'acl:lo', '-t', '0.5', '--json', '--wait');
  assert.equal(run.code, 0, run.stderr);
  const job = JSON.parse(run.stdout);
  assert.equal(job.status, 'succeeded');
  assert.equal(job.owner, 'runner');
});

test('tokens served beyond loopback without TLS start, with a warning that they cross the network in clear text', () => {
  assert.match(niclab.api.output(), /"host":"0\.0\.0\.0".*tokens cross the network in clear text: set NICLAB_TLS_CERT_FILE and NICLAB_TLS_KEY_FILE/);
});

test('an invalid policy file, or none beyond loopback, stops the API at start with the reason', async () => {
  const bad = join(dir, 'bad.yaml');
  writeFileSync(bad, 'tokens: [{ name: x, sha256: nothex, scopes: [read] }]\n');
  const env = { REDIS_URL: niclab.env.REDIS_URL!, NICLAB_PREFIX: niclab.env.NICLAB_PREFIX!, NICLAB_PORT: '0' };
  const invalid = spawnNiclab(['api'], { ...env, NICLAB_POLICY_FILE: bad });
  assert.equal(await invalid.exited, 2);
  assert.match(invalid.output(), /NICLAB_POLICY_FILE: .*bad\.yaml: policy\.tokens\[0\]\.sha256/);
  const open = spawnNiclab(['api'], { ...env, NICLAB_HOST: '0.0.0.0' });
  assert.equal(await open.exited, 2);
  assert.match(open.output(), /NICLAB_AUTH=none/);
});

test('niclab token prints a token and the policy line for it, which loads and matches the token', async () => {
  const { code, stdout } = await niclabCli(undefined, 'token', 'nightly-ci', '--scope', 'read');
  assert.equal(code, 0);
  const token = /^token: (nlt_[A-Za-z0-9_-]{43})$/m.exec(stdout)![1]!;
  const line = /^ {2}- \{ name: nightly-ci, sha256: "([0-9a-f]{64})", scopes: \[read\] \}$/m.exec(stdout);
  assert.ok(line, stdout);
  assert.equal(line[1], createHash('sha256').update(token).digest('hex'));
  const file = join(dir, 'pasted.yaml');
  writeFileSync(file, `tokens:\n${line[0]}\n`);
  assert.deepEqual(loadPolicy(file).tokens.map((t) => [t.name, t.scope]), [['nightly-ci', 'read']]);
  const bad = await niclabCli(undefined, 'token', 'x', '--scope', 'root');
  assert.equal(bad.code, 2);
});
