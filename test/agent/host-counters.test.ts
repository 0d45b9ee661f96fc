import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseSnmp, parseSnmp6, parseSoftirqs } from '@niclab/agent/host-counters';

test('Ip counters from /proc/net/snmp and /proc/net/snmp6: the fragments made and reassembled, under one set of names', () => {
  const snmp = 'Ip: Forwarding DefaultTTL InReceives ReasmReqds ReasmOKs ReasmFails FragOKs FragFails FragCreates\nIp: 2 64 5471 5471 1512 0 4005 0 12015\nUdp: InDatagrams\nUdp: 7\n';
  assert.deepEqual(parseSnmp(snmp, 'Ip', ['InReceives', 'ReasmOKs', 'FragOKs', 'FragCreates']), { InReceives: 5471, ReasmOKs: 1512, FragOKs: 4005, FragCreates: 12015 });
  const snmp6 = 'Ip6InReceives                   \t3\nIp6ReasmOKs                     \t2\nIp6FragCreates                  \t9\nIcmp6InMsgs                     \t4\nUdp6InDatagrams                 \t1\n';
  assert.deepEqual(parseSnmp6(snmp6, 'Ip6', ['InReceives', 'ReasmOKs', 'FragCreates', 'InMsgs']), { InReceives: 3, ReasmOKs: 2, FragCreates: 9 });
});

test('NET_RX and NET_TX per CPU from /proc/softirqs, by the CPU numbers of its header; none without the lines', () => {
  // As this kernel prints it, with the columns' CPU numbers read from the header rather than counted.
  const text = [
    '                    CPU0       CPU2       ',
    '          HI:          0          0',
    '       TIMER:       4229       4884',
    '      NET_TX:          5          0',
    '      NET_RX:       3788       4922',
    '         RCU:       9426      10946',
  ].join('\n');
  assert.deepEqual([...parseSoftirqs(text)!.entries()], [[0, { netRx: 3788, netTx: 5 }], [2, { netRx: 4922, netTx: 0 }]]);
  assert.equal(parseSoftirqs('                    CPU0\n       TIMER:       4229\n'), null);
  assert.equal(parseSoftirqs(''), null);
});

