/**
 * Fidelity: does niclab add anything to what it measures? Alternating in one run, PAIRS times
 * each: bare iperf3 and niclab with the same options. Three conditions:
 * - loopback: bare iperf3 against the builtin engine's two ends run as the agent runs them (no
 *   API: a flow's ends are two hosts), both on 127.0.0.1;
 * - unshaped: veth pairs between namespaces (A -> B), bare iperf3, niclab's iperf3 engine and
 *   its builtin TCP through the API;
 * - shaped1g: the same at 1 Gbit/s (C -> D).
 * Figures are per-pair ratios against the bare iperf3 run next to them; each pair's order
 * alternates (bare first, then niclab first), so a drift in the machine's load falls on both.
 * BENCH_CONDITIONS=loopback,unshaped runs only those.
 */
import { spawn } from 'node:child_process';
import { ENGINES } from '@niclab/agent/engines/registry';
import { enginePair } from '../test/helpers/engines.js';
import { freePort } from '../test/helpers/redis.js';
import { bareIperf3, flow, mbit, median, ratioSummary, round, startLab, writeResult } from './lib.js';

const PAIRS = Number(process.env.BENCH_PAIRS ?? 5);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
/** The builtin's default bufferLength, and bare iperf3's TCP default (-l 128K). */
const BUFFER_LENGTH = 131072;
const CONDITIONS = (process.env.BENCH_CONDITIONS ?? 'loopback,unshaped,shaped1g').split(',');

function output(argv: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(argv[0]!, argv.slice(1), { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (chunk: Buffer) => (out += chunk));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`${argv.join(' ')} exited ${code}`))));
  });
}

/** Bare iperf3 on 127.0.0.1: what its server received, bits/s. */
async function bareLoopback(): Promise<number> {
  const port = await freePort();
  const server = output(['iperf3', '-s', '-1', '-B', '127.0.0.1', '-p', String(port), '--json']);
  const deadline = Date.now() + 5000;
  while (!(await output(['ss', '-Hltn', `sport = :${port}`])).trim()) {
    if (Date.now() > deadline) throw new Error('bare iperf3 server did not listen');
    await new Promise((r) => setTimeout(r, 20));
  }
  await output(['iperf3', '-c', '127.0.0.1', '-p', String(port), '-t', String(SECONDS), '-l', String(BUFFER_LENGTH), '--json']);
  return JSON.parse(await server).end.sum_received.bits_per_second as number;
}

/** The builtin engine's ends on 127.0.0.1: what its receiver counted, bits/s; the sender's bytes must be the receiver's. */
async function builtinLoopback(): Promise<{ bitsPerSecond: number; senderCpu: number; receiverCpu: number }> {
  const params = { protocol: 'tcp', test: 'stream', duration: SECONDS, bufferLength: BUFFER_LENGTH, streams: 1, noDelay: false, interval: 1 } as const;
  const [sender, receiver] = await enginePair(ENGINES.builtin!, params);
  if (sender.error || receiver.error || !sender.figures || !receiver.figures) throw new Error(`builtin on loopback failed: ${JSON.stringify([sender.error, receiver.error])}`);
  if (sender.figures.bytes !== receiver.figures.bytes) throw new Error(`builtin on loopback: sent ${sender.figures.bytes} bytes, received ${receiver.figures.bytes}`);
  const share = (f: typeof sender.figures) => round(f!.cpuSeconds / f!.realSeconds, 3);
  return { bitsPerSecond: receiver.figures.realBitsPerSecond, senderCpu: share(sender.figures), receiverCpu: share(receiver.figures) };
}

const lab = CONDITIONS.some((c) => c !== 'loopback') ? await startLab(4, 'A=none,B=none,C=1gbit,D=1gbit') : null;
try {
  const out: Record<string, unknown> = { pairs: PAIRS, seconds: SECONDS, bufferLength: BUFFER_LENGTH };
  if (CONDITIONS.includes('loopback')) {
    const rows: { bare: number; builtin: number; senderCpu: number; receiverCpu: number }[] = [];
    for (let i = 0; i < PAIRS; i++) {
      let bare = 0;
      let builtin!: Awaited<ReturnType<typeof builtinLoopback>>;
      if (i % 2 === 0) {
        bare = await bareLoopback();
        builtin = await builtinLoopback();
      } else {
        builtin = await builtinLoopback();
        bare = await bareLoopback();
      }
      rows.push({ bare, builtin: builtin.bitsPerSecond, senderCpu: builtin.senderCpu, receiverCpu: builtin.receiverCpu });
      console.log(`loopback pair ${i + 1}: bare iperf3 ${mbit(bare).toFixed(0)}, builtin ${mbit(builtin.bitsPerSecond).toFixed(0)} Mbit/s (ratio ${(builtin.bitsPerSecond / bare).toFixed(3)}; builtin CPU sender ${builtin.senderCpu}, receiver ${builtin.receiverCpu} of a core)`);
    }
    const figures = {
      bareMbitPerSecond: round(median(rows.map((r) => mbit(r.bare))), 1),
      builtin: ratioSummary(rows.map((r) => r.builtin / r.bare)),
      runsMbitPerSecond: rows.map((r) => ({ bare: round(mbit(r.bare), 1), builtin: round(mbit(r.builtin), 1), builtinSenderCpu: r.senderCpu, builtinReceiverCpu: r.receiverCpu })),
    };
    console.log(`loopback: builtin / bare median ${figures.builtin.median} (${figures.builtin.min}-${figures.builtin.max})`);
    out.loopback = figures;
  }
  if (lab) {
    const [A, B, C, D] = lab.lab.hosts;
    const conditions = Object.entries({ unshaped: [A!, B!], shaped1g: [C!, D!] } as const).filter(([name]) => CONDITIONS.includes(name));
    for (const [name, [from, to]] of conditions) {
      const rows: { bare: number; iperf3: number; builtin: number }[] = [];
      for (let i = 0; i < PAIRS; i++) {
        const bareRun = async () => (await bareIperf3(from, to, SECONDS, ['-l', String(BUFFER_LENGTH)])).server.end.sum_received.bits_per_second as number;
        const viaNiclab = async (engine: string) => (await lab.client.succeed({ engine, duration: SECONDS, bufferLength: BUFFER_LENGTH, flows: [flow(from.name, to.name)] }, 120_000)).runs[0].flows[0].bitsPerSecond as number;
        let bare = 0;
        let iperf3 = 0;
        let builtin = 0;
        if (i % 2 === 0) {
          bare = await bareRun();
          iperf3 = await viaNiclab('iperf3');
          builtin = await viaNiclab('builtin');
        } else {
          builtin = await viaNiclab('builtin');
          iperf3 = await viaNiclab('iperf3');
          bare = await bareRun();
        }
        rows.push({ bare, iperf3, builtin });
        console.log(`${name} pair ${i + 1}: bare iperf3 ${mbit(bare).toFixed(0)}, niclab iperf3 ${mbit(iperf3).toFixed(0)}, niclab builtin ${mbit(builtin).toFixed(0)} Mbit/s (builtin ratio ${(builtin / bare).toFixed(3)})`);
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
  }
  console.log(`written ${await writeResult(CONDITIONS.length === 3 ? 'fidelity' : `fidelity-${CONDITIONS.join('-')}`, out)}`);
} finally {
  await lab?.close();
}
