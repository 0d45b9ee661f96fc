import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { NOT_ROOT } from '../helpers/lab.js';
import { spawnNiclab, waitFor, type NiclabProcess, waitForApi } from '../helpers/processes.js';
import { freePort } from '../helpers/redis.js';

const README = fileURLToPath(new URL('../../README.md', import.meta.url));
const MAIN = fileURLToPath(new URL('../../services/cli/dist/main.js', import.meta.url));
const blocks = [...readFileSync(README, 'utf8').matchAll(/```sh tour\n([\s\S]*?)```/g)].map((m) => m[1]!);

/** The lab's name (NICLAB_LAB): the README's commands use the default, a test a name of its own, so it runs beside other labs. */
const LAB = `tour${randomBytes(2).toString('hex')}`;

/** What each block must print, in README order (beyond exiting 0). */
const EXPECT: RegExp[][] = [
  [new RegExp(`lab ${LAB} is up: 4 hosts`), /^A\s+online/m, /^D\s+online/m],
  [/^point bufferLength=10240 /m, /^point bufferLength=40960 /m, /^point socketBuffer=1048576 /m],
  [/^\s+1\s+B:eth1 -> D:eth1\s+local/m, /^\s+2\s+C:eth1 -> D:eth1\s+local/m, /^\s+1\s+C:eth1 -> D:eth1\s+local/m],
  [/streams=1\s+:.*better/, /streams=4\s+:.*better/],
  [/^point -/m, /"sent": \d+/, /"lost": \d+/],
  [/^3$/m, /^total Mbit\/s: mean/m, /^flow,direction,from,to,metric,/m, new RegExp(`lab ${LAB} is down`)],
];

describe('the README tour, run as written', { skip: NOT_ROOT }, () => {
  let niclab: NiclabProcess;
  let dir: string;
  let env: Record<string, string>;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'niclab-tour-'));
    const port = await freePort();
    env = { NICLAB_DATA_DIR: join(dir, 'data'), NICLAB_PORT: String(port), NICLAB_HEARTBEAT_SECONDS: '1', NICLAB_SETUP_SECONDS: '5', NICLAB_LOG_LEVEL: 'warn', NICLAB_API: `http://127.0.0.1:${port}`, NICLAB_LAB: LAB };
    // `npm start` in the other terminal: API, coordinator, agent "local", private Redis.
    niclab = spawnNiclab(['start'], env);
    await waitForApi(env.NICLAB_API!, 'niclab start');
    writeFileSync(join(dir, 'niclab'), `#!/bin/sh\nexec "${process.execPath}" "${MAIN}" "$@"\n`);
    chmodSync(join(dir, 'niclab'), 0o755);
  });

  after(async () => {
    await run('niclab lab down').catch(() => undefined);
    await niclab?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  function run(script: string): Promise<{ code: number; out: string }> {
    const port = env.NICLAB_PORT!;
    // Shorter runs than the README's, same commands: 1-second runs, 5 repetitions (with 3, one slow
    // run of the CPU-bound unshaped path left the A/B 'no significant change' once), this test's port.
    const fast = script.replace(/ -t \d+/g, ' -t 1').replace(/--repeat 10/g, '--repeat 5').replace(/localhost:8080/g, `localhost:${port}`);
    return new Promise((resolve) => {
      execFile('bash', ['--norc', '--noprofile', '-euo', 'pipefail', '-c', fast], { env: { ...env, PATH: `${dir}:${process.env.PATH}` }, timeout: 300_000, maxBuffer: 16 * 1024 * 1024 }, (error, stdout, stderr) => {
        resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, out: `${stdout}\n${stderr}` });
      });
    });
  }

  test('the README has the tour blocks this test expects', () => {
    assert.equal(blocks.length, EXPECT.length, 'a block was added or removed: update EXPECT');
  });

  blocks.forEach((block, i) => {
    test(`block ${i + 1}: ${block.split('\n')[0]}`, async (ctx) => {
      const { code, out } = await run(block);
      ctx.diagnostic(out.split('\n').slice(-15).join('\n'));
      assert.equal(code, 0, out);
      for (const pattern of EXPECT[i] ?? []) assert.match(out, pattern);
    });
  });
});
