/**
 * `npm run test:container`: builds the Dockerfile for real with podman and runs the image as
 * an API and as an agent on the host's network against a private Redis, then submits a job.
 * Needs root and podman (.ci/run prepares both; ../shared/container/prepare-base-images.sh
 * provides the node:20-bookworm-slim base where no registry is reachable).
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { execFile, execFileSync } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { ApiClient } from '../helpers/api-client.js';
import { waitFor } from '../helpers/processes.js';
import { freePort, startTestRedis, uniquePrefix, type TestRedis } from '../helpers/redis.js';
import { needsCommand, skipUnlessProvided } from '../helpers/skip.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const skip = skipUnlessProvided(process.getuid?.() !== 0 ? 'needs root: rootful podman with host networking (CI runs as root)' : needsCommand('podman', 'not installed: .ci/run installs it'));

function podman(args: string[], timeoutMs = 60_000, idle = false): Promise<string> {
  const [file, argv] = idle ? ['chrt', ['--idle', '0', 'podman', ...args]] : ['podman', args];
  return new Promise((resolve, reject) => {
    execFile(file, argv, { cwd: ROOT, timeout: timeoutMs, maxBuffer: 64 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`podman ${args.join(' ')}: ${stderr || error.message}`));
      else resolve(stdout.trim());
    });
  });
}

describe('the niclab image, built and run with podman', { skip }, () => {
  const tag = `localhost/niclab:test-${randomBytes(4).toString('hex')}`;
  const names = { api: `niclab-test-api-${randomBytes(3).toString('hex')}`, agent: `niclab-test-agent-${randomBytes(3).toString('hex')}` };
  let redis: TestRedis;
  let client: ApiClient;

  before(async () => {
    // --format docker: the OCI format has no HEALTHCHECK. (--jobs 2, the two stages at once, was
    // tried: a cold build took 140 s and 205 CPU-s against 119 s and 152 CPU-s one stage at a time.)
    // The build runs at SCHED_IDLE (`chrt --idle 0`, its processes with it): it takes only the CPU
    // no other test wants. The file is in the serial tier all the same (test/tiers.ts): its job's
    // counters failed on a busy machine.
    await podman(['build', '--format', 'docker', '--pull=never', '--network', 'host', '-t', tag, '.'], 900_000, true);
    redis = await startTestRedis();
    const port = await freePort();
    const env = ['-e', `REDIS_URL=${redis.tcpUrl}`, '-e', `NICLAB_PREFIX=${uniquePrefix()}`, '-e', 'NICLAB_HEARTBEAT_SECONDS=1', '-e', 'NICLAB_SETUP_SECONDS=5'];
    await podman(['run', '-d', '--name', names.api, '--network', 'host', ...env, '-e', `NICLAB_PORT=${port}`, '-e', 'NICLAB_HOST=127.0.0.1', tag, 'api']);
    // The agent: root in the container with NET_ADMIN and NET_RAW, nothing more; not privileged.
    await podman(['run', '-d', '--name', names.agent, '--network', 'host', '--user', 'root', '--cap-drop', 'ALL', '--cap-add', 'NET_ADMIN', '--cap-add', 'NET_RAW', '--health-cmd', 'none', ...env, tag, 'agent', '--id', 'ctr']);
    client = new ApiClient(`http://127.0.0.1:${port}`);
    await waitFor('the API container', async () => (await fetch(`${client.base}/readyz`).catch(() => null))?.ok ?? false, 60_000);
    await waitFor('the agent container online', async () => (await client.call('getAgent', 'GET', '/v1/agents/ctr')).body.online === true, 60_000);
  });

  after(async () => {
    for (const name of Object.values(names)) await podman(['rm', '-f', '-t', '5', name]).catch(() => undefined);
    await podman(['rmi', '-f', tag]).catch(() => undefined);
    await redis?.stop();
  });

  test('a loopback job through the containers succeeds, with iperf3 too', async () => {
    for (const engine of ['builtin', 'iperf3']) {
      const job = await client.succeed({ engine, duration: 1, flows: [{ from: { agent: 'ctr', interface: 'lo' }, to: { agent: 'ctr', interface: 'lo' } }] }, 60_000);
      const [f] = job.runs[0].flows;
      assert.ok(f.bitsPerSecond > 0, `${engine}: ${f.bitsPerSecond}`);
      assert.equal(f.pathVerified, true, `${engine}: sender ${f.sender?.bytes} B; the named interfaces counted ${JSON.stringify(f.nic)}`);
    }
  });

  test('the image serves the web page: /ui, its stylesheet and its modules', async () => {
    for (const [path, type] of [['/ui', 'text/html'], ['/ui/assets/style.css', 'text/css'], ['/ui/js/main.js', 'text/javascript'], ['/ui/js/pages/job.js', 'text/javascript']]) {
      const res = await fetch(`${client.base}${path}`);
      assert.equal(res.status, 200, path);
      assert.match(res.headers.get('content-type') ?? '', new RegExp(`^${type}`), path);
    }
  });

  test('the API runs as a non-root user, the agent as root with two capabilities; the healthcheck passes', async () => {
    assert.equal(await podman(['exec', names.api, 'id', '-u']), '1000');
    assert.equal(await podman(['exec', names.agent, 'id', '-u']), '0');
    const caps = await podman(['inspect', names.agent, '--format', '{{.EffectiveCaps}} {{.HostConfig.Privileged}}']);
    assert.match(caps, /^\[CAP_NET_ADMIN CAP_NET_RAW\] false$/);
    await podman(['healthcheck', 'run', names.api]);
    const labels = JSON.parse(await podman(['image', 'inspect', tag, '--format', '{{json .Labels}}']));
    assert.equal(labels['org.opencontainers.image.title'], 'niclab');
    // Production dependencies only: no TypeScript compiler, no test libraries in the image.
    await assert.rejects(podman(['run', '--rm', '--entrypoint', 'ls', tag, '/opt/niclab/node_modules/typescript']));
    await assert.rejects(podman(['run', '--rm', '--entrypoint', 'ls', tag, '/opt/niclab/node_modules/supertest']));
    // setpriv: the agent starts iperf3 under it, so no iperf3 outlives a killed agent.
    assert.match(await podman(['run', '--rm', '--entrypoint', 'setpriv', tag, '--help']), /--pdeathsig/);
  });
});
