import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseSweep, parseTuning, specOf } from '@niclab/cli/client/spec';

test('--sweep mtu=1500,4000,9000 is sweep.mtu; a value that is not a whole number is refused, naming the flag', () => {
  assert.deepEqual(parseSweep(['mtu=1500,4000,9000']), { mtu: [1500, 4000, 9000] });
  assert.deepEqual(parseSweep(['mtu=9000', 'w=64k']), { mtu: [9000], socketBuffer: [65536] });
  assert.throws(() => parseSweep(['mtu=9k']), /--sweep mtu: "9k" is not a whole number/);
});

test("--tune-sender, --tune-receiver and --tune are tuning's blocks and its shorthand; --factorial the campaign's field; a bad pair names its flag", () => {
  const spec = specOf({
    from: ['A:eth1'], to: ['B:eth1'], repeat: '2', factorial: true,
    tune: ['net.core.rmem_max=4194304'],
    'tune-sender': ['net.ipv4.tcp_wmem=4096 16384 1048576,mtu=9000', 'gro=off'],
    'tune-receiver': ['net.ipv4.tcp_rmem=4096  131072 1048576,rx-ring=4096,qdisc=pfifo,qdisc.limit=1000'],
  });
  assert.deepEqual(spec.factorial, { of: 'ends' });
  assert.deepEqual(spec.tuning, {
    sysctl: { 'net.core.rmem_max': '4194304' },
    sender: { sysctl: { 'net.ipv4.tcp_wmem': '4096 16384 1048576' }, mtu: 9000, ethtool: { gro: 'off' } },
    receiver: { sysctl: { 'net.ipv4.tcp_rmem': '4096 131072 1048576' }, ethtool: { 'rx-ring': 4096 }, qdisc: { kind: 'pfifo', limit: 1000 } },
  });
  assert.equal(specOf({ from: ['A:eth1'], to: ['B:eth1'] }).tuning, undefined, 'no flag, no tuning');
  assert.throws(() => parseTuning(['mtu'], '--tune-sender'), /--tune-sender: "mtu" is not KEY=VALUE/);
  assert.throws(() => parseTuning(['mtu=9k'], '--tune-sender'), /--tune-sender mtu: "9k" is not a whole number/);
  assert.throws(() => parseTuning(['ip_forward=1'], '--tune-receiver'), /--tune-receiver: "ip_forward" is not a setting/);
  assert.throws(() => parseTuning(['qdisc.limit=10'], '--tune'), /--tune: qdisc.limit needs qdisc=KIND/);
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
