import { bareIperf3Udp, flow, qdiscDrops, snmpCounter, startTestLab } from '../helpers/lab.js';
const t = await startTestLab(2, 'A=none,B=20mbit');
try {
  const host = (n: string) => t.lab.hosts.find((h) => h.name === n)!;
  const B = host('B');
  const port = `${t.lab.name}-B`.slice(0, 15);
  console.log('port guess', port);
  for (const pps of [2200, 2300]) {
    for (const tool of ['niclab', 'iperf3', 'niclab', 'iperf3']) {
      const rcv = await snmpCounter(B.namespace, 'Udp', 'RcvbufErrors');
      const q0 = await qdiscDrops(t.lab.switchNamespace, process.argv[2] ?? port).catch((e) => String(e).slice(0, 80));
      let r: any;
      if (tool === 'niclab') {
        const job = await t.client.succeed({ engine: 'builtin', protocol: 'udp', duration: 5, socketBuffer: 4194304, udp: { packetSize: 1000, rate: { packetsPerSecond: pps } }, flows: [flow('A', 'B')] }, 60_000);
        r = job.runs[0].flows[0].udp;
      } else r = await bareIperf3Udp(host('A'), B, 5, { packetSize: 1000, packetsPerSecond: pps, socketBuffer: 4194304 });
      const q1 = await qdiscDrops(t.lab.switchNamespace, process.argv[2] ?? port).catch(() => NaN);
      console.log(pps, tool, JSON.stringify({ sent: r.sent, lost: r.lost, ach: r.achievedPacketsPerSecond }), 'rcvbuf', (await snmpCounter(B.namespace, 'Udp', 'RcvbufErrors')) - rcv, 'qdisc', typeof q0 === 'number' ? q1 - q0 : q0);
    }
  }
} finally { await t.close(); }
