import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { nextTbfBurst, planQdisc, qdiscArgs, qdiscErrors, qdiscSetup, tbfChangeArgs, type QdiscPlan, type QdiscTuning, type TcQdisc } from '@niclab/shared/domain/qdisc-rules';

/** What `tc -j qdisc show dev eth1 invisible` printed in the virtual lab (tbf at 100 Mbit/s, latency 50 ms). */
const LAB_TBF: TcQdisc[] = [
  { kind: 'tbf', handle: '80e5:', root: true, options: { rate: 12500000, burst: 50000, lat: 50000 } },
  { kind: 'bfifo', handle: '0:', parent: '80e5:1', options: { limit: 675000 } },
];

const plan = (current: TcQdisc[], wanted: QdiscTuning = { kind: 'pfifo', limit: 100 }): QdiscPlan => {
  const planned = planQdisc('eth1', wanted, current);
  assert.equal(typeof planned, 'object', String(planned));
  return planned as QdiscPlan;
};

describe('tuning.qdisc: what reaches tc', () => {
  test('each kind in tc\'s own words; fq_codel\'s seconds as whole microseconds', () => {
    assert.deepEqual(qdiscArgs({ kind: 'pfifo' }), ['pfifo']);
    assert.deepEqual(qdiscArgs({ kind: 'bfifo', limit: 150000 }), ['bfifo', 'limit', '150000']);
    assert.deepEqual(qdiscArgs({ kind: 'fq_codel', limit: 1000, target: 0.005, interval: 0.1, ecn: true }), ['fq_codel', 'limit', '1000', 'target', '5000us', 'interval', '100000us', 'ecn']);
    assert.deepEqual(qdiscArgs({ kind: 'fq_codel', ecn: false }), ['fq_codel', 'noecn']);
    assert.deepEqual(qdiscArgs({ kind: 'fq', limit: 10000 }), ['fq', 'limit', '10000']);
  });

  test('bounds by kind: packets for pfifo, fq_codel and fq, bytes for bfifo; codel settings on fq_codel only', () => {
    const fields = (q: Parameters<typeof qdiscErrors>[0]) => qdiscErrors(q, 'tuning.qdisc').map((e) => e.field);
    assert.deepEqual(fields({ kind: 'pfifo', limit: 1 }), []);
    assert.deepEqual(fields({ kind: 'pfifo', limit: 1_000_000 }), []);
    assert.deepEqual(fields({ kind: 'pfifo', limit: 1_000_001 }), ['tuning.qdisc.limit']);
    assert.deepEqual(fields({ kind: 'pfifo', limit: 0 }), ['tuning.qdisc.limit']);
    assert.deepEqual(fields({ kind: 'pfifo', limit: 1.5 }), ['tuning.qdisc.limit']);
    assert.deepEqual(fields({ kind: 'bfifo', limit: 1_000_000_000 }), []);
    assert.deepEqual(fields({ kind: 'bfifo', limit: 1499 }), ['tuning.qdisc.limit']);
    assert.deepEqual(fields({ kind: 'fq', limit: 2_000_000 }), ['tuning.qdisc.limit']);
    assert.deepEqual(fields({ kind: 'pfifo_fast', limit: 10 }), ['tuning.qdisc.limit']);
    assert.deepEqual(fields({ kind: 'pfifo', target: 0.005, ecn: true }), ['tuning.qdisc.target', 'tuning.qdisc.ecn']);
    assert.deepEqual(fields({ kind: 'fq_codel', target: 0.005, interval: 0.1, ecn: true }), []);
    assert.deepEqual(fields({ kind: 'fq_codel', interval: 11 }), ['tuning.qdisc.interval']);
    assert.deepEqual(fields({ kind: 'fq_codel', target: Number.NaN }), ['tuning.qdisc.target']);
    assert.deepEqual(fields({ kind: 'netem' as never }), ['tuning.qdisc.kind']);
  });
});

describe('tuning.qdisc: where it goes and how the setup comes back', () => {
  test('under a root tbf it is tbf\'s child; tbf\'s own default child comes back from tbf itself, as the kernel printed it', () => {
    const p = plan(LAB_TBF);
    assert.equal(p.parent, '80e5:1');
    assert.deepEqual(p.apply, ['qdisc', 'replace', 'dev', 'eth1', 'parent', '80e5:1', 'pfifo', 'limit', '100']);
    assert.deepEqual(p.restore, [{ tbfDefaultChild: { dev: 'eth1', handle: '80e5:', rateBitsPerSecond: 100_000_000, burstBytes: 50000, limitBytes: 675000, expect: qdiscSetup(LAB_TBF) } }]);
    const step = (p.restore[0] as { tbfDefaultChild: Parameters<typeof tbfChangeArgs>[0] }).tbfDefaultChild;
    assert.deepEqual(tbfChangeArgs(step, 50001), ['qdisc', 'change', 'dev', 'eth1', 'root', 'handle', '80e5:', 'tbf', 'rate', '100000000bit', 'burst', '50001b', 'limit', '675000']);
  });

  test('a child someone set under tbf is set again with its handle and limit', () => {
    const p = plan([LAB_TBF[0]!, { kind: 'pfifo', handle: '80e6:', parent: '80e5:1', options: { limit: 100 } }], { kind: 'bfifo', limit: 150000 });
    assert.deepEqual(p.restore, [{ tc: ['qdisc', 'replace', 'dev', 'eth1', 'parent', '80e5:1', 'handle', '80e6:', 'pfifo', 'limit', '100'] }]);
  });

  test('without a shaper it is the root; the kernel\'s default root (handle 0) comes back by deleting ours, a set one by setting it again', () => {
    const noqueue = plan([{ kind: 'noqueue', handle: '0:', root: true, options: {} }], { kind: 'pfifo', limit: 100 });
    assert.equal(noqueue.parent, 'root');
    assert.deepEqual(noqueue.apply, ['qdisc', 'replace', 'dev', 'eth1', 'root', 'pfifo', 'limit', '100']);
    assert.deepEqual(noqueue.restore, [{ tc: ['qdisc', 'del', 'dev', 'eth1', 'root'] }]);
    const mq = plan([{ kind: 'mq', handle: '0:', root: true }, { kind: 'pfifo_fast', handle: '0:', parent: ':1' }]);
    assert.deepEqual(mq.restore, [{ tc: ['qdisc', 'del', 'dev', 'eth1', 'root'] }]);
    const bfifo = plan([{ kind: 'bfifo', handle: '8001:', root: true, options: { limit: 30000 } }]);
    assert.deepEqual(bfifo.restore, [{ tc: ['qdisc', 'replace', 'dev', 'eth1', 'root', 'handle', '8001:', 'bfifo', 'limit', '30000'] }]);
  });

  test('a setup niclab could not put back exactly is refused before anything changes, saying why', () => {
    const refused = (current: TcQdisc[]) => planQdisc('eth1', { kind: 'pfifo' }, current);
    assert.match(String(refused([{ kind: 'htb', handle: '1:', root: true, options: { r2q: 10 } }])), /htb 1:.*could not put back/);
    assert.match(String(refused([{ ...LAB_TBF[0]!, options: { rate: 12500000, burst: 50000, lat: 50000, peakrate: 25000000, mtu: 1514 } }, LAB_TBF[1]!])), /options niclab cannot set again/);
    assert.match(String(refused([LAB_TBF[0]!, { kind: 'fq_codel', handle: '80e6:', parent: '80e5:1', options: { limit: 10240 } }])), /fq_codel child/);
    assert.match(String(refused([LAB_TBF[0]!])), /no child qdisc/);
    assert.match(String(refused([{ kind: 'mq', handle: '0:', root: true }, { kind: 'fq_codel', handle: '8002:', parent: ':1' }])), /fq_codel 8002: under its default root/);
    assert.match(String(refused([{ kind: 'pfifo', handle: '8001:', root: true, options: { limit: -1 } }])), /could not put back/);
    assert.match(String(refused([{ kind: 'pfifo', handle: '1 2:', root: true, options: { limit: 1 } }])), /could not put back/);
    assert.match(String(refused([])), /no root qdisc/);
  });

  test('tbf set again: its burst one byte over the printed one first, then searched for the one that reads back as before', () => {
    // Measured at 10 Gbit/s: printed 122,500; set at 122,501 it printed 121,250, at 123,751 it printed 123,750.
    const search = {};
    assert.equal(nextTbfBurst(122500, search), 122501);
    assert.equal(nextTbfBurst(122500, search, 122501, 121250), 123751);
    assert.equal(nextTbfBurst(122500, search, 123751, 123750), 123126);
    assert.equal(nextTbfBurst(122500, search, 123126, 122500), 123126, 'a try that read back right is kept');
    assert.equal(nextTbfBurst(122500, search, 123126, 123750), 122813);
    assert.equal(nextTbfBurst(50000, {}, 50001, 49999), 50002);
  });
});
