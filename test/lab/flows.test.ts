import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { command } from '@niclab/shared/command';
import { bareIperf3, flow, mbit, NOT_ROOT, snmpCounter, startTestLab, type TestLab } from '../helpers/lab.js';
import { waitFor } from '../helpers/processes.js';

// 4 hosts, every link 100 Mbit/s in both directions. Bare iperf3 on such a link gets ~95 Mbit/s.
describe('multi-host runs on a 4-host lab at 100 Mbit/s', { skip: NOT_ROOT }, () => {
  let t: TestLab;
  before(async () => {
    t = await startTestLab(4, '100mbit');
    // One short run first, as a lab engineer warms a path: the very first connections on a
    // fresh lab overshoot the 100 Mbit/s shaper in slow start (CI saw 11-52 retransmits and
    // 82-89 Mbit/s on them, then 0 and 95 once the kernel had cached the path's ssthresh).
    await t.client.succeed({ engine: 'builtin', duration: 1, interval: 1, flows: [flow('A', 'D')] }, 60_000);
  });
  after(async () => {
    await t?.close();
  });

  const run = (spec: Record<string, unknown>) => t.client.succeed({ engine: 'builtin', ...spec }, 120_000);

  /**
   * Throughput targets are judged on the median of 3 repetitions per flow: the shaped links of
   * this shared machine vary by about 5% from run to run (bare iperf3 too), so one slow run
   * says nothing about niclab.
   */
  async function medians(spec: Record<string, unknown>) {
    const job = await run({ ...spec, repeat: 3 });
    const perFlow = job.runs[0].flows.map((_: unknown, i: number) => {
      const values = job.runs.map((r: { flows: { bitsPerSecond: number }[] }) => mbit(r.flows[i]!.bitsPerSecond)).sort((a: number, b: number) => a - b);
      return values[1] as number;
    });
    return { job, rates: perFlow as number[], all: job.runs.map((r: { flows: { bitsPerSecond: number }[] }) => r.flows.map((f) => mbit(f.bitsPerSecond).toFixed(1)).join('/')).join(' ') };
  }

  /**
   * Two specs measured side by side, alternating A B A B A B, so that the machine's drift
   * over a minute (about 5% here) falls on both alike; medians per flow of each.
   */
  async function alternate(a: Record<string, unknown>, b: Record<string, unknown>, pairs = 3) {
    const runs: { a: number[][]; b: number[][] } = { a: [], b: [] };
    const jobs: { a: any[]; b: any[] } = { a: [], b: [] };
    for (let i = 0; i < pairs; i++) {
      for (const [key, spec] of [['a', a], ['b', b]] as const) {
        const job = await run(spec);
        jobs[key].push(job);
        runs[key].push(job.runs[0].flows.map((f: { bitsPerSecond: number }) => mbit(f.bitsPerSecond)));
      }
    }
    const middle = (values: number[]) => values.sort((x, y) => x - y)[Math.floor(values.length / 2)]!;
    const median = (rows: number[][]) => rows[0]!.map((_, i) => middle(rows.map((r) => r[i]!)));
    const show = (rows: number[][]) => rows.map((r) => r.map((v) => v.toFixed(1)).join('/')).join(' ');
    // Per pair, a over b for the first flow: each ratio compares two runs a few seconds apart.
    const ratio = middle(runs.a.map((r, i) => r[0]! / runs.b[i]![0]!));
    return { a: median(runs.a), b: median(runs.b), ratio, all: `${show(runs.a)} | ${show(runs.b)}`, jobs };
  }

  test('A -> D alone: at least 90 Mbit/s (or 95% of bare iperf3 right after, on a loaded machine), bytes agree, both named interfaces carried them, retransmits as the kernel counts them', async (ctx) => {
    const retransSegs = () => snmpCounter(t.lab.hosts[0]!.namespace, 'Tcp', 'RetransSegs');
    const before = await retransSegs();
    const { job, rates, all } = await medians({ duration: 4, flows: [flow('A', 'D')] });
    const kernel = (await retransSegs()) - before;
    const [f] = job.runs[0].flows;
    const reported = job.runs.map((r: { flows: { retransmits: number }[] }) => r.flows[0]!.retransmits);
    ctx.diagnostic(`A->D alone: median ${rates[0]!.toFixed(1)} Mbit/s (runs ${all}); retransmits ${reported.join('+')}, namespace A's RetransSegs +${kernel}`);
    // A's namespace carried nothing else: its TCP RetransSegs grew by exactly what the builtin sender read from TCP_INFO.
    assert.equal(reported.reduce((a: number, b: number) => a + b, 0), kernel);
    // The 90 Mbit/s is what this link gives on a quiet machine (bare iperf3 ~95). When
    // the shared machine is loaded, bare iperf3 falls as well: niclab is then judged against it,
    // measured right after (not between: it would add to A's RetransSegs).
    if (rates[0]! < 90) {
      const [A, , , D] = t.lab.hosts;
      const bare: number[] = [];
      for (let i = 0; i < 3; i++) bare.push(mbit((await bareIperf3(A!, D!, 4)).server.end.sum_received.bits_per_second as number));
      const bareMedian = bare.sort((x, y) => x - y)[1]!;
      ctx.diagnostic(`below 90: bare iperf3 A->D right after, median ${bareMedian.toFixed(1)} Mbit/s (${bare.map((v) => v.toFixed(1)).join(' ')})`);
      assert.ok(rates[0]! >= 0.95 * bareMedian, `median ${rates[0]} Mbit/s (runs ${all}); bare iperf3 ${bareMedian}`);
    }
    assert.equal(f.receiver.bytes, f.sender.bytes);
    assert.equal(f.pathVerified, true);
    assert.equal(f.nic.from.agent, 'A');
    assert.equal(f.nic.to.agent, 'D');
    assert.ok(f.nic.from.txBytes >= f.sender.bytes, 'A:eth1 sent the bytes');
    assert.ok(f.nic.to.rxBytes >= f.receiver.bytes, 'D:eth1 received the bytes');
    // Headers and ACKs only: the counters exceed the payload by a few percent, not by another flow.
    assert.ok(f.nic.from.txBytes < f.sender.bytes * 1.1);
    assert.equal(f.diagnostics.sender.address, '198.18.0.1');
    assert.equal(f.diagnostics.receiver.address, '198.18.0.4');
  });

  // The per-flow bands (40-55 and 27-37 Mbit/s) are fair shares of a link that
  // delivers ~95 Mbit/s alone; they are judged as the same fractions of A -> D measured
  // alternately in the same test, so a loaded machine slows both sides alike.
  const REFERENCE = 95;
  for (const [senders, low, high] of [[['A', 'B'], 40, 55], [['A', 'B', 'C'], 27, 37]] as const) {
    test(`${senders.join(',')} -> D: each flow ${low}-${high} of ${REFERENCE} Mbit/s alone, the sum within 5% of A -> D alone (measured alternately)`, async (ctx) => {
      const fanIn = { duration: 6, flows: senders.map((s) => flow(s, 'D')) };
      const { a: [alone], b: rates, all, jobs } = await alternate({ duration: 6, flows: [flow('A', 'D')] }, fanIn);
      ctx.diagnostic(`${senders.join(',')}->D: medians ${rates.map((r) => r.toFixed(1)).join(', ')} Mbit/s; A->D alone ${alone!.toFixed(1)} (A->D | fan-in: ${all})`);
      for (const rate of rates) {
        const share = rate / alone!;
        assert.ok(share >= low / REFERENCE && share <= high / REFERENCE, `shares ${rates.map((r) => (r / alone!).toFixed(3)).join(', ')} of ${alone}; allowed ${(low / REFERENCE).toFixed(3)}-${(high / REFERENCE).toFixed(3)} (${all})`);
      }
      const sum = rates.reduce((x, y) => x + y, 0);
      assert.ok(Math.abs(sum - alone!) / alone! <= 0.05, `sum ${sum} vs alone ${alone} (${all})`);
      for (const job of jobs.b) for (const f of job.runs[0].flows) assert.equal(f.receiver.bytes, f.sender.bytes);
      // One receiver host served every sender at once: a receiver process and port of its own each.
      const ports = new Set(jobs.b[0].runs[0].flows.map((f: { diagnostics: { receiver: { port: number } } }) => f.diagnostics.receiver.port));
      assert.equal(ports.size, senders.length);
    });
  }

  test('A -> B together with C -> D (disjoint links): each at least 90 Mbit/s', async (ctx) => {
    const { rates, all } = await medians({ duration: 4, flows: [flow('A', 'B'), flow('C', 'D')] });
    ctx.diagnostic(`A->B with C->D: medians ${rates.map((r) => r.toFixed(1)).join(', ')} Mbit/s (runs ${all})`);
    for (const rate of rates) assert.ok(rate >= 90, `medians ${rates.join(', ')} Mbit/s (runs ${all})`);
  });

  test('leases: two jobs on D submitted together never overlap; a job on A -> B runs beside them', async () => {
    const spec = (from: string, to: string) => ({ engine: 'builtin', duration: 2, flows: [flow(from, to)] });
    const [first, second, third] = await Promise.all([t.client.submit(spec('C', 'D')), t.client.submit(spec('C', 'D')), t.client.submit(spec('A', 'B'))]);
    const waiting = await waitFor('one of the D jobs to wait for a lease', async () => {
      for (const id of [first.body.id, second.body.id]) {
        const { body } = await t.client.job(id);
        if (body.status === 'queued' && body.waitingFor?.length) return body;
      }
      return null;
    }, 5000, 25);
    assert.ok(['C:eth1', 'D:eth1'].includes(waiting.waitingFor[0]), JSON.stringify(waiting.waitingFor));
    const runs = [];
    for (const { body } of [first, second, third]) {
      const { job } = await t.client.finish(body.id, 30_000);
      assert.equal(job.status, 'succeeded');
      runs.push({ start: Date.parse(job.runs[0].startedAt), end: Date.parse(job.runs[0].finishedAt) });
    }
    const [a, b, c] = runs as { start: number; end: number }[];
    const overlap = (x: { start: number; end: number }, y: { start: number; end: number }) => x.start < y.end && y.start < x.end;
    assert.ok(!overlap(a!, b!), `D runs overlapped: ${JSON.stringify([a, b])}`);
    assert.ok(overlap(c!, a!) || overlap(c!, b!), `A -> B did not run in parallel: ${JSON.stringify(runs)}`);
  });

  test('direction reverse: D sends to A over the same named interfaces', async (ctx) => {
    const { job, rates, all } = await medians({ duration: 4, direction: 'reverse', flows: [flow('A', 'D')] });
    const [f] = job.runs[0].flows;
    ctx.diagnostic(`reverse A<-D: median ${rates[0]!.toFixed(1)} Mbit/s (runs ${all})`);
    assert.equal(f.direction, 'reverse');
    assert.equal(f.diagnostics.sender.agent, 'D');
    assert.equal(f.diagnostics.receiver.agent, 'A');
    // The issue sets no figure for reverse; A -> D's 90 less a margin for this shared machine.
    assert.ok(rates[0]! >= 85, `median ${rates[0]} Mbit/s (runs ${all})`);
    assert.equal(f.receiver.bytes, f.sender.bytes);
    assert.ok(f.nic.to.txBytes >= f.sender.bytes && f.nic.from.rxBytes >= f.receiver.bytes);
    assert.equal(f.pathVerified, true);
  });

  test('direction bidir: both directions of A <-> D at once, each measured', async (ctx) => {
    const { job, rates, all } = await medians({ duration: 4, direction: 'bidir', flows: [flow('A', 'D')] });
    const flows = job.runs[0].flows;
    ctx.diagnostic(`bidir A<->D: medians forward ${rates[0]!.toFixed(1)}, reverse ${rates[1]!.toFixed(1)} Mbit/s (runs ${all})`);
    assert.deepEqual(flows.map((f: { direction: string }) => f.direction), ['forward', 'reverse']);
    assert.ok(flows.every((f: { flowIndex: number }) => f.flowIndex === 0));
    // Each direction has its own 100 Mbit/s; only the other direction's ACKs share it. The
    // floor leaves room for four engine processes sharing this machine's two cores.
    for (const rate of rates) assert.ok(rate >= 70, `medians ${rates.join(', ')} Mbit/s (runs ${all})`);
    const [forward, reverse] = flows;
    const took = Date.parse(job.runs[0].finishedAt) - Date.parse(job.runs[0].startedAt);
    assert.ok(took < 2 * 4000, `both directions ran at once (the run took ${took} ms for 4 s legs)`);
    assert.equal(forward.diagnostics.sender.agent, 'A');
    assert.equal(reverse.diagnostics.sender.agent, 'D');
  });

  test('builtin TCP and iperf3 TCP agree within 3% on a 100 Mbit link (5 alternating pairs); both measure CPU at both ends', async (ctx) => {
    const spec = (engine: string) => ({ engine, duration: 4, flows: [flow('A', 'D')] });
    const { a: [builtin], b: [iperf3], ratio, all, jobs } = await alternate(spec('builtin'), spec('iperf3'), 5);
    ctx.diagnostic(`A->D builtin/iperf3 median pair ratio ${ratio.toFixed(3)}; medians builtin ${builtin!.toFixed(1)}, iperf3 ${iperf3!.toFixed(1)} Mbit/s (builtin | iperf3: ${all})`);
    assert.ok(Math.abs(ratio - 1) <= 0.03, `median builtin/iperf3 ratio ${ratio} (${all})`);
    for (const job of [...jobs.a, ...jobs.b]) {
      const [f] = job.runs[0].flows;
      assert.ok(f.sender.cpuSeconds > 0 && f.receiver.cpuSeconds > 0, `${job.spec.engine}: CPU at both ends`);
    }
  });

  test('UDP offered above the link: every datagram niclab calls lost is one the kernel dropped, and sent = received + lost', async (ctx) => {
    // A sends unshaped for this test, so the 100 Mbit/s bottleneck is D's receive side (the switch port).
    const nsA = t.lab.hosts[0]!.namespace;
    const nsD = t.lab.hosts[3]!.namespace;
    const sw = t.lab.switchNamespace;
    const reshape = (rate: string) => Promise.all([
      command('tc', ['-n', nsA, 'qdisc', 'replace', 'dev', 'eth1', 'root', 'tbf', 'rate', rate, 'burst', '500000b', 'latency', '50ms']),
      command('tc', ['-n', sw, 'qdisc', 'replace', 'dev', 'pA', 'root', 'tbf', 'rate', rate, 'burst', '500000b', 'latency', '50ms']),
    ]);
    // Where a datagram from A to D can be dropped: the shapers on its path, and D's socket.
    const drops = async () => {
      const qdisc = async (ns: string, dev: string) => (JSON.parse(await command('tc', ['-n', ns, '-s', '-j', 'qdisc', 'show', 'dev', dev])) as { drops: number }[])[0]!.drops;
      const snmp = await command('ip', ['netns', 'exec', nsD, 'cat', '/proc/net/snmp']);
      const udp = snmp.split('\n').filter((line) => line.startsWith('Udp:'));
      const names = udp[0]!.split(/\s+/);
      const values = udp[1]!.split(/\s+/);
      const socket = Number(values[names.indexOf('RcvbufErrors')]);
      return (await qdisc(nsA, 'eth1')) + (await qdisc(sw, 'pA')) + (await qdisc(sw, 'pD')) + socket;
    };
    await reshape('1gbit');
    try {
      const offered = 150e6;
      const before = await drops();
      const job = await run({ engine: 'iperf3', protocol: 'udp', duration: 4, udp: { packetSize: 1400, rate: { bitsPerSecond: offered } }, flows: [flow('A', 'D')] });
      const kernel = (await drops()) - before;
      const { udp } = job.runs[0].flows[0];
      // tbf meters whole frames; `offered` is payload: per 1400-byte datagram the link also
      // carries 42 bytes of headers, so 100 Mbit/s delivers 97.1 Mbit/s of payload at best.
      const expected = 1 - (100e6 * (1400 / 1442)) / offered;
      ctx.diagnostic(`UDP 150 Mbit/s into 100 Mbit/s: lossRatio ${udp.lossRatio.toFixed(3)} (nominal link: ${expected.toFixed(3)}), sent ${udp.sent}, received ${udp.received}, lost ${udp.lost}, kernel drops ${kernel}`);
      assert.equal(udp.sent, udp.received + udp.lost);
      assert.ok(udp.lossRatio > 0.2, `the shaper must drop about a third: ${udp.lossRatio}`);
      // iperf3's control connection and ARP share the path; they are a handful of packets.
      assert.ok(Math.abs(udp.lost - kernel) <= Math.max(20, udp.sent * 0.002), `niclab lost ${udp.lost}, the kernel dropped ${kernel}`);
    } finally {
      await reshape('100mbit');
    }
  });

  test('an interface that is down is refused at submission, naming the field', async () => {
    const nsB = t.lab.hosts[1]!.namespace;
    await command('ip', ['-n', nsB, 'link', 'set', 'eth1', 'down']);
    try {
      await waitFor('agent B to report eth1 down', async () => {
        const { body } = await t.client.call('getAgent', 'GET', '/v1/agents/B');
        return body.interfaces.find((i: { name: string }) => i.name === 'eth1')?.operstate === 'down';
      });
      const res = await t.client.submit({ engine: 'builtin', duration: 1, flows: [flow('A', 'B')] });
      assert.equal(res.status, 422);
      assert.equal(res.body.errors[0].field, 'body.flows[0].to.interface');
      assert.match(res.body.errors[0].message, /eth1.*B.*down/);
    } finally {
      await command('ip', ['-n', nsB, 'link', 'set', 'eth1', 'up']);
    }
  });

  test('a flow whose named source interface does not carry its traffic has pathVerified false', async () => {
    // A gets eth2 (one end of a veth pair that stays inside A) with its own address; traffic
    // from that address to D still leaves through eth1 (routing goes by destination), so eth2
    // never carries it.
    const nsA = t.lab.hosts[0]!.namespace;
    const nsD = t.lab.hosts[3]!.namespace;
    await command('ip', ['-n', nsA, 'link', 'add', 'eth2', 'type', 'veth', 'peer', 'name', 'eth2p']);
    await command('ip', ['-n', nsA, 'link', 'set', 'eth2p', 'up']);
    await command('ip', ['-n', nsA, 'addr', 'add', '198.19.255.1/32', 'dev', 'eth2']);
    await command('ip', ['-n', nsA, 'link', 'set', 'eth2', 'up']);
    await command('ip', ['-n', nsD, 'route', 'add', '198.19.255.1/32', 'via', '198.18.0.1']);
    await waitFor('agent A to report eth2 with its address', async () => {
      const { body } = await t.client.call('getAgent', 'GET', '/v1/agents/A');
      return body.interfaces.some((i: { name: string; addresses: { address: string }[] }) => i.name === 'eth2' && i.addresses.some((a) => a.address === '198.19.255.1'));
    });
    const job = await run({ duration: 2, flows: [{ from: { agent: 'A', interface: 'eth2' }, to: { agent: 'D', interface: 'eth1' } }] });
    const [f] = job.runs[0].flows;
    assert.ok(f.receiver.bytes > 0, 'the traffic did arrive');
    assert.equal(f.diagnostics.sender.address, '198.19.255.1');
    assert.ok(f.nic.from.txBytes < f.sender.bytes / 100, `eth2 sent ${f.nic.from.txBytes} bytes`);
    assert.equal(f.pathVerified, false);
  });
});
