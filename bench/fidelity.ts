/**
 * Fidelity: does niclab add anything to what it measures? On veth pairs between namespaces,
 * unshaped (A -> B) and shaped at 1 Gbit/s (C -> D), alternating in one run: bare iperf3,
 * niclab's iperf3 engine and niclab's builtin TCP with the same options, PAIRS times each.
 * Figures are per-pair ratios against the bare iperf3 run next to them.
 */
import { bareIperf3, flow, mbit, median, ratioSummary, round, startLab, writeResult } from './lib.js';

const PAIRS = Number(process.env.BENCH_PAIRS ?? 5);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);

const lab = await startLab(4, 'A=none,B=none,C=1gbit,D=1gbit');
try {
  const [A, B, C, D] = lab.lab.hosts;
  const conditions = { unshaped: [A!, B!], shaped1g: [C!, D!] } as const;
  const out: Record<string, unknown> = { pairs: PAIRS, seconds: SECONDS };
  for (const [name, [from, to]] of Object.entries(conditions)) {
    const rows: { bare: number; iperf3: number; builtin: number }[] = [];
    for (let i = 0; i < PAIRS; i++) {
      const bare = (await bareIperf3(from, to, SECONDS)).server.end.sum_received.bits_per_second as number;
      const viaNiclab = async (engine: string) => (await lab.client.succeed({ engine, duration: SECONDS, flows: [flow(from.name, to.name)] }, 120_000)).runs[0].flows[0].bitsPerSecond as number;
      const iperf3 = await viaNiclab('iperf3');
      const builtin = await viaNiclab('builtin');
      rows.push({ bare, iperf3, builtin });
      console.log(`${name} pair ${i + 1}: bare iperf3 ${mbit(bare).toFixed(0)}, niclab iperf3 ${mbit(iperf3).toFixed(0)}, niclab builtin ${mbit(builtin).toFixed(0)} Mbit/s`);
    }
    const figures = {
      bareMbitPerSecond: round(median(rows.map((r) => mbit(r.bare))), 1),
      iperf3Engine: ratioSummary(rows.map((r) => r.iperf3 / r.bare)),
      builtin: ratioSummary(rows.map((r) => r.builtin / r.bare)),
      runsMbitPerSecond: rows.map((r) => ({ bare: round(mbit(r.bare), 1), iperf3: round(mbit(r.iperf3), 1), builtin: round(mbit(r.builtin), 1) })),
    };
    console.log(`${name}: iperf3 engine / bare median ${figures.iperf3Engine.median} (${figures.iperf3Engine.min}-${figures.iperf3Engine.max}); builtin / bare median ${figures.builtin.median} (${figures.builtin.min}-${figures.builtin.max})`);
    out[name] = figures;
  }
  console.log(`written ${await writeResult('fidelity', out)}`);
} finally {
  await lab.close();
}
