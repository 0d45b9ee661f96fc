/**
 * Rate search: the NDR and the PDR (0.5%) of a 20 Mbit/s tbf link found by niclab's search
 * with each engine, the shaper's own rate in datagrams beside them, and what a search costs:
 * its wall time against trials × trial duration (the rest is the per-trial overhead of
 * leases, engine start and the coordinator's hops). Bare iperf3 -u at 1% steps around the
 * builtin's PDR is the reference in the same run.
 *
 * Then small datagrams (issue 28): the NDR of 64-byte datagrams on an unshaped lab link, found
 * by the same binary search (1 s trials, 2% resolution) with the builtin engine and with the
 * iperf3 engine (iperf3 -u -l 64, run by niclab), alternating BENCH_SMALL_PAIRS times: is the
 * builtin's highest loss-free rate at least iperf3's? Nothing limits the link, so each rate is
 * its engine's own limit: a trial fails when the sender falls short of the rate or anything is
 * lost. (An MLRsearch would call a sender short of its load void, niclab's limit, and find no
 * rate above it: the binary search is the one that measures the engine.)
 *
 * Then the same on loopback (issue 28's own case): inside one lab host's namespace, the builtin
 * engine's 64 B NDR on its `lo` found by niclab's binary search, against bare `iperf3 -u -l 64`
 * on the same `lo` found by the same bisection here (the same pass rule: no datagram lost and
 * at least SENDER_SHORTFALL of the rate sent; a pass confirmed once; 2% resolution; 1 s trials),
 * alternating BENCH_SMALL_PAIRS times. BENCH_PARTS (default shaped,small,loopback) picks the parts.
 */
import { SENDER_SHORTFALL } from '@niclab/shared/domain/campaigns/rate-search';
import { bareIperf3, bareIperf3Udp, flow, ratioSummary, round, startLab, writeResult } from './lib.js';

const PARTS = (process.env.BENCH_PARTS ?? 'shaped,small,loopback').split(',');
if (!PARTS.length || PARTS.some((p) => !['shaped', 'small', 'loopback'].includes(p))) throw new Error(`BENCH_PARTS takes shaped, small and/or loopback: not ${process.env.BENCH_PARTS}`);

let searched: Record<string, unknown> = {};

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const SIZE = 1000;
const SHAPER_PPS = 20e6 / ((SIZE + 42) * 8);

if (PARTS.includes('shaped')) {
  const lab = await startLab(2, 'A=none,B=20mbit');
  try {
    const [A, B] = lab.lab.hosts;
    const search = async (engine: string, target: Record<string, unknown>) => {
      const started = Date.now();
      const job = await lab.client.succeed({
        engine, protocol: 'udp', duration: SECONDS, socketBuffer: 4194304, udp: { packetSize: SIZE, rate: { packetsPerSecond: 1000 } },
        search: { min: { packetsPerSecond: Math.round(SHAPER_PPS * 0.5) }, max: { packetsPerSecond: Math.round(SHAPER_PPS * 1.15) }, ...target },
        flows: [flow('A', 'B')],
      }, 1_200_000);
      const wallSeconds = (Date.now() - started) / 1000;
      const { body: report } = await lab.client.call('getReport', 'GET', `/v1/jobs/${job.id}/report`);
      const result = report.searches[0];
      const trials = result.trials.length as number;
      const row = {
        engine, target: target.target, foundPps: result.found?.packetsPerSecond ?? null, ofShaper: result.found ? round(result.found.packetsPerSecond / SHAPER_PPS) : null,
        bracket: [result.bracket.low, result.bracket.high], trials, wallSeconds: round(wallSeconds, 1), trialSeconds: trials * SECONDS,
        overheadPerTrialSeconds: round((wallSeconds - trials * SECONDS) / trials, 2),
      };
      console.log(JSON.stringify(row));
      return row;
    };
    const rows = [];
    for (const engine of ['builtin', 'iperf3']) {
      rows.push(await search(engine, { target: 'ndr' }));
      rows.push(await search(engine, { target: 'pdr', lossRatio: 0.005 }));
    }
    const pdr = rows.find((r) => r.engine === 'builtin' && r.target === 'pdr')?.foundPps ?? Math.round(SHAPER_PPS);
    const bare = [];
    for (const step of [-2, -1, 0, 1, 2, 3]) {
      const pps = Math.round(pdr * (1 + step / 100));
      const { client, server } = await bareIperf3(A!, B!, SECONDS, ['-u', '-b', String(pps * SIZE * 8), '-l', String(SIZE), '-w', '4M']);
      const sent = client.end.sum.packets as number;
      const lost = server.end.sum.lost_packets as number;
      bare.push({ step, pps, lossRatio: round(lost / Math.max(1, sent), 6) });
      console.log(`bare iperf3 ${step >= 0 ? '+' : ''}${step}%: ${pps} pps, loss ${round(lost / Math.max(1, sent), 6)}`);
    }
    searched = { seconds: SECONDS, packetSize: SIZE, shaperPps: round(SHAPER_PPS, 1), searches: rows, bareIperf3AroundBuiltinPdr: bare };
    // Written now as well, so a failure in the small-datagram part below keeps these figures.
    console.log(`written ${await writeResult('search', searched)}`);
  } finally {
    await lab.close();
  }
}

const SMALL_PAIRS = Number(process.env.BENCH_SMALL_PAIRS ?? 3);
const SMALL_BOUNDS = { min: 10_000, max: 1_000_000, resolutionPercent: 2 };
const small = PARTS.includes('small') || PARTS.includes('loopback') ? await startLab(2, 'none') : null;
if (small) {
  try {
    let smallResult: Record<string, unknown> = {};
    const ndr = async (engine: string, flows = [flow('A', 'B')]) => {
      const job = await small.client.succeed({
        engine, protocol: 'udp', duration: 1, socketBuffer: 4194304, udp: { packetSize: 64, rate: { packetsPerSecond: 1000 } },
        search: { algorithm: 'binary', target: 'ndr', min: { packetsPerSecond: SMALL_BOUNDS.min }, max: { packetsPerSecond: SMALL_BOUNDS.max }, resolutionPercent: SMALL_BOUNDS.resolutionPercent, confirmations: 1 },
        flows,
      }, 1_200_000);
      const { body: report } = await small.client.call('getReport', 'GET', `/v1/jobs/${job.id}/report`);
      const r = report.searches[0];
      const row = { engine, stoppedBy: r.stoppedBy, limitedBy: r.limitedBy, lower: r.found?.packetsPerSecond ?? null, upper: r.bracket.high, trials: r.trials.length };
      console.log(`64 B NDR ${JSON.stringify(row)}`);
      return row;
    };
    if (PARTS.includes('small')) {
      const pairs = [];
      for (let i = 0; i < SMALL_PAIRS; i++) {
        const builtin = await ndr('builtin');
        const iperf3 = await ndr('iperf3');
        pairs.push({ builtin, iperf3, ratio: builtin.lower && iperf3.lower ? round(builtin.lower / iperf3.lower, 3) : null });
      }
      const ratios = pairs.map((p) => p.ratio).filter((r): r is number => r !== null);
      smallResult = { small: { packetSize: 64, pairs, builtinOverIperf3: ratios.length ? ratioSummary(ratios) : null } };
      console.log(`written ${await writeResult('search', { ...searched, ...smallResult })}`);
    }
    if (PARTS.includes('loopback')) {
      const [A] = small.lab.hosts;
      const lo = { ...A!, address: '127.0.0.1' };
      const onLo = [{ from: { agent: 'A', interface: 'lo' }, to: { agent: 'A', interface: 'lo' } }];
      // Bare iperf3 bisected as niclab's binary search bisects (rate-search.ts replay): max first, a pass tried twice, midpoints rounded.
      const bareNdr = async () => {
        const trials: { pps: number; sent: number; lost: number; passed: boolean }[] = [];
        let low: number | null = null;
        let high: number | null = null;
        let next: number | null = SMALL_BOUNDS.max;
        while (next !== null && trials.length < 40) {
          const pps: number = next;
          let passed = true;
          for (let confirm = 0; confirm < 2 && passed; confirm++) {
            const r = await bareIperf3Udp(lo, lo, 1, { packetSize: 64, packetsPerSecond: pps, socketBuffer: 4194304 });
            passed = r.lost === 0 && r.sent >= SENDER_SHORTFALL * pps;
            trials.push({ pps, sent: r.sent, lost: r.lost, passed });
          }
          if (passed) low = pps;
          else high = pps;
          // The first trial is at max: past it, either max passed (low) or a rate failed (high).
          if (low === SMALL_BOUNDS.max || high === null || high <= SMALL_BOUNDS.min) next = null;
          else {
            const from = low ?? SMALL_BOUNDS.min;
            next = (high - from) / high <= SMALL_BOUNDS.resolutionPercent / 100 || high - from <= 1 ? (low === null ? SMALL_BOUNDS.min : null) : Math.round((from + high) / 2);
          }
        }
        const row = { engine: 'bare iperf3', lower: low, upper: high, trials: trials.length };
        console.log(`64 B NDR on lo ${JSON.stringify(row)}`);
        return row;
      };
      const pairs = [];
      for (let i = 0; i < SMALL_PAIRS; i++) {
        const builtin = await ndr('builtin', onLo);
        const bare = await bareNdr();
        pairs.push({ builtin, bare, ratio: builtin.lower && bare.lower ? round(builtin.lower / bare.lower, 3) : null });
      }
      const ratios = pairs.map((p) => p.ratio).filter((r): r is number => r !== null);
      console.log(`written ${await writeResult('search', { ...searched, ...smallResult, loopback: { packetSize: 64, pairs, builtinOverBareIperf3: ratios.length ? ratioSummary(ratios) : null } })}`);
    }
  } finally {
    await small.close();
  }
}
