import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { command } from '@niclab/shared/runtime/command';

/** PIDs whose command line is exactly `argv` (read from /proc, not by pattern-killing anything). */
function running(argv: string[]): number[] {
  const want = argv.join('\0') + '\0';
  return readdirSync('/proc').filter((d) => /^\d+$/.test(d)).filter((d) => {
    try {
      return readFileSync(`/proc/${d}/cmdline`, 'utf8') === want;
    } catch {
      return false;
    }
  }).map(Number);
}

test('a system command read beside a run is killed when the run is canceled, not left to its 15 s timeout', async () => {
  // A sleep no one else runs, so the process found is this test's.
  const argv = ['sleep', `${29 + Math.random()}`.slice(0, 8)];
  const controller = new AbortController();
  const ran = command(argv[0]!, argv.slice(1), controller.signal);
  // Its rejection is expected from the start: once the kill lands it may come before the checks below end.
  const rejected = assert.rejects(ran);
  const seen = await new Promise<number[]>((resolve) => {
    const look = () => {
      const pids = running(argv);
      if (pids.length) resolve(pids);
      else setTimeout(look, 10);
    };
    look();
  });
  assert.equal(seen.length, 1, 'the command started');
  controller.abort({ code: 'canceled', message: 'the run was canceled' });
  // The kill is sent at abort; the process is gone once its parent has reaped it: well before
  // the 15 s timeout would have ended it.
  for (let i = 0; i < 100 && running(argv).length; i++) await new Promise((r) => setTimeout(r, 20));
  assert.deepEqual(running(argv), [], 'the command does not outlive the canceled run');
  await rejected;
});

test('a command that ends by itself resolves with its output; one that fails rejects with its stderr', async () => {
  assert.equal(await command('printf', ['%s', 'ok'], new AbortController().signal), 'ok');
  await assert.rejects(command('ls', ['/nonexistent-niclab-path']), /nonexistent-niclab-path/);
});
