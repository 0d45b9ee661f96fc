/**
 * Change points, found as each run ends (the coordinator's job store calls runEnded): every
 * series the run extends gets its point, and detection (domain/changes/detect.ts) reads the
 * series' last HISTORY points. A step not seen before is stored with what changed in the
 * environment between the runs on either side of it.
 *
 * In Redis: each series as a capped list of {run, time, value, environment digest}; each
 * distinct environment once, by digest; change points as JSON by id, indexed by when they
 * were found. A change point already stored (the same series, its first run after the step
 * within EDGE runs of the new one's) is not raised again, acknowledged or not.
 */
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Job, Run } from '../domain/contract.js';
import { CHANGE_DEFAULTS, HISTORY, steps, type ChangeOptions } from '../domain/changes/detect.js';
import { campaignOf } from '../domain/campaigns/index.js';
import { canonical, environmentChanges, flowEnvironments, higherIsBetter, searchSeriesOf, seriesOf, unitOf, type FlowEnvironment, type SeriesId } from '../domain/changes/series.js';
import type { components } from '../generated/openapi.js';
import type { JobObserver } from './job-observer.js';
import type { Keys } from './keys.js';
import { summarizeRun } from './results.js';

export type ChangePoint = components['schemas']['ChangePoint'];
export type Acknowledgement = NonNullable<ChangePoint['acknowledged']>;
export type SeriesRun = components['schemas']['ChangeSeries']['points'][number];

/** A change point's labels in /metrics (bounded: schedules × 5 figures × 2 verdicts). */
export interface ChangeLabels {
  schedule: string;
  figure: string;
  verdict: string;
}
const labelsOf = (c: ChangePoint): ChangeLabels => ({ schedule: c.series.schedule, figure: c.series.figure, verdict: c.verdict });

/** How far (in runs) a step may move as more runs come in and still be the one already stored. */
const EDGE = 2;

interface SeriesPoint {
  /** Run id, its end (epoch ms), the value, the flow's environment digest. */
  r: string;
  t: number;
  v: number;
  e: string;
}

const digestOf = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 16);

export interface ChangeQuery {
  schedule?: string;
  agent?: string;
  interface?: string;
  figure?: string;
  /** Found at or after (epoch ms). */
  since: number;
  limit: number;
  /** The last id of the previous page. */
  after?: string;
}

export class ChangeStore implements JobObserver {
  constructor(private readonly redis: Redis, private readonly keys: Keys, private readonly options: ChangeOptions = CHANGE_DEFAULTS, private readonly now = () => Date.now()) {}

  async runEnded(job: Job, run: Run): Promise<void> {
    // A search's trials are not repetitions of one measurement: its series are its rates found (jobEnded).
    if (campaignOf(job.spec).searchRates) return;
    await this.extendAll(seriesOf(summarizeRun(job, run)), run, Date.parse(run.finishedAt ?? new Date().toISOString()));
  }

  /** A schedule's search that succeeded: its rate per point and loss goal, a point of each series, with its last trial's environment. */
  async jobEnded(job: Job, runs: () => Promise<Run[]>): Promise<void> {
    const campaign = campaignOf(job.spec);
    if (!campaign.searchRates || !job.spec.labels?.schedule || job.status !== 'succeeded') return;
    const all = await runs();
    const last = all.filter((r) => r.status === 'succeeded' && r.finishedAt).reduce<Run | undefined>((a, r) => (!a || Date.parse(r.finishedAt!) > Date.parse(a.finishedAt!) ? r : a), undefined);
    if (!last) return;
    await this.extendAll(searchSeriesOf(job, campaign.searchRates(job, all)), last, Date.parse(job.finishedAt ?? last.finishedAt!));
  }

  /** Adds each series' point, the run's environment (its first flow's, for a search) stored once by digest. */
  private async extendAll(extended: { id: SeriesId; value: number }[], run: Run, at: number): Promise<void> {
    if (extended.length === 0) return;
    const environments = flowEnvironments(run);
    const digests = new Map<number, string>();
    const multi = this.redis.multi();
    for (const [flowIndex, environment] of environments) {
      const text = canonical(environment);
      const digest = digestOf(text);
      digests.set(flowIndex, digest);
      multi.hsetnx(this.keys.changesEnvironments, digest, text);
    }
    await multi.exec();
    for (const { id, value } of extended) {
      await this.extend(id, { r: run.id, t: at, v: value, e: digests.get(id.flowIndex) ?? '' });
    }
  }

  /** Adds a point to its series and stores the steps detection finds that are new. */
  private async extend(id: SeriesId, point: SeriesPoint): Promise<void> {
    const text = canonical(id);
    const sid = digestOf(text);
    const key = this.keys.changesSeries(sid);
    const replies = await this.redis
      .multi()
      .hset(this.keys.changesSeriesIds, sid, text)
      .rpush(key, JSON.stringify(point))
      .ltrim(key, -HISTORY, -1)
      .lrange(key, 0, -1)
      .exec();
    const raw = (replies?.[3]?.[1] ?? []) as string[];
    const points = raw.map((p) => JSON.parse(p) as SeriesPoint);
    const found = steps(points.map((p) => p.v), this.options);
    if (found.length === 0) return;
    const known = new Set(await this.redis.hkeys(this.keys.changesKnown(sid)));
    for (const step of found) {
      const near = points.slice(Math.max(0, step.index - EDGE), step.index + EDGE + 1).map((p) => p.r);
      if (near.some((run) => known.has(run))) continue;
      const change = await this.changePoint(sid, id, points, step);
      // hsetnx: a second coordinator finding the same step at the same run stores it once.
      const stored = await this.redis.hsetnx(this.keys.changesKnown(sid), points[step.index]!.r, change.id);
      if (stored === 0) continue;
      known.add(points[step.index]!.r);
      const found = Date.parse(change.detectedAt);
      await this.redis
        .multi()
        .hset(this.keys.changesData, change.id, JSON.stringify(change))
        .zadd(this.keys.changesIndex, found, change.id)
        .zadd(this.keys.changesOpen, found, change.id)
        .hincrby(this.keys.changesCounts, JSON.stringify(labelsOf(change)), 1)
        .exec();
    }
  }

  private async changePoint(sid: string, id: SeriesId, points: SeriesPoint[], step: ReturnType<typeof steps>[number]): Promise<ChangePoint> {
    const [last, first] = [points[step.index - 1]!, points[step.index]!];
    const environment = async (p: SeriesPoint | undefined) => {
      const text = p?.e ? await this.redis.hget(this.keys.changesEnvironments, p.e) : null;
      return text ? (JSON.parse(text) as FlowEnvironment) : null;
    };
    // The runs on either side first; when they differ in nothing, one run further each way (a
    // step's run is certain to ±1).
    let changed = environmentChanges(await environment(last), await environment(first));
    if (changed.length === 0) changed = environmentChanges(await environment(points[step.index - 2]), await environment(points[step.index + 1]));
    const worse = higherIsBetter(id.figure) ? step.difference < 0 : step.difference > 0;
    return {
      id: `${sid}-${first.r}`,
      series: id,
      unit: unitOf(id.figure),
      verdict: worse ? 'worse' : 'better',
      before: { runId: last.r, finishedAt: new Date(last.t).toISOString(), mean: step.before.mean, runs: step.before.runs },
      after: { runId: first.r, finishedAt: new Date(first.t).toISOString(), mean: step.after.mean, runs: step.after.runs },
      difference: step.difference,
      differenceInterval: step.differenceInterval,
      relative: step.relative,
      relativeInterval: step.relativeInterval,
      pValue: step.pValue,
      changed,
      detectedAt: new Date(this.now()).toISOString(),
      acknowledged: null,
    };
  }

  /** A change point's series as detection reads it: its last HISTORY runs, oldest first. */
  async series(change: ChangePoint): Promise<SeriesRun[]> {
    const raw = await this.redis.lrange(this.keys.changesSeries(digestOf(canonical(change.series))), 0, -1);
    return raw.map((text) => {
      const p = JSON.parse(text) as SeriesPoint;
      return { runId: p.r, finishedAt: new Date(p.t).toISOString(), value: p.v };
    });
  }

  async get(id: string): Promise<ChangePoint | null> {
    const text = await this.redis.hget(this.keys.changesData, id);
    return text ? (JSON.parse(text) as ChangePoint) : null;
  }

  /** Marks a change point expected or a known regression; it is not raised again (its alert clears). */
  async acknowledge(id: string, as: Acknowledgement['as'], note: string, by: string): Promise<ChangePoint | null> {
    const change = await this.get(id);
    if (!change) return null;
    change.acknowledged = { as, note, by, at: new Date(this.now()).toISOString() };
    await this.redis.multi().hset(this.keys.changesData, id, JSON.stringify(change)).zrem(this.keys.changesOpen, id).exec();
    return change;
  }

  /** Oldest first from `since`, filtered; a page of `limit`, and the cursor of the next. */
  async query(q: ChangeQuery): Promise<{ items: ChangePoint[]; next: string | null }> {
    const start = q.after ? await this.redis.zscore(this.keys.changesIndex, q.after) : null;
    const ids = await this.redis.zrangebyscore(this.keys.changesIndex, start ?? q.since, '+inf');
    const from = q.after && start !== null ? ids.indexOf(q.after) + 1 : 0;
    const matches = (c: ChangePoint) =>
      (!q.schedule || c.series.schedule === q.schedule) &&
      (!q.figure || c.series.figure === q.figure) &&
      (!q.agent && !q.interface ? true : [c.series.src, c.series.dst].some((e) => (!q.agent || e.agent === q.agent) && (!q.interface || e.interface === q.interface)));
    const items: ChangePoint[] = [];
    for (let i = from; i < ids.length; i += 100) {
      const slice = ids.slice(i, i + 100);
      const texts = await this.redis.hmget(this.keys.changesData, ...slice);
      for (const text of texts) {
        if (!text) continue;
        const change = JSON.parse(text) as ChangePoint;
        if (!matches(change)) continue;
        if (items.length === q.limit) return { items, next: items.at(-1)!.id };
        items.push(change);
      }
    }
    return { items, next: null };
  }

  /**
   * Drops the change points found before `cutoff` (epoch ms) with their known-step entries
   * (their runs are long out of the series' last HISTORY); returns how many.
   */
  async expire(cutoff: number): Promise<number> {
    let dropped = 0;
    for (;;) {
      const ids = await this.redis.zrangebyscore(this.keys.changesIndex, '-inf', `(${cutoff}`, 'LIMIT', 0, 500);
      if (ids.length === 0) return dropped;
      const multi = this.redis.multi().hdel(this.keys.changesData, ...ids).zrem(this.keys.changesIndex, ...ids).zrem(this.keys.changesOpen, ...ids);
      // An id is `<series digest>-<first run after the step>`, the known map's key.
      for (const id of ids) multi.hdel(this.keys.changesKnown(id.slice(0, 16)), id.slice(17));
      await multi.exec();
      dropped += ids.length;
    }
  }

  /**
   * For /metrics: how many were ever found by schedule, figure and verdict (a counter, kept
   * through retention), and the open ones. A scrape reads the open change points only, not
   * every one kept.
   */
  async forMetrics(): Promise<{ found: { labels: ChangeLabels; count: number }[]; open: ChangePoint[] }> {
    const [counts, openIds] = await Promise.all([this.redis.hgetall(this.keys.changesCounts), this.redis.zrange(this.keys.changesOpen, 0, -1)]);
    const texts = openIds.length ? await this.redis.hmget(this.keys.changesData, ...openIds) : [];
    return {
      found: Object.entries(counts).map(([labels, count]) => ({ labels: JSON.parse(labels) as ChangeLabels, count: Number(count) })),
      open: texts.flatMap((t) => (t ? [JSON.parse(t) as ChangePoint] : [])),
    };
  }
}
