import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { newToken } from '@niclab/api/policy';
import { runNiclab, spawnNiclab, waitFor, type NiclabProcess } from '../helpers/processes.js';
import { freePort, startTestRedis, uniquePrefix, type TestRedis } from '../helpers/redis.js';

const dir = mkdtempSync(join(tmpdir(), 'niclab-tls-'));
const runner = newToken();
const cert = join(dir, 'cert.pem');
const key = join(dir, 'key.pem');
const otherKey = join(dir, 'other-key.pem');
let redis: TestRedis;
let env: Record<string, string>;
let port: number;
const processes: NiclabProcess[] = [];

/** A self-signed certificate for 127.0.0.1, as a lab would make one for its API host. */
function makeCertificate(): void {
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-keyout', key, '-out', cert, '-days', '2', '-subj', '/CN=niclab-test', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
  execFileSync('openssl', ['genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-out', otherKey], { stdio: 'ignore' });
}

/** GET over HTTPS (trusting `ca` when given) or plain HTTP; resolves with the status, rejects on a transport error. */
function get(scheme: 'http' | 'https', path: string, ca?: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const options = { host: '127.0.0.1', port, path, timeout: 5000, ...(ca ? { ca } : {}) };
    const req = (scheme === 'https' ? httpsRequest : httpRequest)(options, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on('error', reject);
    req.on('timeout', () => req.destroy(new Error('timed out')));
    req.end();
  });
}

function niclabCli(extra: Record<string, string>, ...args: string[]) {
  return runNiclab(args, { NICLAB_API: `https://127.0.0.1:${port}`, NICLAB_TOKEN: runner.token, ...extra });
}

before(async () => {
  makeCertificate();
  const policy = join(dir, 'policy.yaml');
  writeFileSync(policy, `tokens:\n  - { name: runner, sha256: "${runner.sha256}", scopes: [run] }\n`);
  redis = await startTestRedis();
  port = await freePort();
  env = { REDIS_URL: redis.url, NICLAB_PREFIX: uniquePrefix(), NICLAB_PORT: String(port), NICLAB_HEARTBEAT_SECONDS: '1', NICLAB_POLICY_FILE: policy };
  processes.push(spawnNiclab(['api'], { ...env, NICLAB_TLS_CERT_FILE: cert, NICLAB_TLS_KEY_FILE: key }), spawnNiclab(['agent', '--id', 'tls'], env));
  await waitFor('the API over HTTPS', async () => (await get('https', '/readyz', readFileSync(cert))) === 200, 20_000);
});
after(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  await redis?.stop();
});

test('with a certificate and key the API speaks HTTPS only: a client that trusts the certificate gets through, plain HTTP does not', async () => {
  assert.equal(await get('https', '/readyz', readFileSync(cert)), 200);
  assert.equal(await get('https', '/v1/jobs', readFileSync(cert)), 401, 'the policy still applies');
  await assert.rejects(get('https', '/readyz'), /self-signed|certificate/i, 'a client that does not trust it refuses');
  await assert.rejects(get('http', '/readyz'), 'no plain HTTP on the port');
  assert.match(processes[0]!.output(), /"url":"https:\/\/127\.0\.0\.1:\d+".*api listening/);
});

test('the CLI runs a job over HTTPS with the certificate trusted (NODE_EXTRA_CA_CERTS), and says why when it is not', async () => {
  await waitFor('agent tls', async () => (await niclabCli({ NODE_EXTRA_CA_CERTS: cert }, 'agents')).stdout.includes('tls'), 20_000);
  const run = await niclabCli({ NODE_EXTRA_CA_CERTS: cert }, 'run', '--from', 'tls:lo', '--to', 'tls:lo', '-t', '0.5', '--json', '--wait');
  assert.equal(run.code, 0, run.stderr);
  const job = JSON.parse(run.stdout);
  assert.equal(job.status, 'succeeded');
  assert.equal(job.owner, 'runner');
  const untrusted = await niclabCli({}, 'jobs');
  assert.notEqual(untrusted.code, 0);
  assert.match(untrusted.stderr, /the niclab API at https:\/\/127\.0\.0\.1:\d+ has a certificate this machine does not trust \(DEPTH_ZERO_SELF_SIGNED_CERT: .*NODE_EXTRA_CA_CERTS=FILE/);
});

test('a certificate without its key, a key that is not its, or an unreadable file stops the API at start, naming the variable', async () => {
  const base = { REDIS_URL: redis.url, NICLAB_PREFIX: uniquePrefix(), NICLAB_PORT: '0' };
  const cases: [Record<string, string>, RegExp][] = [
    [{ NICLAB_TLS_CERT_FILE: cert }, /NICLAB_TLS_KEY_FILE: is not set, but NICLAB_TLS_CERT_FILE is/],
    [{ NICLAB_TLS_KEY_FILE: key }, /NICLAB_TLS_CERT_FILE: is not set, but NICLAB_TLS_KEY_FILE is/],
    [{ NICLAB_TLS_CERT_FILE: cert, NICLAB_TLS_KEY_FILE: otherKey }, /NICLAB_TLS_KEY_FILE: .*not a usable certificate and key/],
    [{ NICLAB_TLS_CERT_FILE: join(dir, 'missing.pem'), NICLAB_TLS_KEY_FILE: key }, /NICLAB_TLS_CERT_FILE: cannot read .*missing\.pem/],
  ];
  for (const [tls, reason] of cases) {
    const api = spawnNiclab(['api'], { ...base, ...tls });
    assert.equal(await api.exited, 2, api.output());
    assert.match(api.output(), reason);
  }
});
