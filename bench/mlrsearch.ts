/**
 * MLRsearch against two binary searches on one 20 Mbit/s tbf link (1000-byte datagrams), the
 * builtin engine, side by side in one run:
 * - cost: NDR and PDR 0.5% from one MLRsearch job against a binary NDR and a binary PDR as
 *   niclab runs them by default (one confirmation: a rate that passes is tried twice), at the
 *   same trial length and width (final trials of BENCH_SECONDS, one full-length trial per
 *   bound, width 1% as the binary search's resolution), in trial-seconds and wall seconds;
 * - repeatability under noise: BENCH_REPEATS of each (the MLRsearch with two final trials per
 *   bound and an exceed ratio of 50%, the binary PDR), while bare `iperf3 -u` bursts of 1 s at
 *   4 Mbit/s go into the same shaper from the same host, each after a gap drawn from a seeded
 *   schedule (uniform in BENCH_NOISE_GAP seconds, default 8-20: spikes a trial meets now and
 *   then); each rate's coefficient of variation over the repeats. BENCH_NOISY_GOAL=final,sum
 *   (seconds) sets the noisy MLRsearch's final trial duration and duration sum (default
 *   BENCH_SECONDS and twice it; CSIT runs 1,21), and a third value its exceed ratio (default 0.5); BENCH_PHASES (default quiet,noise) picks the phases; BENCH_ENGINE (builtin, or iperf3) the
 *   engine. The quiet phase reports each MLRsearch bound against the shaper's rate and
 *   against what a final trial carries through its queue (the rate × (1 + 56 ms / T)).
 * BENCH_QUEUE=latency_ms,burst_bytes replaces the shaper's tbf (the switch port that feeds B,
 * and B's own eth1) with that queue and bucket, in place of the lab's 50 ms and 16,000 bytes:
 * a shallow queue lets a short final trial measure the rate rather than the queue.
 */
import { command } from '@niclab/shared/runtime/command';
import { bareIperf3Udp, flow, round, startLab, writeResult } from './lib.js';
import { seededRandom as seeded } from '../test/helpers/random.js';

const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const REPEATS = Number(process.env.BENCH_REPEATS ?? 5);
const SEED = Number(process.env.BENCH_SEED ?? 2026);
const [GAP_MIN, GAP_MAX] = (process.env.BENCH_NOISE_GAP ?? '8-20').split('-').map(Number) as [number, number];
const NOISY_GOAL = (process.env.BENCH_NOISY_GOAL ?? `${SECONDS},${2 * SECONDS}`).split(',');
const [NOISY_FINAL, NOISY_SUM, NOISY_EXCEED = 0.5] = NOISY_GOAL.map((v) => (v.trim() === '' ? NaN : Number(v))) as [number, number, number?];
const PHASES = (process.env.BENCH_PHASES ?? 'quiet,noise').split(',');
const ENGINE = process.env.BENCH_ENGINE ?? 'builtin';
if (!(NOISY_GOAL.length <= 3 && NOISY_FINAL > 0 && NOISY_SUM >= NOISY_FINAL && NOISY_EXCEED >= 0 && NOISY_EXCEED < 1)) throw new Error(`BENCH_NOISY_GOAL is final,sum[,exceed] (seconds, the sum at least the final trial's duration; an exceed ratio in [0, 1), default 0.5): not ${process.env.BENCH_NOISY_GOAL}`);
if (!PHASES.length || PHASES.some((p) => p !== 'quiet' && p !== 'noise')) throw new Error(`BENCH_PHASES takes quiet and/or noise: not ${process.env.BENCH_PHASES}`);
if (ENGINE !== 'builtin' && ENGINE !== 'iperf3') throw new Error(`BENCH_ENGINE is builtin or iperf3: not ${ENGINE}`);
const QUEUE = process.env.BENCH_QUEUE ? process.env.BENCH_QUEUE.split(',').map(Number) as [number, number] : null;
if (QUEUE && !(QUEUE.length === 2 && QUEUE[0] > 0 && QUEUE[1] >= 1600)) throw new Error(`BENCH_QUEUE is latency_ms,burst_bytes (a bucket of at least one frame, 1,600 bytes): not ${process.env.BENCH_QUEUE}`);
/** The 20 Mbit/s tbf's queue, s (lab.ts's 50 ms and 16,000-byte bucket, 56.4 ms, or BENCH_QUEUE's): a trial of T s carries the rate × (1 + QUEUE_SECONDS / T). */
const [LATENCY_MS, BUCKET_BYTES] = QUEUE ?? [50, 16_000];
const QUEUE_SECONDS = LATENCY_MS / 1000 + BUCKET_BYTES / (20e6 / 8);
const SIZE = 1000;
const SHAPER_PPS = 20e6 / ((SIZE + 42) * 8);
const BOUNDS = { min: { packetsPerSecond: Math.round(SHAPER_PPS * 0.85) }, max: { packetsPerSecond: Math.round(SHAPER_PPS * 1.15) } };

const cv = (xs: number[]) => {
  const mean = xs.reduce((a, b) => a + b, 0) / xs.length;
  const sd = Math.sqrt(xs.reduce((a, b) => a + (b - mean) ** 2, 0) / Math.max(1, xs.length - 1));
  return { mean: round(mean, 1), cv: round(sd / mean, 5), values: xs };
};

const lab = await startLab(2, 'A=none,B=20mbit');
try {
  const [A, B] = lab.lab.hosts;
  if (QUEUE) {
    const tbf = ['root', 'tbf', 'rate', '20mbit', 'burst', `${QUEUE[1]}b`, 'latency', `${QUEUE[0]}ms`];
    await command('tc', ['-n', lab.lab.switchNamespace, 'qdisc', 'replace', 'dev', `p${B!.name}`, ...tbf]);
    await command('tc', ['-n', B!.namespace, 'qdisc', 'replace', 'dev', 'eth1', ...tbf]);
    console.log(`shaper: ${(await command('tc', ['-n', lab.lab.switchNamespace, 'qdisc', 'show', 'dev', `p${B!.name}`])).trim()}`);
  }
  const base = { engine: ENGINE, protocol: 'udp', duration: SECONDS, socketBuffer: 4194304, udp: { packetSize: SIZE, rate: { packetsPerSecond: 1000 } }, flows: [flow('A', 'B')] };
  const run = async (search: Record<string, unknown>) => {
    const started = Date.now();
    const job = await lab.client.succeed({ ...base, search: { ...BOUNDS, ...search } }, 1_800_000);
    const wallSeconds = round((Date.now() - started) / 1000, 1);
    const { body: report } = await lab.client.call('getReport', 'GET', `/v1/jobs/${job.id}/report`);
    return { job: job.id as string, wallSeconds, report };
  };
  const binary = async (target: Record<string, unknown>) => {
    const { job, wallSeconds, report } = await run({ algorithm: 'binary', resolutionPercent: 1, confirmations: 1, ...target });
    const r = report.searches[0];
    const row = { job, target: target.target, found: r.found?.packetsPerSecond ?? null, bracket: [r.bracket.low, r.bracket.high], trials: r.trials.length, trialSeconds: r.trials.length * SECONDS, wallSeconds };
    console.log(`binary ${JSON.stringify(row)}`);
    return row;
  };
  const mlr = async (finalTrialDuration: number, durationSum: number, exceedRatio = 0.5) => {
    const goal = { finalTrialDuration, durationSum, width: 0.01, exceedRatio };
    const { job, wallSeconds, report } = await run({ algorithm: 'mlrsearch', goals: [{ lossRatio: 0, ...goal }, { lossRatio: 0.005, ...goal }] });
    const r = report.mlrSearches[0];
    const row = {
      job, state: r.state, trials: r.trials.length, trialSeconds: r.trialSeconds, wallSeconds, void: r.trials.filter((t: { void: unknown[] }) => t.void.length).length,
      goals: r.goals.map((g: { goal: { lossRatio: number }; relevantLowerBound: { packetsPerSecond: number } | null; relevantUpperBound: { packetsPerSecond: number } | null; conditionalThroughput: { packetsPerSecond: number } | null }) => ({
        lossRatio: g.goal.lossRatio, lower: g.relevantLowerBound?.packetsPerSecond ?? null, upper: g.relevantUpperBound?.packetsPerSecond ?? null, conditional: g.conditionalThroughput ? round(g.conditionalThroughput.packetsPerSecond, 1) : null,
      })),
    };
    console.log(`mlrsearch ${JSON.stringify(row)}`);
    return row;
  };

  // Cost, on the quiet link.
  const quiet = PHASES.includes('quiet') ? { mlrsearch: await mlr(SECONDS, SECONDS), binaryNdr: await binary({ target: 'ndr' }), binaryPdr: await binary({ target: 'pdr', lossRatio: 0.005 }) } : null;
  const cost = quiet && {
    mlrTrialSeconds: quiet.mlrsearch.trialSeconds, binaryTrialSeconds: quiet.binaryNdr.trialSeconds + quiet.binaryPdr.trialSeconds,
    trialSecondsRatio: round(quiet.mlrsearch.trialSeconds / (quiet.binaryNdr.trialSeconds + quiet.binaryPdr.trialSeconds), 3),
    mlrWallSeconds: quiet.mlrsearch.wallSeconds, binaryWallSeconds: round(quiet.binaryNdr.wallSeconds + quiet.binaryPdr.wallSeconds, 1),
  };
  if (cost) console.log(`cost: ${JSON.stringify(cost)}`);
  const carried = SHAPER_PPS * (1 + QUEUE_SECONDS / SECONDS);
  const accuracy = quiet && quiet.mlrsearch.goals.map((g: { lossRatio: number; lower: number | null }) => ({
    lossRatio: g.lossRatio, lower: g.lower, ofShaper: g.lower === null ? null : round(g.lower / SHAPER_PPS, 4),
    ofCarried: g.lower === null ? null : round(g.lower / (g.lossRatio ? carried / (1 - g.lossRatio) : carried), 4),
  }));
  if (accuracy) console.log(`accuracy (${ENGINE}, final trials ${SECONDS} s, shaper ${round(SHAPER_PPS, 1)} pps, carried ${round(carried, 1)}): ${JSON.stringify(accuracy)}`);
  // The reference, as test/lab/mlrsearch.test.ts takes it: bare iperf3 -u for a final trial's
  // length one 1% step below each lower bound (within its goal) and two above the PDR's (beyond it).
  const bare = [];
  if (accuracy && accuracy.every((g: { lower: number | null }) => g.lower !== null)) {
    const [ndr, pdr] = accuracy as { lower: number }[];
    for (const [at, step] of [[ndr!.lower, -1], [pdr!.lower, -1], [pdr!.lower, 2]] as const) {
      const packetsPerSecond = Math.round(at * (1 + step / 100));
      const r = await bareIperf3Udp(A!, B!, SECONDS, { packetSize: SIZE, packetsPerSecond, socketBuffer: 4194304 });
      bare.push({ packetsPerSecond, step, lost: r.lost, sent: r.sent, lossRatio: round(r.lossRatio, 5) });
    }
    console.log(`bare iperf3 (1% steps: below the NDR, below the PDR, two above the PDR): ${JSON.stringify(bare)}`);
  }
  // Repeatability under a seeded noise schedule, running for the whole phase.
  const noisePhase = async () => {
    const random = seeded(SEED);
    let noisy = true;
    const bursts: { at: number; lost: number; sent: number }[] = [];
    const burstErrors: string[] = [];
    const phaseStarted = Date.now();
    const noise = (async () => {
      while (noisy) {
        await new Promise((resolve) => setTimeout(resolve, (GAP_MIN + random() * (GAP_MAX - GAP_MIN)) * 1000));
        if (!noisy) break;
        // A burst that fails (its control connection crosses the shaper too) is counted, not fatal.
        try {
          const burst = await bareIperf3Udp(A!, B!, 1, { packetSize: SIZE, packetsPerSecond: 500 });
          bursts.push({ at: round((Date.now() - phaseStarted) / 1000, 1), lost: burst.lost, sent: burst.sent });
        } catch (error) {
          burstErrors.push((error as Error).message.slice(0, 200));
        }
      }
    })();
    const mlrRuns: Awaited<ReturnType<typeof mlr>>[] = [];
    const binaryRuns: Awaited<ReturnType<typeof binary>>[] = [];
    // A search that could not conclude (every attempt at a trial void: niclab's sender stalled) is a result too: recorded, not fatal.
    const failed: { search: string; repeat: number; error: string }[] = [];
    const attempt = async <T>(search: string, repeat: number, runs: T[], make: () => Promise<T>) => {
      try {
        runs.push(await make());
      } catch (error) {
        failed.push({ search, repeat, error: (error as Error).message.slice(0, 400) });
        console.log(`${search} repeat ${repeat} failed: ${failed.at(-1)!.error}`);
      }
    };
    try {
      for (let i = 0; i < REPEATS; i++) {
        await attempt('mlrsearch', i + 1, mlrRuns, () => mlr(NOISY_FINAL, NOISY_SUM, NOISY_EXCEED));
        await attempt('binary', i + 1, binaryRuns, () => binary({ target: 'pdr', lossRatio: 0.005 }));
      }
    } finally {
      noisy = false;
      await noise;
    }
    const goalValues = (index: number) => mlrRuns.map((r) => r.goals[index]!.conditional).filter((v): v is number => v !== null);
    const repeatability = {
      repeats: REPEATS, seed: SEED, mlrFinalTrialDuration: NOISY_FINAL, mlrDurationSum: NOISY_SUM, mlrExceedRatio: NOISY_EXCEED, noiseGapSeconds: [GAP_MIN, GAP_MAX], bursts: bursts.length, burstErrors: burstErrors.length, burstSeconds: 1, burstMbitPerSecond: 4,
      mlrNdrConditional: cv(goalValues(0)), mlrPdrConditional: cv(goalValues(1)),
      // Against the shaper, and against what a final trial carries through its queue.
      mlrPdrOfShaper: goalValues(1).map((v) => round(v / SHAPER_PPS, 4)), mlrNdrOfShaper: goalValues(0).map((v) => round(v / SHAPER_PPS, 4)),
      carriedByFinalTrial: round(SHAPER_PPS * (1 + QUEUE_SECONDS / NOISY_FINAL), 1),
      binaryPdrFound: cv(binaryRuns.map((r) => r.found).filter((v): v is number => v !== null)),
      failed, mlrTrialSeconds: mlrRuns.map((r) => r.trialSeconds), binaryPdrTrialSeconds: binaryRuns.map((r) => r.trialSeconds), mlrVoidTrials: mlrRuns.map((r) => r.void),
    };
    console.log(`repeatability: ${JSON.stringify(repeatability)}`);
    return { repeatability, bursts, mlrRuns, binaryRuns };
  };
  const repeated = PHASES.includes('noise') ? await noisePhase() : null;
  console.log(`written ${await writeResult('mlrsearch', { seconds: SECONDS, queueSeconds: QUEUE_SECONDS, engine: ENGINE, packetSize: SIZE, shaperPps: round(SHAPER_PPS, 1), quiet, cost, accuracy, bare, ...repeated })}`);
} finally {
  await lab.close();
}
