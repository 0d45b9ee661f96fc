/**
 * A rate search (RFC 2544 §26.1's binary search): per sweep point, the highest UDP rate a path
 * carries with no loss (NDR) or with at most a given loss ratio (PDR). Every trial is an
 * ordinary run at one offered rate; a rate passes only when all of its trials pass (the first
 * and `confirmations` more), and the search stops when the bracket between the highest
 * passing rate and the lowest failing one is within `resolutionPercent`.
 *
 * Everything here is a pure function of the spec and the runs finished so far, so a
 * coordinator that resumes a job (or the report) replays the same search from its runs.
 */
import type { Agent, ErrorInfo, FieldError, Job, JobSpec, Run, SweepPoint } from '../contract.js';
import type { components } from '../../generated/openapi.js';
import { legsOf, pointKey, pointLabel, sweepPoints, type PlannedRun } from '../plan.js';
import { udpPacketsPerSecond } from '../udp-rate.js';
import { kindOf } from '../test-kinds/index.js';
import { perFinishedRuns } from '../finished-runs.js';
import { alignTable } from '../text-table.js';
import { NOTHING_MORE, type Campaign, type CampaignStrategy, type SearchLabels, type SearchLink, type SearchValues } from './campaign.js';

export type RateSearchSpec = NonNullable<JobSpec['search']>;
export type SearchResult = components['schemas']['SearchResult'];
type Trial = SearchResult['trials'][number];
type Report = components['schemas']['Report'];

/** Bytes a datagram adds to its payload on an IPv4 Ethernet link: UDP 8, IPv4 20, Ethernet 14 + FCS 4, preamble 8, gap 12. */
export const WIRE_OVERHEAD_BYTES = 66;
/** A trial whose sender reached less than this share of the offered rate did not test that rate. */
export const SENDER_SHORTFALL = 0.99;
/** Failed runs (errors, not loss) at one point after which its search gives up. */
export const MAX_ERRORED_TRIALS = 3;

export const searchDefaults = { lossRatio: 0.001, resolutionPercent: 1, confirmations: 1, maxTrials: 40, min: { packetsPerSecond: 1000 } } as const;

/** Whether a search is an MLRsearch (campaigns/mlr-search.ts) rather than this binary search. */
export const isMlrSearch = (spec: JobSpec) => spec.search?.algorithm === 'mlrsearch';

/** The loss ratio a trial may show and still pass: 0 for NDR. */
export const allowedLoss = (search: RateSearchSpec) => (search.target === 'ndr' ? 0 : (search.lossRatio ?? searchDefaults.lossRatio));

/** What the schema cannot say about a search (either algorithm): the test it applies to, and its bounds at every point. */
export function searchScopeErrors(spec: JobSpec): FieldError[] {
  const search = spec.search!;
  const errors: FieldError[] = [];
  if (spec.protocol !== 'udp') errors.push({ field: 'body.search', message: 'applies to protocol "udp" only' });
  if (!kindOf(spec).searchable) errors.push({ field: 'body.search', message: `does not apply to test "${spec.test}"` });
  if (spec.sweep?.rate) errors.push({ field: 'body.sweep.rate', message: 'cannot be swept in a search: the search chooses the rates' });
  if (spec.repeat !== undefined && spec.repeat !== 1) errors.push({ field: 'body.repeat', message: 'must be 1 in a search: `search.confirmations` repeats a passing rate' });
  if (spec.udp && search.min && search.max) {
    for (const point of sweepPoints(spec)) {
      const packetSize = packetSizeAt(spec, point);
      if (udpPacketsPerSecond({ packetSize, rate: search.min }) > udpPacketsPerSecond({ packetSize, rate: search.max })) {
        errors.push({ field: 'body.search.min', message: `must not exceed max (at packetSize ${packetSize})` });
        break;
      }
    }
  }
  return errors;
}

/** A binary search's errors: its scope's, and the loss ratio only a PDR has. */
export function searchErrors(spec: JobSpec): FieldError[] {
  const search = spec.search!;
  const errors = searchScopeErrors(spec);
  if (search.lossRatio !== undefined && search.target !== 'pdr') errors.push({ field: 'body.search.lossRatio', message: 'applies to target "pdr" only' });
  return errors;
}

/**
 * The spec with its search's defaults filled in, so the stored job shows them (spec in, spec
 * out, as the other `with…` helpers): `max` depends on the inventory: it defaults to the
 * slowest sending interface's link speed (as payload bits/s, so above any rate the link
 * carries). An error names `search.max` where a sender's driver reports no speed.
 */
export function withSearchDefaults(spec: JobSpec, agents: Agent[]): { spec: JobSpec; errors: FieldError[] } {
  const { resolutionPercent, confirmations, maxTrials } = searchDefaults;
  const own = { algorithm: 'binary' as const, resolutionPercent, confirmations, maxTrials, ...(spec.search!.target === 'pdr' ? { lossRatio: searchDefaults.lossRatio } : {}), ...spec.search! };
  return withSearchBounds({ ...spec, search: own }, agents);
}

/** The spec with a search's `min` and `max` filled in (either algorithm): `max` from the inventory. */
export function withSearchBounds(spec: JobSpec, agents: Agent[]): { spec: JobSpec; errors: FieldError[] } {
  const search = { min: searchDefaults.min, ...spec.search! };
  const defaulted = { ...spec, search };
  if (search.max) return { spec: defaulted, errors: [] };
  const senders = sweepPoints(defaulted).flatMap((point) => legsOf(defaulted, point).map((leg) => leg.sender));
  const speeds = senders.map((end) => ({ end, speed: agents.find((a) => a.id === end.agent)?.interfaces.find((i) => i.name === end.interface)?.speedBitsPerSecond ?? null }));
  const unknown = speeds.find((s) => s.speed === null);
  if (unknown) return { spec: defaulted, errors: [{ field: 'body.search.max', message: `is required: ${unknown.end.agent}:${unknown.end.interface} reports no link speed` }] };
  return { spec: { ...defaulted, search: { ...search, max: { bitsPerSecond: Math.min(...speeds.map((s) => s.speed!)) } } }, errors: [] };
}

/** The sweep point a trial belongs to: its point without the offered rate. */
export function basePoint(point: SweepPoint): SweepPoint {
  const { rate: _rate, ...rest } = point;
  return rest;
}

/** The datagram size at a point. */
export const packetSizeAt = (spec: JobSpec, point: SweepPoint) => point.packetSize ?? spec.udp!.packetSize;

/** One trial's verdict from its run: every leg's loss within the target, every sender at the offered rate. */
export function judgeTrial(spec: JobSpec, run: Run): Trial {
  const search = spec.search!;
  const offered = run.point.rate && 'packetsPerSecond' in run.point.rate ? run.point.rate.packetsPerSecond : 0;
  const flows = run.flows.map((flow) => {
    const udp = flow.udp;
    const achieved = udp ? (udp.achievedPacketsPerSecond ?? udp.sent / spec.duration) : 0;
    return { lost: udp?.lost ?? 0, sent: udp?.sent ?? 0, lossRatio: udp?.lossRatio ?? 1, achievedPacketsPerSecond: achieved, ...(flow.bottleneck ? { bottleneck: flow.bottleneck.verdict } : {}) };
  });
  const limit = allowedLoss(search);
  const senderShort = flows.some((f) => f.achievedPacketsPerSecond < offered * SENDER_SHORTFALL);
  const lossy = flows.some((f) => (limit === 0 ? f.lost > 0 : f.lossRatio > limit));
  const passed = run.status === 'succeeded' && flows.length > 0 && !senderShort && !lossy;
  return {
    runIndex: run.index,
    packetsPerSecond: offered,
    passed,
    failedBy: passed ? null : run.status !== 'succeeded' ? 'error' : senderShort ? 'sender' : 'loss',
    lossRatio: Math.max(0, ...flows.map((f) => f.lossRatio)),
    flows,
  };
}

interface PointSearch {
  point: SweepPoint;
  key: string;
  /** Payload-rate bounds of the search at this point, in datagrams per second. */
  min: number;
  max: number;
  trials: Trial[];
  errored: number;
  /** Highest rate that passed all its trials (null: none yet). */
  low: number | null;
  /** Lowest rate that failed a trial (null: none yet). */
  high: number | null;
  /** The next rate to try, or null when the search at this point is over. */
  next: number | null;
  stoppedBy: SearchResult['stoppedBy'];
}

/** The search's settings with their defaults: trials a passing rate needs, resolution as a fraction, the trial cap. */
function settingsOf(search: RateSearchSpec): { need: number; resolution: number; maxTrials: number } {
  return {
    need: 1 + (search.confirmations ?? searchDefaults.confirmations),
    resolution: (search.resolutionPercent ?? searchDefaults.resolutionPercent) / 100,
    maxTrials: search.maxTrials ?? searchDefaults.maxTrials,
  };
}

/** Replays one point's search from its trials (in run order) and says what comes next. */
function replay(spec: JobSpec, point: SweepPoint, runs: Run[]): PointSearch {
  const search = spec.search!;
  const { need, resolution, maxTrials } = settingsOf(search);
  const size = packetSizeAt(spec, point);
  const min = Math.max(1, Math.round(udpPacketsPerSecond({ packetSize: size, rate: search.min ?? searchDefaults.min })));
  const max = Math.max(min, Math.round(udpPacketsPerSecond({ packetSize: size, rate: search.max! })));
  const state: PointSearch = { point, key: pointKey(point), min, max, trials: [], errored: 0, low: null, high: null, next: null, stoppedBy: null };
  const passes = new Map<number, number>();
  for (const run of runs) {
    const trial = judgeTrial(spec, run);
    state.trials.push(trial);
    const rate = trial.packetsPerSecond;
    if (trial.failedBy === 'error') {
      state.errored++;
    } else if (!trial.passed) {
      state.high = state.high === null ? rate : Math.min(state.high, rate);
      passes.delete(rate);
    } else {
      const count = (passes.get(rate) ?? 0) + 1;
      passes.set(rate, count);
      if (count >= need && (state.high === null || rate < state.high)) state.low = Math.max(state.low ?? 0, rate);
    }
  }
  // A rate that passed some of its trials and failed none is confirmed before anything else.
  const pending = [...passes].find(([rate, count]) => count < need && (state.high === null || rate < state.high) && rate > (state.low ?? 0));
  if (state.errored >= MAX_ERRORED_TRIALS) state.stoppedBy = 'errors';
  else if (state.low === max) state.stoppedBy = 'max';
  else if (state.high !== null && state.high <= min) state.stoppedBy = 'min';
  else if (state.trials.length >= maxTrials) state.stoppedBy = 'trials';
  else if (pending) state.next = pending[0];
  else if (state.high === null) state.next = max;
  else {
    const low = state.low ?? min;
    if ((state.high - low) / state.high <= resolution || state.high - low <= 1) {
      if (state.low !== null) state.stoppedBy = 'resolution';
      else state.next = min; // the bracket closed on `min`, which has not been tried yet
    } else {
      state.next = Math.round((low + state.high) / 2);
    }
  }
  return state;
}

/** Each sweep point with its trials, finished ones (failed runs included) in run order. */
export function trialsByPoint(spec: JobSpec, finished: Iterable<Run>): { point: SweepPoint; runs: Run[] }[] {
  const byBase = new Map<string, Run[]>();
  for (const run of [...finished].filter((r) => (r.status === 'succeeded' || r.status === 'failed') && r.latencyAt === undefined).sort((a, b) => a.index - b.index)) {
    const key = pointKey(basePoint(run.point));
    const list = byBase.get(key);
    if (list) list.push(run);
    else byBase.set(key, [run]);
  }
  return sweepPoints(spec).map((point) => ({ point, runs: byBase.get(pointKey(point)) ?? [] }));
}

/** Every point's search, from the finished runs (failed runs included: they count as errors). */
export function searchStates(spec: JobSpec, finished: Iterable<Run>): PointSearch[] {
  return trialsByPoint(spec, finished).map(({ point, runs }) => replay(spec, point, runs));
}

/** Trials a search of `min`..`max` at `resolutionPercent` takes at most when every rate passes first time. */
function estimatedTrials(spec: JobSpec, state: PointSearch): number {
  const { need, resolution, maxTrials } = settingsOf(spec.search!);
  const low = state.low ?? state.min;
  const high = state.high ?? state.max;
  const halvings = high > low ? Math.ceil(Math.log2(Math.max(1, (high - low) / Math.max(1, high * resolution)))) : 0;
  const left = state.stoppedBy ? 0 : (state.high === null ? 1 : 0) + halvings * need;
  return Math.min(maxTrials, state.trials.length + left);
}

/** What the search has found at each point, for the report. */
export function searchResults(spec: JobSpec, finished: Iterable<Run>): SearchResult[] {
  const search = spec.search!;
  const flows = spec.flows.length;
  return searchStates(spec, finished).map((state) => {
    const size = packetSizeAt(spec, state.point);
    const found = state.stoppedBy && state.stoppedBy !== 'errors' && state.low !== null ? state.low : null;
    // Where loss began: the lowest failing rate, and whether its sender fell short or datagrams were lost.
    const failing = state.trials.filter((t) => !t.passed && t.failedBy !== 'error' && t.packetsPerSecond === state.high);
    return {
      point: state.point,
      target: search.target!, // a binary search has one (the schema requires it)
      allowedLossRatio: allowedLoss(search),
      packetSize: size,
      found: found === null ? null : {
        packetsPerSecond: found,
        bitsPerSecond: found * size * 8,
        wireBitsPerSecond: found * (size + WIRE_OVERHEAD_BYTES) * 8,
        totalPacketsPerSecond: found * flows,
      },
      bracket: { low: state.low, high: state.high, min: state.min, max: state.max },
      limitedBy: failing[0]?.failedBy === 'sender' ? 'sender' : failing.length > 0 ? 'loss' : null,
      stoppedBy: state.stoppedBy,
      trials: state.trials,
    };
  });
}

/**
 * The campaign of a search job: one point's search to its end, then the next point's. The
 * plan index of a trial is its place in the job (the next free index), so a resumed job
 * replays its finished trials and goes on where it stopped.
 */
export class RateSearch implements CampaignStrategy {
  constructor(private readonly spec: JobSpec) {}

  /** Every point's search, replayed from the finished runs. */
  private readonly states = perFinishedRuns((finished) => searchStates(this.spec, finished.values()));

  next(finished: ReadonlyMap<number, Run>): PlannedRun | null {
    const states = this.states(finished);
    const current = states.find((s) => s.next !== null);
    if (!current) return null;
    const index = finished.size === 0 ? 0 : Math.max(...finished.keys()) + 1;
    return { index, point: { ...current.point, rate: { packetsPerSecond: current.next! } }, repetition: current.trials.length + 1 };
  }

  expectedRuns(finished: ReadonlyMap<number, Run>): number {
    return this.states(finished).reduce((sum, state) => sum + estimatedTrials(this.spec, state), 0);
  }

  /**
   * A trial that failed with an error is made again at its rate, so the job fails only where
   * a point's search gave up on errors (or every trial failed), not for one lost trial.
   */
  outcome(finished: ReadonlyMap<number, Run>): ErrorInfo | null {
    const gaveUp = this.states(finished).find((state) => state.stoppedBy === 'errors');
    if (!gaveUp) return null;
    const first = [...finished.values()].filter((r) => r.status === 'failed').sort((a, b) => a.index - b.index)[0]?.error;
    return { code: 'runs_failed', message: `the search gave up after ${MAX_ERRORED_TRIALS} trials failed with errors${first ? `; first: ${first.message}` : ''}` };
  }
}

/** Runs a search job may make at most (the submission's cap and progress total before it starts). */
export function maxSearchRuns(spec: JobSpec): number {
  return sweepPoints(spec).length * settingsOf(spec.search!).maxTrials;
}

/** A search's trial points: each sweep point's offered rates, lowest first. */
export function trialPoints(spec: JobSpec, finished: Run[]): SweepPoint[] {
  const order = new Map(sweepPoints(spec).map((point, i) => [pointKey(point), i]));
  // An MLRsearch's latency runs are no trials: their rate is no searched point.
  const distinct = new Map(finished.filter((run) => run.latencyAt === undefined).map((run) => [pointKey(run.point), run.point]));
  const rate = (point: SweepPoint) => (point.rate && 'packetsPerSecond' in point.rate ? point.rate.packetsPerSecond : 0);
  return [...distinct.values()].sort((a, b) => (order.get(pointKey(basePoint(a))) ?? 0) - (order.get(pointKey(basePoint(b))) ?? 0) || rate(a) - rate(b));
}

const mbit = (bits: number) => (bits / 1e6).toFixed(2);

/**
 * Seed 002's table: per point (direction × size, as swept) the rate found and where loss
 * began, then each point's trials in the order they ran.
 */
function searchTable(spec: JobSpec, searches: NonNullable<Report['searches']>): string[] {
  const search = spec.search!;
  const what = search.target === 'ndr' ? 'no-drop rate (NDR)' : `partial-drop rate (PDR, loss <= ${((search.lossRatio ?? 0) * 100).toPrecision(3)}%)`;
  const out = [`rate search: ${what}, resolution ${search.resolutionPercent ?? 1}%, ${search.confirmations ?? 1} confirming trial(s), ${spec.duration} s per trial; rates per flow`];
  const rows = [['point', 'size B', 'found pps', 'payload Mbit/s', 'wire Mbit/s', 'loss began pps', 'limited by', 'bottleneck at found', 'trials', 'stopped by']];
  const verdicts = (t: NonNullable<Report['searches']>[number]['trials'][number] | undefined) => (t ? [...new Set(t.flows.map((f) => f.bottleneck ?? '-'))].join(', ') : '-');
  for (const r of searches) {
    rows.push([
      pointLabel(basePoint(r.point)), String(r.packetSize),
      r.found ? String(r.found.packetsPerSecond) : '-', r.found ? mbit(r.found.bitsPerSecond) : '-', r.found ? mbit(r.found.wireBitsPerSecond) : '-',
      r.bracket.high === null ? '-' : String(r.bracket.high), r.limitedBy ?? '-',
      r.found ? verdicts(r.trials.findLast((t) => t.passed && t.packetsPerSecond === r.found!.packetsPerSecond)) : '-', String(r.trials.length), r.stoppedBy ?? 'searching',
    ]);
  }
  out.push(alignTable(rows));
  for (const r of searches) {
    out.push('', `trials at ${pointLabel(basePoint(r.point))}:`);
    out.push(alignTable([['run', 'offered pps', 'achieved pps', 'loss %', 'verdict', 'bottleneck'], ...r.trials.map((t) => [
      String(t.runIndex), String(t.packetsPerSecond), t.flows.length ? Math.round(Math.min(...t.flows.map((f) => f.achievedPacketsPerSecond))).toString() : '-',
      (t.lossRatio * 100).toFixed(3), t.passed ? 'pass' : `fail (${t.failedBy})`, verdicts(t),
    ])]));
  }
  return out;
}

/**
 * A rate found at a point as each of its links' latest search result: per direction of each
 * pair (a leg's sender is `src`), labelled by what the rate met. `rate` null: nothing found, no series.
 */
export function pointSearchLinks(job: Job, point: SweepPoint, what: Pick<SearchLabels, 'algorithm' | 'target' | 'loss_ratio' | 'exceed_ratio' | 'packet_size'>, rate: Omit<SearchValues, 'endedAt' | 'conditionalPacketsPerSecond'> | null, conditional?: { packetsPerSecond: number } | null): SearchLink[] {
  if (!rate) return [];
  const endedAt = Date.parse(job.finishedAt ?? new Date().toISOString()) / 1000;
  const { packetsPerSecond, bitsPerSecond, wireBitsPerSecond } = rate;
  const conditionalPacketsPerSecond = conditional?.packetsPerSecond;
  return legsOf(job.spec, point).map((leg) => ({
    labels: {
      src_agent: leg.sender.agent, src_interface: leg.sender.interface, dst_agent: leg.receiver.agent, dst_interface: leg.receiver.interface,
      engine: job.spec.engine, ...what, schedule: job.spec.labels?.schedule ?? '',
    },
    values: { packetsPerSecond, bitsPerSecond, wireBitsPerSecond, ...(conditionalPacketsPerSecond === undefined ? {} : { conditionalPacketsPerSecond }), endedAt },
  }));
}

export const rateSearch: Campaign = {
  ...NOTHING_MORE,
  name: 'rate-search',
  asks: (spec) => spec.search !== undefined && !isMlrSearch(spec),
  specErrors: searchErrors,
  withDefaults: withSearchDefaults,
  maxRuns: (spec) => ({ runs: maxSearchRuns(spec), by: 'points' }),
  strategy: (spec) => new RateSearch(spec),
  // Its points are the rates it tried: each is repeated only to confirm it.
  reportedPoints: trialPoints,
  addsDimensions: ['rate'],
  reportSection: (job, finished) => ({ searches: searchResults(job.spec, finished) }),
  // Its trials are listed in its own table, not as one nttcp block each.
  tableLines: (job, report) => ({ replacesPoints: true, lines: ['', ...searchTable(job.spec, report.searches ?? [])] }),
  // The rate found at each point; a point that found nothing leaves no series.
  searchLinks: (job, finished) => searchResults(job.spec, finished).flatMap((result) =>
    pointSearchLinks(job, result.point, { algorithm: 'binary', target: result.target, loss_ratio: String(result.allowedLossRatio), exceed_ratio: '', packet_size: String(result.packetSize) }, result.found)),
  // Its bracket: the rate found (the highest that passed) below the lowest that failed; the
  // rate compared is what it forwarded there, as an MLRsearch's conditional throughput is: the
  // rate found less the worst loss of its trials at that rate.
  searchRates: (job, finished) => searchResults(job.spec, finished).map((result) => {
    const found = result.found?.packetsPerSecond ?? null;
    const lossThere = Math.max(0, ...result.trials.filter((t) => t.packetsPerSecond === found && t.passed).map((t) => t.lossRatio));
    return { point: result.point, algorithm: 'binary', lossRatio: result.allowedLossRatio, exceedRatio: null, lower: found, upper: result.bracket.high, rate: found === null ? null : found * (1 - lossThere) };
  }),
};
