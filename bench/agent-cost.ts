/**
 * What niclab's own agent costs during a run: each lab agent's process CPU (/proc/PID/stat
 * utime + stime, its own threads, not its children) over a 10 s run, beside the engine's
 * CPU (the result's cpuSeconds) and the agent's CPU over as long idle (heartbeats only). Each
 * case BENCH_REPEAT times (3), in rotation; a case's figure is the median.
 * The agent reads its host's counters around the run and samples /proc/stat at 1 Hz meanwhile.
 */
import { flow, round, startLab, writeResult } from './lib.js';
import { processCpuSeconds } from '../test/helpers/udp-loopback.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);

/** A live process's user + system CPU seconds (the test helpers' reader of /proc/<pid>/stat). */
const cpuSeconds = (pid: number) => processCpuSeconds(pid) ?? 0;

// The agents heartbeat at the product's default (NICLAB_HEARTBEAT_SECONDS, 5 s), not at the
// tests' 1 s, five times as many heartbeats as a deployed agent makes. BENCH_HEARTBEAT_SECONDS
// changes it.
const HEARTBEAT_SECONDS = Number(process.env.BENCH_HEARTBEAT_SECONDS ?? 5);
const lab = await startLab(2, 'none', undefined, undefined, { heartbeatSeconds: HEARTBEAT_SECONDS });
try {
  const agents = lab.lab.hosts.map((h) => ({ name: h.name, pid: h.agentPid! }));
  const measure = async (what: () => Promise<unknown>) => {
    const before = agents.map((a) => cpuSeconds(a.pid));
    const t0 = performance.now();
    const result = await what();
    const wall = (performance.now() - t0) / 1000;
    return { result, wall, shares: agents.map((a, i) => round((cpuSeconds(a.pid) - before[i]!) / wall, 4)) };
  };
  const idle = await measure(() => new Promise((r) => setTimeout(r, SECONDS * 1000)));
  console.log(`idle ${round(idle.wall, 1)} s: agent CPU ${idle.shares.map((s) => `${(s * 100).toFixed(2)}%`).join(', ')} of a core (A, B)`);
  // Each case REPEAT times, the cases in rotation (a drift of the machine falls on all alike); the
  // median of each case's agent shares is its figure, with every repetition kept beside it.
  const REPEAT = Number(process.env.BENCH_REPEAT ?? 3);
  const cases = [['iperf3', 'tcp', undefined], ['builtin', 'tcp', undefined], ['builtin', 'udp', { packetSize: 1000, rate: { packetsPerSecond: 20000 } }]] as const;
  const rows: { engine: string; protocol: string; wallSeconds: number; agentCpuShare: { sender: number; receiver: number }; engineCpuShare: { sender: number; receiver: number }; bottleneck: string | null }[][] = cases.map(() => []);
  for (let repetition = 1; repetition <= REPEAT; repetition++) {
    for (const [i, [engine, protocol, udp]] of cases.entries()) {
      const spec = { engine, protocol, duration: SECONDS, flows: [flow('A', 'B')], ...(udp ? { udp } : {}) };
      const m = await measure(() => lab.client.succeed(spec, (SECONDS + 60) * 1000));
      const f = (m.result as { runs: { flows: { sender: { cpuSeconds: number; realSeconds: number }; receiver: { cpuSeconds: number; realSeconds: number }; bottleneck: { reason: string } | null }[] }[] }).runs[0]!.flows[0]!;
      const row = {
        engine, protocol, wallSeconds: round(m.wall, 2),
        agentCpuShare: { sender: m.shares[0]!, receiver: m.shares[1]! },
        engineCpuShare: { sender: round(f.sender.cpuSeconds / f.sender.realSeconds, 4), receiver: round(f.receiver.cpuSeconds / f.receiver.realSeconds, 4) },
        bottleneck: f.bottleneck?.reason ?? null,
      };
      rows[i]!.push(row);
      console.log(`${repetition}/${REPEAT} ${engine} ${protocol} ${SECONDS} s (job wall ${row.wallSeconds} s): agent CPU A ${(m.shares[0]! * 100).toFixed(2)}%, B ${(m.shares[1]! * 100).toFixed(2)}% of a core; engine A ${(row.engineCpuShare.sender * 100).toFixed(1)}%, B ${(row.engineCpuShare.receiver * 100).toFixed(1)}%; ${row.bottleneck}`);
    }
  }
  const median = (values: number[]) => {
    const sorted = [...values].sort((a, b) => a - b);
    return sorted.length % 2 ? sorted[(sorted.length - 1) / 2]! : (sorted[sorted.length / 2 - 1]! + sorted[sorted.length / 2]!) / 2;
  };
  const runs = rows.map((repeats) => ({
    engine: repeats[0]!.engine, protocol: repeats[0]!.protocol,
    agentCpuShare: { sender: round(median(repeats.map((r) => r.agentCpuShare.sender)), 4), receiver: round(median(repeats.map((r) => r.agentCpuShare.receiver)), 4) },
    repeats,
  }));
  for (const run of runs) console.log(`median of ${REPEAT}: ${run.engine} ${run.protocol}: agent CPU A ${(run.agentCpuShare.sender * 100).toFixed(2)}%, B ${(run.agentCpuShare.receiver * 100).toFixed(2)}% of a core`);
  console.log(`written ${await writeResult('agent-cost', { seconds: SECONDS, heartbeatSeconds: HEARTBEAT_SECONDS, repeat: REPEAT, idleAgentCpuShare: idle.shares, runs })}`);
} finally {
  await lab.close();
}
