import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseSweep, specOf } from '@niclab/cli/client/spec';

test('--sweep mtu=1500,4000,9000 is sweep.mtu; a value that is not a whole number is refused, naming the flag', () => {
  assert.deepEqual(parseSweep(['mtu=1500,4000,9000']), { mtu: [1500, 4000, 9000] });
  assert.deepEqual(parseSweep(['mtu=9000', 'w=64k']), { mtu: [9000], socketBuffer: [65536] });
  assert.throws(() => parseSweep(['mtu=9k']), /--sweep mtu: "9k" is not a whole number/);
});

test('--from-file PATH and --to-file are the job\'s file (with --dsync, --drop-cache); each end\'s option without its end is refused, naming the flag', () => {
  const flows = { from: ['A:eth1'], to: ['B:eth1'] };
  assert.deepEqual(specOf({ ...flows, 'from-file': 'data/161MB.bin' }).file, { source: 'data/161MB.bin' });
  assert.deepEqual(specOf({ ...flows, 'to-file': true, dsync: true }).file, { sink: true, ioMode: 'dsync' });
  assert.deepEqual(specOf({ ...flows, 'from-file': 'a.bin', 'to-file': true, 'drop-cache': true }).file, { source: 'a.bin', sink: true, dropCache: true });
  assert.equal(specOf(flows).file, undefined);
  assert.deepEqual(parseSweep(['io=file']), { io: ['file'] });
  assert.throws(() => parseSweep(['io=disk']), /--sweep io: "disk" is not memory or file/);
  assert.throws(() => specOf({ ...flows, 'from-file': 'a.bin', dsync: true }), /--dsync is the sink's: it needs --to-file/);
  assert.throws(() => specOf({ ...flows, 'to-file': true, 'drop-cache': true }), /--drop-cache is the source's: it needs --from-file/);
  assert.throws(() => specOf({ ...flows, dsync: true }), /--dsync and --drop-cache need --from-file or --to-file/);
});
