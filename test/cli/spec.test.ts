import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseSweep } from '@niclab/cli/client/spec';

test('--sweep mtu=1500,4000,9000 is sweep.mtu; a value that is not a whole number is refused, naming the flag', () => {
  assert.deepEqual(parseSweep(['mtu=1500,4000,9000']), { mtu: [1500, 4000, 9000] });
  assert.deepEqual(parseSweep(['mtu=9000', 'w=64k']), { mtu: [9000], socketBuffer: [65536] });
  assert.throws(() => parseSweep(['mtu=9k']), /--sweep mtu: "9k" is not a whole number/);
});
