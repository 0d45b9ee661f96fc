/**
 * Recurring jobs. A schedule is our record (its definition and counts) plus a BullMQ job
 * scheduler that fires it: BullMQ makes one job per firing time whatever the number of API
 * replicas, and any replica's worker takes it. A firing whose previous job is still queued
 * or running is skipped and counted, never stacked.
 */
import { randomUUID } from 'node:crypto';
import { Queue, Worker, type Job as BullJob } from 'bullmq';
import type { Redis } from 'ioredis';
import type { ErrorInfo, FieldError, Job, JobRequest, JobSpec } from '@niclab/shared/domain/contract';
import { asRequest, expandSpec } from '@niclab/shared/domain/groups';
import type { components } from '@niclab/shared/generated/openapi';
import type { Keys } from '@niclab/shared/stores/keys';
import type { Logger } from '@niclab/shared/runtime/logger';
import { HttpProblem } from '@niclab/shared/runtime/problem';
import { ScheduleStore, type ScheduleInput } from '@niclab/shared/stores/schedule-store';
import { checkLimits } from './access.js';
import { principalNamed, type Policy, type Principal } from './policy.js';
import { submissionErrors, submitJob, withDefaults, type SubmitDeps } from './submission.js';

export type Schedule = components['schemas']['Schedule'];
export type { ScheduleInput };
type Firing = { schedule: string };

const QUEUE = 'schedules';

export class Schedules {
  readonly queue: Queue<Firing>;
  private readonly store: ScheduleStore;
  private worker: Worker<Firing> | undefined;
  private workerRedis: Redis | undefined;

  constructor(
    private readonly redis: Redis,
    private readonly keys: Keys,
    private readonly services: SubmitDeps,
    private readonly policy: Policy,
  ) {
    this.queue = new Queue<Firing>(QUEUE, { connection: redis, prefix: keys.bull });
    this.store = new ScheduleStore(redis, keys);
  }

  /** Takes firings (every API replica does; each firing goes to one). */
  start(log: Logger): void {
    // The worker's blocking connection is ours: BullMQ does not close a connection it was given.
    this.workerRedis = this.redis.duplicate({ maxRetriesPerRequest: null });
    this.worker = new Worker<Firing>(QUEUE, (job) => this.fire(job), { connection: this.workerRedis, prefix: this.keys.bull, concurrency: 4 });
    // BullMQ reports every reconnect attempt while Redis is away: one line per 30 s is enough.
    let quietUntil = 0;
    this.worker.on('error', (error) => {
      if (Date.now() < quietUntil) return;
      quietUntil = Date.now() + 30_000;
      log.warn({ err: error }, 'schedule worker: Redis unreachable, retrying');
    });
  }

  async close(): Promise<void> {
    await this.worker?.close();
    await this.queue.close();
    // Left open, it reconnects forever once Redis is gone, and its process never exits.
    this.workerRedis?.disconnect();
  }

  private repeatOptions(input: ScheduleInput) {
    return input.cron ? { pattern: input.cron, tz: input.timezone ?? 'UTC' } : { every: input.everySeconds! * 1000 };
  }

  async create(input: ScheduleInput, principal: Principal): Promise<Schedule> {
    const errors: FieldError[] = [];
    if ((input.cron === undefined) === (input.everySeconds === undefined)) errors.push({ field: 'body.cron', message: 'give either cron or everySeconds' });
    if (input.timezone !== undefined && !input.cron) errors.push({ field: 'body.timezone', message: 'applies to cron only' });
    if (input.timezone !== undefined && !validTimeZone(input.timezone)) errors.push({ field: 'body.timezone', message: `"${input.timezone}" is not a time zone (e.g. Europe/Berlin, UTC)` });
    const registered = await this.services.agents.list();
    // A group is checked as it expands now, and kept as a group: each firing expands it again.
    const expanded = expandSpec(input.spec, registered);
    const spec = withDefaults(expanded.spec);
    checkLimits(spec, principal, { agents: registered }, 'body.spec');
    errors.push(...[...expanded.errors, ...submissionErrors(spec, registered)].map((e) => ({ ...e, field: e.field.replace(/^body/, 'body.spec') })));
    if (errors.length > 0) throw HttpProblem.invalid(errors, 'The schedule cannot run as specified.');
    const definition = { ...input, spec: asRequest(spec), timezone: input.cron ? (input.timezone ?? 'UTC') : undefined };
    if (!(await this.store.create(definition, principal.name))) throw new HttpProblem(409, 'schedule-exists', `A schedule named ${input.name} exists.`);
    try {
      await this.queue.upsertJobScheduler(input.name, this.repeatOptions(definition), { name: 'firing', data: { schedule: input.name } });
    } catch (error) {
      await this.store.remove(input.name);
      throw HttpProblem.invalid([{ field: 'body.cron', message: `is not a cron expression BullMQ accepts: ${(error as Error).message}` }]);
    }
    return (await this.get(input.name))!;
  }

  async get(name: string): Promise<Schedule | null> {
    const row = await this.store.get(name);
    if (!row) return null;
    const { definition } = row;
    const scheduler = row.paused ? undefined : await this.queue.getJobScheduler(name);
    return {
      name,
      owner: row.owner,
      cron: definition.cron ?? null,
      timezone: definition.timezone ?? null,
      everySeconds: definition.everySeconds ?? null,
      spec: definition.spec,
      paused: row.paused,
      createdAt: row.createdAt,
      nextFireAt: scheduler?.next ? new Date(scheduler.next).toISOString() : null,
      firings: row.firings,
      skipped: row.skipped,
      refused: row.refused,
      lastJobId: row.lastJobId,
      lastFiredAt: row.lastFiredAt,
    };
  }

  async list(): Promise<Schedule[]> {
    const names = await this.store.names();
    return (await Promise.all(names.map((n) => this.get(n)))).filter((s): s is Schedule => s !== null);
  }

  async remove(name: string): Promise<boolean> {
    if (!(await this.store.get(name))) return false;
    await this.queue.removeJobScheduler(name);
    await this.store.remove(name);
    return true;
  }

  async setPaused(name: string, paused: boolean): Promise<Schedule | null> {
    const schedule = await this.get(name);
    if (!schedule) return null;
    if (paused) await this.queue.removeJobScheduler(name);
    else {
      const { definition } = (await this.store.get(name))!;
      await this.queue.upsertJobScheduler(name, this.repeatOptions(definition), { name: 'firing', data: { schedule: name } });
    }
    await this.store.setPaused(name, paused);
    return this.get(name);
  }

  /** One firing: an ordinary job labelled with the schedule, unless its previous job is still at work. */
  private async fire(firing: BullJob<Firing>): Promise<void> {
    const name = firing.data.schedule;
    const row = await this.store.get(name);
    if (!row || row.paused) return;
    const log = this.services.log.child({ schedule: name });
    const previous = row.lastJobId ? await this.services.store.get(row.lastJobId) : null;
    if (previous && (previous.status === 'queued' || previous.status === 'running')) {
      await this.store.skipped(name);
      log.info({ previousJobId: previous.id, status: previous.status }, 'firing skipped: the previous job is still at work');
      return;
    }
    const { definition, owner } = row;
    const scheduledFor = new Date(firing.timestamp + (firing.opts.delay ?? 0)).toISOString();
    const spec: JobRequest = { ...definition.spec, labels: { ...definition.spec.labels, schedule: name, scheduledFor } };
    // The owner's token as the policy has it (read at the API's start), against the group as it expands now.
    const principal = principalNamed(this.policy, owner);
    const outcome = !principal
      ? await this.refusedFiring(spec, 'token', `token ${owner} is no longer in the policy`)
      : principal.scope === 'read'
        ? await this.refusedFiring(spec, 'scope', `token ${owner} may only read now (a firing runs a job: scope run)`)
        : await submitJob(this.services, spec, { principal, firing: true });
    // A spec that no longer runs (an agent gone, a group grown past a limit) still leaves a visible, failed job.
    let job: Job;
    if ('job' in outcome) job = outcome.job;
    else if (outcome.limit) {
      job = await this.failedJob(outcome, owner, { code: 'over_limit', message: `the owner's policy refuses this firing (${outcome.limit}): ${describe(outcome.errors)}` });
      await this.store.fired(name, job.id, 'refused');
      log.warn({ jobId: job.id, rule: outcome.limit, errors: outcome.errors }, 'firing refused by the owner\'s policy');
      return;
    } else job = await this.failedJob(outcome, owner, { code: 'not_runnable', message: `the schedule's spec cannot run now: ${describe(outcome.errors)}` });
    await this.store.fired(name, job.id);
  }

  /** A firing the owner's token no longer allows (gone from the policy, or read-only now): refused, its spec expanded as a job's would be. */
  private async refusedFiring(spec: JobRequest, limit: string, message: string) {
    const { spec: expanded, expansion } = expandSpec(spec, await this.services.agents.list());
    return { spec: withDefaults(expanded), expansion, limit, errors: [{ field: 'owner', message }] };
  }

  private async failedJob(outcome: { spec: JobSpec; expansion?: Job['expansion'] }, owner: string, error: ErrorInfo) {
    const { store } = this.services;
    const id = randomUUID();
    await store.createWithin(id, outcome.spec, { runsTotal: 0, owner, expansion: outcome.expansion });
    await store.transition(id, ['queued'], 'failed', { finishedAt: new Date().toISOString(), error });
    return (await store.get(id))!;
  }
}

const describe = (errors: FieldError[]) => errors.map((e) => `${e.field} ${e.message}`).join('; ');

function validTimeZone(zone: string): boolean {
  try {
    new Intl.DateTimeFormat('en', { timeZone: zone });
    return true;
  } catch {
    return false;
  }
}

