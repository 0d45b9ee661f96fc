/**
 * UDP pacing: builtin constant-rate UDP of 1500-byte datagrams on an unshaped veth pair at
 * 10k and 70k pps and at the highest rate this host sustains (achieved within 1% of the
 * target, found by stepping up), with bare iperf3 -u -b at the same bit rate beside each.
 */
import { bareIperf3, flow, round, startLab, writeResult } from './lib.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const SIZE = 1500;

const lab = await startLab(2, 'none');
try {
  const [A, B] = lab.lab.hosts;
  const builtin = async (pps: number) => {
    const f = (await lab.client.succeed({ engine: 'builtin', protocol: 'udp', duration: SECONDS, socketBuffer: 4194304, udp: { packetSize: SIZE, rate: { packetsPerSecond: pps } }, flows: [flow('A', 'B')] }, 120_000)).runs[0].flows[0];
    return { targetPps: pps, achievedPps: round(f.udp.achievedPacketsPerSecond, 1), achievedOverTarget: round(f.udp.achievedPacketsPerSecond / pps), lossRatio: round(f.udp.lossRatio, 6), senderCpuSeconds: f.sender.cpuSeconds };
  };
  const bare = async (pps: number) => {
    const { client, server } = await bareIperf3(A!, B!, SECONDS, ['-u', '-b', String(pps * SIZE * 8), '-l', String(SIZE), '-w', '4M']);
    const sent = client.end.sum.packets as number;
    const lost = server.end.sum.lost_packets as number;
    return { achievedPps: round(sent / client.end.sum.seconds, 1), achievedOverTarget: round(sent / client.end.sum.seconds / pps), lossRatio: round(lost / Math.max(1, sent), 6), senderCpuPercent: client.end.cpu_utilization_percent.host_total };
  };
  const point = async (pps: number) => {
    const row = { builtin: await builtin(pps), bareIperf3: await bare(pps) };
    console.log(`${pps} pps: builtin achieved ${row.builtin.achievedPps} (${row.builtin.achievedOverTarget}), loss ${row.builtin.lossRatio}; bare iperf3 ${row.bareIperf3.achievedPps} (${row.bareIperf3.achievedOverTarget}), loss ${row.bareIperf3.lossRatio}`);
    return row;
  };
  const fixed = { '10000': await point(10_000), '70000': await point(70_000) };
  // Step up 5k pps at a time from 20k until the builtin engine falls more than 1% short.
  let highest = null as null | { pps: number; row: Awaited<ReturnType<typeof point>> };
  for (let pps = 20_000; pps <= 100_000; pps += 5_000) {
    const row = await point(pps);
    if (row.builtin.achievedOverTarget < 0.99) break;
    highest = { pps, row };
  }
  console.log(`highest sustained (within 1%): ${highest?.pps ?? 'below 20000'} pps`);
  console.log(`written ${await writeResult('udp-pacing', { seconds: SECONDS, packetSize: SIZE, points: fixed, highestSustained: highest })}`);
} finally {
  await lab.close();
}
