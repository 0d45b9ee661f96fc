import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { ApiClient } from '../helpers/api-client.js';
import { startNiclab, type TestNiclab } from '../helpers/niclab.js';
import { spawnNiclab, waitFor, type NiclabProcess, waitForApi } from '../helpers/processes.js';
import { freePort } from '../helpers/redis.js';

let niclab: TestNiclab;
let client: ApiClient;
const extra: NiclabProcess[] = [];
const lo = { agent: 'sched', interface: 'lo' };
const spec = (duration: number) => ({ duration, interval: 0.5, flows: [{ from: lo, to: lo }] });

before(async () => {
  niclab = await startNiclab(['sched']);
  client = niclab.client;
});

after(async () => {
  await Promise.all(extra.map((p) => p.stop()));
  await niclab?.stop();
});

interface JobRow { id: string; status: string; startedAt: string | null; finishedAt: string | null; spec: { labels?: Record<string, string> } }
async function jobsOf(schedule: string): Promise<JobRow[]> {
  const { body } = await client.call('listJobs', 'GET', '/v1/jobs?limit=200');
  return (body.items as JobRow[]).filter((j) => j.spec.labels?.schedule === schedule).reverse();
}
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('bad schedules are refused, naming the field', async () => {
  const cases: [unknown, number, string][] = [
    [{ name: 'x1', spec: spec(1) }, 422, 'body.cron'],
    [{ name: 'x2', cron: '*/5 * * * *', everySeconds: 5, spec: spec(1) }, 422, 'body.cron'],
    [{ name: 'x3', cron: 'not a cron at all', spec: spec(1) }, 422, 'body.cron'],
    [{ name: 'x4', cron: '0 2 * * *', timezone: 'Mars/Olympus', spec: spec(1) }, 422, 'body.timezone'],
    [{ name: 'x5', everySeconds: 60, spec: { ...spec(1), flows: [{ from: lo, to: { agent: 'nobody', interface: 'lo' } }] } }, 422, 'body.spec.flows[0].to.agent'],
    [{ name: 'Bad Name', everySeconds: 60, spec: spec(1) }, 422, 'body.name'],
    [{ name: 'x6', everySeconds: 0, spec: spec(1) }, 422, 'body.everySeconds'],
  ];
  for (const [body, status, field] of cases) {
    const res = await client.call('createSchedule', 'POST', '/v1/schedules', body);
    assert.equal(res.status, status, JSON.stringify(body));
    assert.ok(res.body.errors.some((e: { field: string }) => e.field === field), `${JSON.stringify(res.body.errors)} should name ${field}`);
  }
  assert.deepEqual((await client.call('listSchedules', 'GET', '/v1/schedules')).body.items, [], 'nothing was half-created');
  const cron = await client.call('createSchedule', 'POST', '/v1/schedules', { name: 'nightly', cron: '0 2 * * *', timezone: 'Europe/Berlin', spec: spec(1) });
  assert.equal(cron.status, 201);
  assert.equal(cron.body.timezone, 'Europe/Berlin');
  // 02:00 in Berlin is 00:00 or 01:00 UTC (summer or winter time).
  assert.match(cron.body.nextFireAt, /T0[01]:00:00\.000Z$/);
  assert.equal((await client.call('createSchedule', 'POST', '/v1/schedules', { name: 'nightly', everySeconds: 60, spec: spec(1) })).status, 409);
  assert.equal((await client.call('deleteSchedule', 'DELETE', '/v1/schedules/nightly')).status, 204);
  assert.equal((await client.call('getSchedule', 'GET', '/v1/schedules/nightly')).status, 404);
});

/** The first test's period and how many periods it watches: a firing's job (1 s) ends well inside a period. */
const EVERY = 5;
const PERIODS = 6;

test(`every ${EVERY} s for ${PERIODS} periods, across an API restart and beside a second replica: each firing once`, async (ctx) => {
  const port = await freePort();
  extra.push(spawnNiclab(['api', '--no-coordinator'], { ...niclab.env, NICLAB_PORT: String(port) }));
  await waitForApi(`http://127.0.0.1:${port}`, 'the second replica');
  const created = await client.call('createSchedule', 'POST', '/v1/schedules', { name: 'every5', everySeconds: EVERY, spec: spec(1) });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const t0 = Date.now();
  const window = EVERY * PERIODS * 1000;
  // Restart the first API (and its coordinator) once a firing has been made; the replica keeps
  // taking firings meanwhile.
  await waitFor('the first firing', async () => (await jobsOf('every5')).length > 0, (EVERY + 10) * 1000);
  await niclab.api.stop();
  const restarted = spawnNiclab(['api'], niclab.env);
  extra.push(restarted);
  await waitForApi(client.base, 'the restarted API');
  await sleep(Math.max(0, window - (Date.now() - t0)));
  await client.call('pauseSchedule', 'POST', '/v1/schedules/every5/pause');
  const schedule = (await client.call('getSchedule', 'GET', '/v1/schedules/every5')).body;
  const jobs = await jobsOf('every5');
  const times = jobs.map((j) => Date.parse(j.spec.labels!.scheduledFor!));
  ctx.diagnostic(`${jobs.length} jobs in ${window / 1000} s; firings ${schedule.firings}, skipped ${schedule.skipped}; scheduled for +${times.map((t) => ((t - t0) / 1000).toFixed(1)).join(', +')} s`);
  // Every slot of the window fired once: as a job, or skipped (counted) while the previous job
  // was still at work, which a loaded machine can make last longer than a period.
  assert.ok(jobs.length + schedule.skipped >= PERIODS - 1 && jobs.length + schedule.skipped <= PERIODS + 1, `${jobs.length} jobs and ${schedule.skipped} skipped in ${window / 1000} s at ${EVERY} s`);
  assert.ok(jobs.length >= 2, `${jobs.length} jobs`);
  assert.equal(schedule.firings, jobs.length, 'every firing made one job');
  assert.equal(new Set(times).size, times.length, 'no firing time twice: no duplicates between replicas');
  let missing = 0;
  for (let i = 1; i < times.length; i++) {
    const gap = (times[i]! - times[i - 1]!) / (EVERY * 1000);
    assert.ok(Number.isInteger(gap) && gap >= 1, `firings ${EVERY} s apart, or a whole number of periods: ${gap} periods`);
    missing += gap - 1;
  }
  assert.ok(missing <= schedule.skipped, `${missing} slots between the jobs made none; ${schedule.skipped} firings were counted skipped`);
  await waitFor('the last job to end', async () => (await jobsOf('every5')).every((j) => j.status === 'succeeded'), 30_000);
  assert.equal(schedule.paused, true);
  assert.equal(schedule.nextFireAt, null);
});

test('a firing while the previous job still runs is skipped and counted; pause stops it, resume starts it again', async () => {
  // Firings every second, a job of 3 s: at least two firings fall inside each job.
  assert.equal((await client.call('createSchedule', 'POST', '/v1/schedules', { name: 'busy', everySeconds: 1, spec: spec(3) })).status, 201);
  await waitFor('two firings skipped', async () => (await client.call('getSchedule', 'GET', '/v1/schedules/busy')).body.skipped >= 2, 20_000, 200);
  assert.equal((await client.call('pauseSchedule', 'POST', '/v1/schedules/busy/pause')).body.paused, true);
  await waitFor('its jobs to end', async () => (await jobsOf('busy')).every((j) => j.status === 'succeeded'), 30_000);
  // A firing already taken when the pause came still completes; read the counts after it.
  const paused = (await client.call('getSchedule', 'GET', '/v1/schedules/busy')).body;
  assert.ok(paused.skipped >= 2, `skipped ${paused.skipped}`);
  const jobs = await jobsOf('busy');
  assert.equal(jobs.length, paused.firings);
  for (let i = 1; i < jobs.length; i++) assert.ok(Date.parse(jobs[i]!.startedAt!) >= Date.parse(jobs[i - 1]!.finishedAt!), 'never two at once');
  // Two periods paused: a firing would have come by now.
  await sleep(2_000);
  assert.equal((await client.call('getSchedule', 'GET', '/v1/schedules/busy')).body.firings, paused.firings, 'paused: no firing');
  const resumed = (await client.call('resumeSchedule', 'POST', '/v1/schedules/busy/resume')).body;
  assert.equal(resumed.paused, false);
  assert.ok(resumed.nextFireAt);
  await waitFor('a firing after resume', async () => (await client.call('getSchedule', 'GET', '/v1/schedules/busy')).body.firings > paused.firings, 10_000);
  assert.equal((await client.call('deleteSchedule', 'DELETE', '/v1/schedules/busy')).status, 204);
});
