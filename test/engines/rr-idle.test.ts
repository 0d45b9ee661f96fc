import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ENGINES } from '@niclab/agent/engines/registry';
import { enginePair, measuredRr } from '../helpers/engines.js';

/**
 * The idle baseline belongs to the run's clock, not to the rr end's: the load starts
 * `idleSeconds` after the run's common start (startAt), so an rr end that got going late (a
 * busy host: in the lab under load 13 one started over a second late and counted 7 ms loaded
 * round trips as idle) has a shorter idle window and ends with the load.
 */
test('an rr end that starts at least 0.5 s after the run\'s start keeps the run\'s idle window and end', async () => {
  const [sender, receiver] = await enginePair(ENGINES.builtin!, { protocol: 'tcp', test: 'rr', duration: 3, idleSeconds: 2, bufferLength: 1, streams: 1, noDelay: true, interval: 3, rr: { requestSize: 1, responseSize: 1 } }, { startInMs: -500 });
  assert.equal(sender.error, null, JSON.stringify(sender.error));
  assert.equal(receiver.error, null, JSON.stringify(receiver.error));
  const idle = measuredRr(sender)!.idle!;
  // Late by 0.5 s and the child's own start-up: the window is the run's 2 s less that, and the end comes with the run's.
  assert.ok(idle.seconds > 0 && idle.seconds < 1.5, `idle window ${idle.seconds} s (the run's 2 s less what this end missed)`);
  assert.ok(sender.figures!.realSeconds < 2.5, `the end ran ${sender.figures!.realSeconds} s: past the run's end`);
  assert.ok(idle.transactions > 0 && measuredRr(sender)!.transactions > 10, `idle ${idle.transactions}, loaded ${measuredRr(sender)!.transactions} transactions`);
});
