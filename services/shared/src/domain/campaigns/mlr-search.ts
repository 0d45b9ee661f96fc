/**
 * MLRsearch (draft-ietf-bmwg-mlrsearch-15, RFC 9971) as a campaign: `search.algorithm:
 * mlrsearch`. Several Search Goals (NDR and PDR by default) come out of one search per sweep
 * point; the search itself is domain/mlrsearch (CSIT's controller, the draft's classification),
 * and this module turns its trial inputs into runs and runs back into its trial results.
 *
 * A run is a trial: its offered rate is the Trial Load rounded to whole datagrams/s, its own
 * duration the Trial Duration (PlannedRun.duration). Replayed from the finished runs, the
 * search asks the same next trial, so a resumed job goes on where it stopped, as the binary
 * search does. A trial niclab itself limited (its sender short of the load over the whole
 * trial, the receiving host's own socket drops, a failed run) is void: the search asks it again
 * and never classifies a load by it.
 */
import type { Agent, ErrorInfo, FieldError, JobSpec, Run, SweepPoint } from '../contract.js';
import type { components } from '../../generated/openapi.js';
import { GOAL_DEFAULTS, NDR_PDR, goalErrors, withGoalDefaults, type SearchGoal } from '../mlrsearch/goals.js';
import { MlrSearch, configErrors, type MlrSearchConfig, type SearchOutcome } from '../mlrsearch/mlr-search.js';
import type { TrialInput, TrialResult, VoidReason } from '../mlrsearch/trial.js';
import { perFinishedRuns } from '../finished-runs.js';
import { pointKey, pointLabel, sweepPoints, type PlannedRun } from '../plan.js';
import { udpPacketsPerSecond } from '../udp-rate.js';
import { alignTable } from '../text-table.js';
import { NOTHING_MORE, type Campaign, type CampaignStrategy } from './campaign.js';
import { WIRE_OVERHEAD_BYTES, basePoint, isMlrSearch, packetSizeAt, pointSearchLinks, searchDefaults, searchScopeErrors, trialPoints, trialsByPoint, withSearchBounds } from './rate-search.js';

type SearchSpec = NonNullable<JobSpec['search']>;
type GoalSpec = components['schemas']['SearchGoal'];
export type MlrSearchResult = components['schemas']['MlrSearchResult'];
type Rate = MlrSearchResult['goals'][number]['relevantLowerBound'];
type VoidTrialReason = components['schemas']['VoidTrialReason'];
type MlrLatency = components['schemas']['MlrLatency'];

export const MLR_DEFAULTS = { warmupDuration: 1, searchDurationMax: 600, maxVoidRepeats: 2 } as const;

/** Trial durations are whole seconds (iperf3 takes no other); a shorter one is rounded up. */
const DURATION_QUANTUM = 1;

/** A goal with every attribute: the final trial duration defaults to the job's `duration` (1 s at least: trials are whole seconds), the duration sum to at least that. */
function goalOf(spec: JobSpec, goal: GoalSpec): SearchGoal {
  const finalTrialDuration = goal.finalTrialDuration ?? Math.max(1, Math.ceil(spec.duration));
  return withGoalDefaults({ durationSum: Math.max(GOAL_DEFAULTS.durationSum, finalTrialDuration), ...goal, finalTrialDuration });
}

/** The goals as the contract shows them (the draft's attributes; CSIT's two internal ones stay at their defaults). */
function shownGoal(goal: SearchGoal): GoalSpec {
  const { lossRatio, exceedRatio, finalTrialDuration, durationSum, width, initialTrialDuration } = goal;
  return { lossRatio, exceedRatio, finalTrialDuration, durationSum, width, initialTrialDuration };
}

/** The Trial Load as offered: whole datagrams/s per flow. */
const offeredRate = (load: number) => Math.max(1, Math.round(load));

/** The search's config at one sweep point: loads in datagrams/s per flow. */
export function configAt(spec: JobSpec, point: SweepPoint): MlrSearchConfig {
  const search = spec.search!;
  const packetSize = packetSizeAt(spec, point);
  return {
    goals: (search.goals ?? NDR_PDR).map((goal) => goalOf(spec, goal)),
    minLoad: udpPacketsPerSecond({ packetSize, rate: search.min ?? searchDefaults.min }),
    maxLoad: udpPacketsPerSecond({ packetSize, rate: search.max! }),
    warmupDuration: search.warmupDuration ?? MLR_DEFAULTS.warmupDuration,
    searchDurationMax: search.searchDurationMax ?? MLR_DEFAULTS.searchDurationMax,
    maxVoidRepeats: search.maxVoidRepeats ?? MLR_DEFAULTS.maxVoidRepeats,
    durationQuantum: DURATION_QUANTUM,
    // Runs offer whole datagrams/s: a run at the asked load rounded is the trial asked.
    loadQuantum: 1,
  };
}

/** The contract's names for the config's fields. */
const FIELD_NAMES: Record<string, string> = { minLoad: 'min', maxLoad: 'max' };

/** Its scope's errors (as the binary search's), each goal as CSIT checks it, and each point's loads. */
export function mlrSearchErrors(spec: JobSpec): FieldError[] {
  const errors = searchScopeErrors(spec);
  if (spec.search?.latencyAt && (spec.direction === 'bidir' || spec.sweep?.direction?.includes('bidir'))) {
    errors.push({ field: 'body.search.latencyAt', message: 'cannot be measured with direction "bidir": the latency probe has no bidir (search each direction on its own)' });
  }
  if (errors.length > 0) return errors;
  // The goals whatever the loads (the schema requires `max`; without it only they are checked).
  if (!spec.search?.max || !spec.udp) return (spec.search?.goals ?? NDR_PDR).flatMap((goal, i) => goalErrors(goalOf(spec, goal), `body.search.goals[${i}]`));
  const seen = new Set<string>();
  for (const point of sweepPoints(spec)) {
    for (const error of configErrors(configAt(spec, point), 'body.search')) {
      const field = error.field.replace(/\.(minLoad|maxLoad)$/, (_, name: string) => `.${FIELD_NAMES[name]}`);
      const message = error.message.replace(/\b(minLoad|maxLoad)\b/, (name) => FIELD_NAMES[name]!);
      if (!seen.has(field)) errors.push({ field, message });
      seen.add(field);
    }
  }
  return errors;
}

/** The spec with its bounds and every goal's attributes filled in, so the stored job shows them. */
export function withMlrSearchDefaults(spec: JobSpec, agents: Agent[]): { spec: JobSpec; errors: FieldError[] } {
  const search: SearchSpec = {
    warmupDuration: MLR_DEFAULTS.warmupDuration, searchDurationMax: MLR_DEFAULTS.searchDurationMax, maxVoidRepeats: MLR_DEFAULTS.maxVoidRepeats, ...spec.search!,
    goals: (spec.search!.goals ?? NDR_PDR).map((goal) => shownGoal(goalOf(spec, goal))),
  };
  return withSearchBounds({ ...spec, search }, agents);
}

/** A run as the search's trial result: its load the offered rate (whole datagrams/s), its duration its own. */
export function trialOf(spec: JobSpec, run: Run): TrialResult {
  const load = run.point.rate && 'packetsPerSecond' in run.point.rate ? run.point.rate.packetsPerSecond : 0;
  const duration = run.duration ?? spec.duration;
  if (run.status !== 'succeeded') return { load, duration, flows: [], error: run.error ? `${run.error.code}: ${run.error.message}` : `the run ${run.status}` };
  return {
    load, duration,
    flows: run.flows.map((flow) => ({
      // What was sent and got through, whole datagrams: the offered rate is `load` rounded, so
      // a sender that kept up sent load × duration within a datagram per second.
      sent: flow.udp?.sent ?? 0,
      received: flow.udp?.received ?? 0,
      receiverSocketDrops: Math.max(0, flow.lossAttribution?.receiverSocketBuffer ?? 0),
      late: flow.udp?.lateDatagrams ?? 0,
    })),
  };
}

interface PointMlr {
  point: SweepPoint;
  packetSize: number;
  runs: Run[];
  outcome: SearchOutcome;
  next: TrialInput | null;
  /** Its latency runs after the search (RateSearch.latencyAt), finished ones, by fraction (the latest of each). */
  latencyRuns: Map<number, Run>;
}

/** Replays one point's search from its runs in order. */
function replay(spec: JobSpec, point: SweepPoint, runs: Run[], latencyRuns: Map<number, Run>): PointMlr {
  const search = new MlrSearch(configAt(spec, point));
  const trials = runs.map((run) => trialOf(spec, run));
  return { point, packetSize: packetSizeAt(spec, point), runs, outcome: search.outcome(trials), next: search.next(trials), latencyRuns };
}

export function mlrStates(spec: JobSpec, finished: Iterable<Run>): PointMlr[] {
  const all = [...finished];
  const latency = all.filter((run) => run.latencyAt !== undefined && (run.status === 'succeeded' || run.status === 'failed')).sort((a, b) => a.index - b.index);
  return trialsByPoint(spec, all).map(({ point, runs }) => {
    const key = pointKey(point);
    return replay(spec, point, runs, new Map(latency.filter((run) => pointKey(basePoint(run.point)) === key).map((run) => [run.latencyAt!, run])));
  });
}

/** The goal whose conditional throughput the latency runs take fractions of: the PDR, the highest loss ratio (the first of them on a tie). */
export function latencyGoal(goals: readonly { lossRatio: number }[]): number {
  return goals.reduce((best, goal, i) => (goal.lossRatio > goals[best]!.lossRatio ? i : best), 0);
}

/** A goal's conditional throughput per flow as the report gives it: at the offered (whole) lower bound, as the trials there offered it. */
function conditionalPps(goal: SearchOutcome['goals'][number]): number | null {
  return goal.relevantLowerBound === null || goal.conditionalLossRatio === null ? null : offeredRate(goal.relevantLowerBound) * (1 - goal.conditionalLossRatio);
}

/** A latency run at `fraction` of this point's PDR, or why it cannot be made: its rate (whole datagrams/s per flow) and its goal's final trial duration. */
function latencyLoad(state: PointMlr, fraction: number): { goal: number; packetsPerSecond: number; duration: number } | { goal: number | null; why: string } {
  if (state.outcome.state !== 'done') return { goal: null, why: state.outcome.state === 'searching' ? 'the search has not ended' : 'the search could not conclude' };
  const goal = latencyGoal(state.outcome.goals.map((g) => g.goal));
  const result = state.outcome.goals[goal]!;
  const pps = conditionalPps(result);
  if (pps === null) return { goal, why: `goal ${goal} has no conditional throughput (no lower bound)` };
  return { goal, packetsPerSecond: offeredRate(fraction * pps), duration: Math.ceil(result.goal.finalTrialDuration / DURATION_QUANTUM) * DURATION_QUANTUM };
}

/** The first fraction of `latencyAt` this point has no finished run of, as a plan at `index`; null when none is left or none can be made. */
function nextLatencyRun(spec: JobSpec, state: PointMlr, index: number): PlannedRun | null {
  for (const fraction of spec.search!.latencyAt ?? []) {
    if (state.latencyRuns.has(fraction)) continue;
    const load = latencyLoad(state, fraction);
    if (!('packetsPerSecond' in load)) return null;
    return { index, point: { ...state.point, rate: { packetsPerSecond: load.packetsPerSecond } }, repetition: 1, duration: load.duration, latencyAt: fraction };
  }
  return null;
}

/** What the latency probe saw beside each flow in a latency run. */
function latencyFlows(spec: JobSpec, run: Run): MlrLatency['flows'] {
  const n = spec.flows.length;
  const duration = run.duration ?? spec.duration;
  return spec.flows.map((_, i) => {
    const load = run.flows.find((f) => f.flowIndex === i);
    const probe = run.flows.find((f) => f.flowIndex === n + i)?.probe ?? null;
    return {
      flow: i,
      achievedPacketsPerSecond: load?.udp ? load.udp.sent / duration : null,
      lossRatio: load?.udp ? load.udp.lossRatio : null,
      rttSeconds: probe && probe.loaded.received > 0 ? probe.loaded.rttSeconds : null,
      oneWayDelaySeconds: probe && probe.loaded.received > 0 ? (probe.loaded.oneWayDelaySeconds ?? null) : null,
      probeLossRatio: probe ? probe.loaded.lossRatio.total : null,
      clock: probe?.clock ?? null,
    };
  });
}

/** Per `latencyAt` fraction, its run's figures or why there are none. */
function latencyResults(spec: JobSpec, state: PointMlr): MlrLatency[] {
  return (spec.search!.latencyAt ?? []).map((fraction) => {
    const load = latencyLoad(state, fraction);
    const run = state.latencyRuns.get(fraction);
    const packetsPerSecond = 'packetsPerSecond' in load ? load.packetsPerSecond : null;
    const base = { fraction, goal: load.goal, packetsPerSecond: run ? (run.point.rate as { packetsPerSecond: number }).packetsPerSecond : packetsPerSecond };
    if (!run) return { ...base, runIndex: null, status: 'why' in load ? 'not_made' : 'pending', why: 'why' in load ? load.why : null, flows: [] };
    if (run.status !== 'succeeded') return { ...base, runIndex: run.index, status: 'failed', why: run.error ? `${run.error.code}: ${run.error.message}` : `the run ${run.status}`, flows: [] };
    return { ...base, runIndex: run.index, status: 'succeeded', why: null, flows: latencyFlows(spec, run) };
  });
}

/** A sweep point's label, or '' for a job without a sweep. */
const labelOf = (point: SweepPoint) => (Object.keys(basePoint(point)).length > 0 ? pointLabel(basePoint(point)) : '');

/** A rate per flow as the report gives it. */
function rateOf(packetsPerSecond: number | null, packetSize: number, flows: number): Rate {
  if (packetsPerSecond === null) return null;
  return { packetsPerSecond, bitsPerSecond: packetsPerSecond * packetSize * 8, wireBitsPerSecond: packetsPerSecond * (packetSize + WIRE_OVERHEAD_BYTES) * 8, totalPacketsPerSecond: packetsPerSecond * flows };
}

function voidReasonOf(reason: VoidReason): VoidTrialReason {
  switch (reason.kind) {
    case 'sender_short':
      return { kind: reason.kind, flow: reason.flow, achievedPacketsPerSecond: reason.achievedLoad, why: `flow ${reason.flow}'s sender offered ${reason.achievedLoad.toFixed(1)} of ${reason.intendedLoad.toFixed(1)} datagrams/s over the trial` };
    case 'sender_late':
      return { kind: reason.kind, lost: reason.lost, late: reason.late, why: `the trial lost ${reason.lost} datagrams and its senders sent ${reason.late} late (catching up after a stall): the loss may be their burst's, not the path's` };
    case 'receiver_socket_drops':
      return { kind: reason.kind, flow: reason.flow, drops: reason.drops, why: `flow ${reason.flow}'s receiving host dropped ${reason.drops} datagrams in its own sockets (Udp RcvbufErrors)` };
    case 'error':
      return { kind: reason.kind, why: reason.message };
  }
}

/** What the search found at each point, for the report. */
export function mlrSearchResults(spec: JobSpec, finished: Iterable<Run>): MlrSearchResult[] {
  const flows = spec.flows.length;
  // A bound is a grid load: as offered, whole datagrams/s. A trial's load already is (its run's rate).
  const offered = (load: number | null) => (load === null ? null : offeredRate(load));
  return mlrStates(spec, finished).map((state) => {
    const { point, packetSize, runs, outcome } = state;
    return {
      point, packetSize,
      state: outcome.state,
      stoppedBy: outcome.stoppedBy,
      limit: outcome.limit && { packetsPerSecond: offeredRate(outcome.limit.load), duration: outcome.limit.duration, attempts: outcome.limit.attempts, void: outcome.limit.reasons.map(voidReasonOf) },
      trialSeconds: outcome.trialSeconds,
      goals: outcome.goals.map((goal) => ({
        goal: shownGoal(goal.goal),
        relevantLowerBound: rateOf(offered(goal.relevantLowerBound), packetSize, flows),
        relevantUpperBound: rateOf(offered(goal.relevantUpperBound), packetSize, flows),
        conditionalThroughput: rateOf(conditionalPps(goal), packetSize, flows),
        conditionalLossRatio: goal.conditionalLossRatio,
        relativeWidth: goal.relativeWidth,
        regular: goal.regular,
        irregular: goal.irregular,
      })),
      trials: outcome.trials.map((trial) => ({
        runIndex: runs[trial.index]!.index,
        packetsPerSecond: trial.load,
        duration: trial.duration,
        purpose: trial.purpose,
        goal: trial.goal,
        attempt: trial.attempt,
        lossRatio: trial.lossRatio,
        forwardingRate: trial.forwardingRate,
        void: trial.void.map(voidReasonOf),
        goals: trial.goals,
      })),
      latency: latencyResults(spec, state),
    };
  });
}

/** Trials a search takes that has not ended: CSIT's NDR/PDR took 12–13 in the toy model; a guess for the progress total only. */
const TRIALS_PER_GOAL_GUESS = 6;

/**
 * The campaign of an MLRsearch job: one point's search to its end, then the next point's; the
 * plan index of a trial is its place in the job (the next free index).
 */
export class MlrSearchStrategy implements CampaignStrategy {
  constructor(private readonly spec: JobSpec) {}

  private readonly states = perFinishedRuns((finished) => mlrStates(this.spec, finished.values()));

  /** A point's trials to its search's end, then its latency runs (latencyAt), then the next point's. */
  next(finished: ReadonlyMap<number, Run>): PlannedRun | null {
    const index = finished.size === 0 ? 0 : Math.max(...finished.keys()) + 1;
    for (const state of this.states(finished)) {
      const trial = state.next;
      if (trial) return { index, point: { ...state.point, rate: { packetsPerSecond: offeredRate(trial.load) } }, repetition: state.runs.length + 1, duration: trial.duration };
      const latency = nextLatencyRun(this.spec, state, index);
      if (latency) return latency;
    }
    return null;
  }

  expectedRuns(finished: ReadonlyMap<number, Run>): number {
    const goals = (this.spec.search!.goals ?? NDR_PDR).length;
    const latency = (state: PointMlr) => (this.spec.search!.latencyAt ?? []).filter((f) => state.latencyRuns.has(f) || 'packetsPerSecond' in latencyLoad(state, f) || state.next !== null).length;
    return this.states(finished).reduce((sum, state) => sum + (state.next === null ? state.runs.length : Math.max(state.runs.length + 1, 1 + 3 + TRIALS_PER_GOAL_GUESS * goals)) + latency(state), 0);
  }

  /** A search that could not conclude fails the job, saying where and why; one that ended with irregular goals succeeded (the report says which). */
  outcome(finished: ReadonlyMap<number, Run>): ErrorInfo | null {
    const stuck = this.states(finished).find((state) => state.outcome.state === 'could_not_conclude');
    if (!stuck) return null;
    const at = labelOf(stuck.point) || 'its point';
    const { limit, stoppedBy } = stuck.outcome;
    const why = stoppedBy === 'void_trials' && limit
      ? `niclab could not make a trial at ${offeredRate(limit.load)} datagrams/s for ${limit.duration} s (${limit.attempts} attempts): ${voidReasonOf(limit.reasons[0]!).why}`
      : `its ${stuck.outcome.trialSeconds.toFixed(0)} trial-seconds reached searchDurationMax before every goal was`;
    return { code: 'search_inconclusive', message: `the search could not conclude at ${at}: ${why}` };
  }
}

/** Runs a job may make at most: every trial lasts a second at least, and the trial-seconds stop at searchDurationMax (one more trial may start before). */
function maxMlrRuns(spec: JobSpec): number {
  const seconds = spec.search!.searchDurationMax ?? MLR_DEFAULTS.searchDurationMax;
  return sweepPoints(spec).length * (Math.ceil(seconds / DURATION_QUANTUM) + 1 + (spec.search!.latencyAt?.length ?? 0));
}

const mbit = (bits: number) => (bits / 1e6).toFixed(2);
const percent = (ratio: number | null) => (ratio === null ? '-' : `${(ratio * 100).toPrecision(3)}%`);

/** Per point, every goal's result, then the trials in the order they ran. */
function mlrSearchTable(spec: JobSpec, searches: MlrSearchResult[]): string[] {
  const out = [`MLRsearch (draft-ietf-bmwg-mlrsearch, RFC 9971): ${(spec.search!.goals ?? NDR_PDR).length} goal(s) in one search; rates per flow`];
  for (const r of searches) {
    const at = labelOf(r.point);
    out.push('', `${at ? `${at}: ` : ''}${r.state}${r.stoppedBy ? ` (${r.stoppedBy})` : ''}, ${r.trials.length} trials, ${r.trialSeconds} trial-seconds, ${r.packetSize} B`);
    if (r.limit) out.push(`niclab's limit, not the path's: ${r.limit.void.map((v) => v.why).join('; ')}`);
    out.push(alignTable([
      ['goal', 'loss', 'exceed', 'width', 'lower pps', 'upper pps', 'cond. pps', 'payload Mbit/s', 'wire Mbit/s', 'result'],
      ...r.goals.map((g, i) => [
        String(i), percent(g.goal.lossRatio), percent(g.goal.exceedRatio ?? null), percent(g.goal.width ?? null),
        g.relevantLowerBound ? String(g.relevantLowerBound.packetsPerSecond) : '-', g.relevantUpperBound ? String(g.relevantUpperBound.packetsPerSecond) : '-',
        g.conditionalThroughput ? g.conditionalThroughput.packetsPerSecond.toFixed(1) : '-', g.conditionalThroughput ? mbit(g.conditionalThroughput.bitsPerSecond) : '-',
        g.conditionalThroughput ? mbit(g.conditionalThroughput.wireBitsPerSecond) : '-', g.regular ? 'regular' : `irregular (${g.irregular})`,
      ]),
    ]));
    out.push(alignTable([['run', 'offered pps', 's', 'purpose', 'loss %', 'high-loss for', 'void'], ...r.trials.map((t) => [
      String(t.runIndex), String(t.packetsPerSecond), String(t.duration), t.purpose + (t.goal === null ? '' : ` (goal ${t.goal})`), (t.lossRatio * 100).toFixed(3),
      t.goals ? t.goals.flatMap((g, i) => (g.highLoss ? [String(i)] : [])).join(',') || '-' : 'not counted', t.void.map((v) => v.kind).join(', ') || '-',
    ])]));
    if (r.latency.length > 0) out.push(...latencyTable(r.latency));
  }
  return out;
}

const ms = (seconds: number | null | undefined) => (seconds === null || seconds === undefined ? '-' : (seconds * 1e3).toFixed(3));

/** The latency probe at each fraction of the PDR: a row per flow (one run per fraction). */
function latencyTable(latency: MlrLatency[]): string[] {
  const rows = latency.flatMap((l) => (l.flows.length === 0
    ? [[`${(l.fraction * 100).toPrecision(3)}%`, l.packetsPerSecond === null ? '-' : String(l.packetsPerSecond), '-', '-', '-', '-', '-', '-', `${l.status}${l.why ? `: ${l.why}` : ''}`]]
    : l.flows.map((f) => [
      `${(l.fraction * 100).toPrecision(3)}%`, String(l.packetsPerSecond), String(f.flow), f.lossRatio === null ? '-' : (f.lossRatio * 100).toFixed(3),
      ms(f.rttSeconds?.p50), ms(f.rttSeconds?.p90), ms(f.rttSeconds?.p99), ms(f.rttSeconds?.max), `run ${l.runIndex}${f.clock ? `, clock ${f.clock}` : ''}`,
    ])));
  return ['', 'latency at fractions of the PDR\'s conditional throughput (a probe beside each flow; round trips in ms)', alignTable([['at', 'offered pps', 'flow', 'loss %', 'RTT p50', 'p90', 'p99', 'max', ''], ...rows])];
}

/** The longest load any trial gets: a goal's final trial, or the warm-up, in whole seconds. */
function longestTrial(spec: JobSpec): number {
  const goals = (spec.search!.goals ?? NDR_PDR).map((goal) => goalOf(spec, goal));
  return Math.max(...goals.map((g) => Math.ceil(g.finalTrialDuration / DURATION_QUANTUM) * DURATION_QUANTUM), Math.ceil(spec.search!.warmupDuration ?? MLR_DEFAULTS.warmupDuration));
}

export const mlrSearch: Campaign = {
  ...NOTHING_MORE,
  name: 'mlr-search',
  longestRun: longestTrial,
  asks: isMlrSearch,
  specErrors: mlrSearchErrors,
  withDefaults: withMlrSearchDefaults,
  maxRuns: (spec) => ({ runs: maxMlrRuns(spec), by: 'points' }),
  strategy: (spec) => new MlrSearchStrategy(spec),
  reportedPoints: trialPoints,
  addsDimensions: ['rate'],
  reportSection: (job, finished) => ({ mlrSearches: mlrSearchResults(job.spec, finished) }),
  tableLines: (job, report) => ({ replacesPoints: true, lines: ['', ...mlrSearchTable(job.spec, report.mlrSearches ?? [])] }),
  // Each goal's Relevant Lower Bound, the highest load that met it, as the binary search's rate
  // found, and its Conditional Throughput: a series per goal (its loss and exceed ratios). A goal with no
  // lower bound leaves none.
  searchLinks: (job, finished) => mlrSearchResults(job.spec, finished).flatMap((result) => result.goals.flatMap((goal) =>
    pointSearchLinks(job, result.point, { algorithm: 'mlrsearch', target: goal.goal.lossRatio === 0 ? 'ndr' : 'pdr', loss_ratio: String(goal.goal.lossRatio), exceed_ratio: String(goal.goal.exceedRatio), packet_size: String(result.packetSize) }, goal.relevantLowerBound, goal.conditionalThroughput))),
  // Each goal's relevant bounds, and its conditional throughput as the rate compared.
  searchRates: (job, finished) => mlrSearchResults(job.spec, finished).flatMap((result) => result.goals.map((goal) => ({
    point: result.point, algorithm: 'mlrsearch', lossRatio: goal.goal.lossRatio, exceedRatio: goal.goal.exceedRatio ?? null,
    lower: goal.relevantLowerBound?.packetsPerSecond ?? null, upper: goal.relevantUpperBound?.packetsPerSecond ?? null, rate: goal.conditionalThroughput?.packetsPerSecond ?? null,
  }))),
};
