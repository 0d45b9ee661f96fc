import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ENGINES } from '@niclab/agent/engines/registry';
import { command } from '@niclab/shared/runtime/command';
import type { EngineParams } from '@niclab/shared/domain/task';
import { enginePair } from '../helpers/engines.js';

/**
 * The builtin TCP sender's TCP_INFO chronograph (busy, receiver-window limited) against the same
 * kernel's as `ss -ti` prints it, read by the test while the run lasts: the sender reads it at its
 * end, the test a little before, so the two agree on the shares, not to the millisecond.
 */
const params: EngineParams = { protocol: 'tcp', test: 'stream', duration: 2, bufferLength: 65536, socketBuffer: 8192, streams: 1, noDelay: false, interval: 0.5 };

/** busy and rwnd_limited (ms) of the sender's connection to `port`, as ss shows them; null before it is there. */
async function ssTimes(port: number): Promise<{ busyMs: number; rwndMs: number } | null> {
  const out = await command('ss', ['-Htin', 'state', 'established', `dport = :${port}`]);
  const busy = /\bbusy:(\d+)ms/.exec(out);
  if (!busy) return null;
  return { busyMs: Number(busy[1]), rwndMs: Number(/\brwnd_limited:(\d+)ms/.exec(out)?.[1] ?? 0) };
}

test("builtin TCP sender's TCP_INFO times: its busy and receive-window-limited shares are the ones ss -ti shows for its connection", async (ctx) => {
  let last: { busyMs: number; rwndMs: number } | null = null;
  let watching = true;
  const [sender, receiver] = await enginePair(ENGINES.builtin!, params, {
    beforeSend: async (port) => {
      void (async () => {
        while (watching) {
          last = (await ssTimes(port).catch(() => null)) ?? last;
          await new Promise((r) => setTimeout(r, 50));
        }
      })();
    },
  });
  watching = false;
  assert.equal(sender.error, null, JSON.stringify(sender.error));
  assert.equal(receiver.error, null, JSON.stringify(receiver.error));
  const times = sender.tcpTimes;
  assert.ok(times, 'the sender reports its TCP_INFO times (Linux 4.10+)');
  assert.ok(last, 'ss saw the connection');
  const seen = last as { busyMs: number; rwndMs: number };
  const ours = times.receiveWindowLimitedSeconds / times.busySeconds;
  const theirs = seen.rwndMs / seen.busyMs;
  ctx.diagnostic(`engine: busy ${times.busySeconds.toFixed(3)} s, rwnd-limited ${times.receiveWindowLimitedSeconds.toFixed(3)} s (${(ours * 100).toFixed(1)}%); ss last seen: busy ${seen.busyMs} ms, rwnd_limited ${seen.rwndMs} ms (${(theirs * 100).toFixed(1)}%)`);
  assert.equal(times.connections, 1);
  // The sender read its times after ss's last look, at most a sampling period and the run's tail later.
  assert.ok(times.busySeconds * 1000 >= seen.busyMs && times.busySeconds * 1000 <= seen.busyMs + 600, `busy ${times.busySeconds} s; ss last saw ${seen.busyMs} ms`);
  assert.ok(Math.abs(ours - theirs) <= 0.1, `receive-window-limited share ${ours.toFixed(3)}; ss's ${theirs.toFixed(3)}`);
});
