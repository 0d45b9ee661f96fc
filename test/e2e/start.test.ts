import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { ApiClient } from '../helpers/api-client.js';
import { childPids, isAlive, spawnNiclab, waitFor, waitForApi } from '../helpers/processes.js';
import { freePort } from '../helpers/redis.js';

test('niclab start runs API, agent "local" and a private Redis, and Ctrl-C stops all of them in order', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'niclab-start-'));
  const port = await freePort();
  const niclab = spawnNiclab(['start'], { NICLAB_PORT: String(port), NICLAB_DATA_DIR: dir }, { group: true });
  try {
    const client = new ApiClient(`http://127.0.0.1:${port}`);
    await waitForApi(client.base);
    const agents = await waitFor('agent local', async () => {
      const { body } = await client.call('listAgents', 'GET', '/v1/agents');
      return body.items.some((a: { id: string; online: boolean }) => a.id === 'local' && a.online) ? body : null;
    });
    assert.ok(agents.items.find((a: { id: string }) => a.id === 'local').interfaces.some((i: { name: string }) => i.name === 'lo'));
    const redisPids = childPids(niclab.pid);
    assert.equal(redisPids.length, 1, 'one child: the private redis-server');

    // A terminal's Ctrl-C: SIGINT to every process of the foreground group.
    process.kill(-niclab.pid, 'SIGINT');
    assert.equal(await niclab.exited, 0, niclab.output());
    await waitFor('the private redis-server to exit', () => redisPids.every((pid) => !isAlive(pid)), 5000);
    assert.match(niclab.output(), /started a private redis-server/);
    assert.doesNotMatch(niclab.output(), /shutdown step failed/, 'every part stopped in order');
    // Nothing lost Redis while still stopping (Redis must not get the terminal's SIGINT too).
    assert.doesNotMatch(niclab.output(), /"level":50/, 'no errors while shutting down');
    assert.match(niclab.output(), /"msg":"stopped"/);
  } finally {
    await niclab.stop('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});

// A Ctrl-C while the parts are still starting (here: as soon as the API answers, while the agent
// starts) stops what started, the late ones too, before Redis. CI once saw the agent start after
// Redis had stopped, and fail to reach it until the shutdown timed out.
test('a Ctrl-C during start-up waits for the parts still starting, then stops every one before Redis', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'niclab-start-'));
  const port = await freePort();
  const niclab = spawnNiclab(['start'], { NICLAB_PORT: String(port), NICLAB_DATA_DIR: dir }, { group: true });
  try {
    await waitFor('api listening', () => /"msg":"api listening"/.test(niclab.output()), 20_000, 5);
    const redisPids = childPids(niclab.pid);
    process.kill(-niclab.pid, 'SIGINT');
    assert.equal(await niclab.exited, 0, niclab.output());
    await waitFor('the private redis-server to exit', () => redisPids.every((pid) => !isAlive(pid)), 5000);
    const out = niclab.output();
    assert.ok(out.indexOf('"msg":"shutting down"') < out.indexOf('"msg":"agent started"') || !out.includes('"msg":"agent started"'), 'the signal came while the agent was starting');
    assert.doesNotMatch(out, /shutdown step failed/, 'every part stopped in order');
    assert.doesNotMatch(out, /"level":50/, 'no errors while shutting down');
    assert.match(out, /"msg":"stopped"/);
  } finally {
    await niclab.stop('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});
