/**
 * UDP engine: is the builtin engine ever the bottleneck? On loopback, in a network namespace
 * of its own (so /proc/net/snmp's UdpRcvbufErrors count this benchmark's drops alone), the
 * builtin engine and bare `iperf3 -u` alternate at 10k, 50k and 70k pps: loss, receive-buffer
 * drops, each sender's process CPU (/proc/PID/stat) and the received rate in every 100 ms.
 * Then both step up from 50k pps until neither is loss-free (loss <= 0.1%, achieved within 1%).
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { command } from '@niclab/shared/runtime/command';
import { bareIperf3Udp, builtinUdp, rcvbufErrors, type UdpLoad, type UdpRun } from '../test/helpers/udp-loopback.js';
import { median, round, writeResult } from './lib.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 3);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const SIZES = (process.env.BENCH_SIZES ?? '1200,1472').split(',').map(Number);
const RATES = (process.env.BENCH_RATES ?? '10000,50000,70000').split(',').map(Number);
/** 4 MiB asked of both tools (iperf3 -w); the kernel caps it at net.core.rmem_max. */
const BUFFER = Number(process.env.BENCH_BUFFER ?? 4194304);
const LOSS_FREE = 0.001;
/** BENCH_STEP=0 leaves out the step search for the highest loss-free rate. */
const STEP = Number(process.env.BENCH_STEP ?? 10_000);

async function inOwnNamespace(): Promise<void> {
  // Re-run this file under `unshare --net`: a fresh namespace whose loopback only we use.
  const child = spawn('unshare', ['--net', '--', process.execPath, ...process.execArgv, fileURLToPath(import.meta.url)], { stdio: 'inherit', env: { ...process.env, NICLAB_BENCH_NETNS: '1' } });
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  if (code !== 0) throw new Error(`udp-engine exited with ${code}`);
}

interface Measured extends UdpRun {
  rcvbufErrors: number;
  /** The largest |received rate / target - 1| over the full 100 ms intervals. */
  worstIntervalError: number;
  intervalsWithin1Percent: number;
}

async function measure(tool: 'builtin' | 'iperf3', load: UdpLoad): Promise<Measured> {
  const before = rcvbufErrors();
  const run = tool === 'builtin' ? await builtinUdp(load) : await bareIperf3Udp(load);
  const errors = run.intervalRates.map((rate) => Math.abs(rate / load.packetsPerSecond - 1));
  return {
    ...run, rcvbufErrors: rcvbufErrors() - before,
    worstIntervalError: round(Math.max(0, ...errors)), intervalsWithin1Percent: round(errors.filter((e) => e <= 0.01).length / Math.max(1, errors.length), 3),
  };
}

const line = (r: Measured) =>
  `${r.tool.padEnd(7)} sent ${r.sent} lost ${r.sent - r.received} (${(r.lossRatio * 100).toFixed(3)}%) rcvbufErrors +${r.rcvbufErrors} sender CPU ${r.senderCpuSeconds.toFixed(2)} s (self-reported ${r.senderSelfCpuSeconds.toFixed(2)}) receiver CPU ${r.receiverCpuSeconds.toFixed(2)} s achieved ${r.achievedPacketsPerSecond.toFixed(0)} pps, 100 ms intervals within 1%: ${(r.intervalsWithin1Percent * 100).toFixed(0)}% (worst ${(r.worstIntervalError * 100).toFixed(2)}%) rcvbuf ${r.receiveBufferBytes}`;

const summary = (runs: Measured[]) => ({
  lossPercent: runs.map((r) => round(r.lossRatio * 100, 3)),
  rcvbufErrors: runs.map((r) => r.rcvbufErrors),
  senderCpuSeconds: runs.map((r) => round(r.senderCpuSeconds, 2)),
  senderSelfReportedCpuSeconds: runs.map((r) => round(r.senderSelfCpuSeconds, 2)),
  receiverCpuSeconds: runs.map((r) => round(r.receiverCpuSeconds, 2)),
  achievedPacketsPerSecond: runs.map((r) => round(r.achievedPacketsPerSecond, 0)),
  worstIntervalErrorPercent: runs.map((r) => round(r.worstIntervalError * 100, 2)),
  intervalsWithin1Percent: runs.map((r) => r.intervalsWithin1Percent),
  receiveBufferBytes: runs[0]?.receiveBufferBytes ?? null,
});

async function main(): Promise<void> {
  await command('ip', ['link', 'set', 'lo', 'up']);
  const points: Record<string, unknown>[] = [];
  for (const packetSize of SIZES) {
    for (const packetsPerSecond of RATES) {
      const load = { packetsPerSecond, packetSize, seconds: SECONDS, socketBuffer: BUFFER };
      const builtin: Measured[] = [];
      const iperf3: Measured[] = [];
      for (let i = 0; i < ROUNDS; i++) {
        builtin.push(await measure('builtin', load));
        console.log(`${packetsPerSecond} pps x ${packetSize} B round ${i + 1}: ${line(builtin.at(-1)!)}`);
        iperf3.push(await measure('iperf3', load));
        console.log(`${packetsPerSecond} pps x ${packetSize} B round ${i + 1}: ${line(iperf3.at(-1)!)}`);
      }
      const cpuRatio = median(builtin.map((b, i) => b.senderCpuSeconds / Math.max(0.01, iperf3[i]!.senderCpuSeconds)));
      const lossGapPp = (median(builtin.map((r) => r.lossRatio)) - median(iperf3.map((r) => r.lossRatio))) * 100;
      console.log(`${packetsPerSecond} pps x ${packetSize} B: builtin sender CPU / iperf3's ${cpuRatio.toFixed(2)} (median of pairs); median loss builtin - iperf3 ${lossGapPp.toFixed(3)} pp`);
      points.push({ packetsPerSecond, packetSize, senderCpuRatio: round(cpuRatio, 3), lossGapPercentagePoints: round(lossGapPp, 3), builtin: summary(builtin), iperf3: summary(iperf3) });
    }
  }
  // The highest rate each sustains loss-free: both at each step, until neither is.
  const packetSize = SIZES[0]!;
  const highest: Record<string, number | null> = { builtin: null, iperf3: null };
  const steps: Record<string, unknown>[] = [];
  const lossFree = (r: Measured, pps: number) => r.lossRatio <= LOSS_FREE && r.achievedPacketsPerSecond >= pps * 0.99;
  for (let pps = 50_000; STEP > 0 && pps <= 200_000; pps += STEP) {
    const load = { packetsPerSecond: pps, packetSize, seconds: SECONDS, socketBuffer: BUFFER };
    const b = await measure('builtin', load);
    const p = await measure('iperf3', load);
    console.log(`step ${pps} pps x ${packetSize} B: ${line(b)}\nstep ${pps} pps x ${packetSize} B: ${line(p)}`);
    steps.push({ packetsPerSecond: pps, builtin: { lossPercent: round(b.lossRatio * 100, 3), achieved: round(b.achievedPacketsPerSecond, 0), senderCpuSeconds: b.senderCpuSeconds }, iperf3: { lossPercent: round(p.lossRatio * 100, 3), achieved: round(p.achievedPacketsPerSecond, 0), senderCpuSeconds: p.senderCpuSeconds } });
    if (lossFree(b, pps)) highest.builtin = pps;
    if (lossFree(p, pps)) highest.iperf3 = pps;
    if (!lossFree(b, pps) && !lossFree(p, pps)) break;
  }
  console.log(`highest loss-free rate (loss <= ${LOSS_FREE * 100}%, achieved within 1%), ${packetSize} B: builtin ${highest.builtin ?? 'below 50000'}, iperf3 ${highest.iperf3 ?? 'below 50000'} pps`);
  console.log(`written ${await writeResult('udp-engine', { seconds: SECONDS, rounds: ROUNDS, socketBuffer: BUFFER, points, highestLossFree: highest, steps })}`);
}

if (process.env.NICLAB_BENCH_NETNS) await main();
else await inOwnNamespace();
