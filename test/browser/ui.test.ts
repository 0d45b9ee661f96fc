/**
 * /ui in a real browser (Debian's chromium, driven by playwright-core) against a real niclab
 * (API, agent and coordinator processes, a private Redis) that needs a token: the 401 path,
 * a job watched live then its report figure and downloads, a comparison, the agents' interfaces
 * and schedules. Each page leaves a screenshot in test-output/ui/ and may log no error.
 */
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { chromium, type Browser, type Page } from 'playwright-core';
import { newToken } from '@niclab/api/policy';
import { createRedis } from '@niclab/shared/runtime/redis';
import { jobStore } from '@niclab/shared/stores/job-queue';
import { Keys } from '@niclab/shared/stores/keys';
import { syntheticSchedule } from '../helpers/changes.js';
import { startNiclab, type TestNiclab } from '../helpers/niclab.js';
import { skipUnlessProvided } from '../helpers/skip.js';
import { markItems, parseSvg } from '../helpers/svg.js';

const CHROMIUM = '/usr/bin/chromium';
const skip = skipUnlessProvided(!existsSync(CHROMIUM) && `needs Debian's chromium at ${CHROMIUM} (apt-get install chromium)`);
const OUT = fileURLToPath(new URL('../../test-output/ui/', import.meta.url));
/** axe-core's browser build, run in each page for the accessibility scan. */
const AXE = fileURLToPath(new URL('../../node_modules/axe-core/axe.min.js', import.meta.url));

const user = newToken();
const lo = { agent: 'ui', interface: 'lo' };
const sweep = (duration: number) => ({ duration, interval: 0.25, retries: 2, sweep: { bufferLength: [8192, 65536] }, flows: [{ from: lo, to: lo }] });
let niclab: TestNiclab;
let browser: Browser;
let dir: string;

/** Records every text the job page's progress shows, so a test sees the steps it went through. */
const RECORD_PROGRESS = `window.progressSeen = [];
new MutationObserver(() => {
  const text = document.getElementById('job-progress-text')?.textContent;
  if (text && window.progressSeen.at(-1) !== text) window.progressSeen.push(text);
}).observe(document, { subtree: true, childList: true, characterData: true });`;

/** A page of its own (fresh session storage), the token in it unless asked not to, and its errors. */
async function open(hash: string, { token = true } = {}): Promise<{ page: Page; errors: string[] }> {
  const context = await browser.newContext({ viewport: { width: 1100, height: 800 }, acceptDownloads: true });
  if (token) await context.addInitScript({ content: `sessionStorage.setItem('niclab.token', ${JSON.stringify(user.token)})` });
  await context.addInitScript({ content: RECORD_PROGRESS });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on('console', (m) => void (m.type() === 'error' && errors.push(m.text())));
  page.on('pageerror', (e) => void errors.push(`page error: ${e.message}`));
  await page.goto(`${niclab.client.base}/ui#${hash}`);
  return { page, errors };
}

/** Screenshot, then no console error or uncaught exception but those `expected` names. */
async function close(page: Page, errors: string[], name: string, expected?: RegExp): Promise<void> {
  await mkdir(OUT, { recursive: true });
  await page.screenshot({ path: join(OUT, `${name}.png`), fullPage: true });
  await page.context().close();
  assert.deepEqual(errors.filter((e) => !expected?.test(e)), [], `console errors on ${name}`);
}

/** The SVG a figure holds, read as the API's own SVG tests read it. */
async function figure(page: Page, selector: string) {
  return parseSvg(await page.locator(`${selector} > svg`).evaluate((el) => new (globalThis as unknown as { XMLSerializer: new () => { serializeToString(n: unknown): string } }).XMLSerializer().serializeToString(el)));
}

const mbit = (label: string | undefined) => Number(String(label).replace(/,/g, ''));

describe('/ui in chromium', { skip }, () => {
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'niclab-ui-'));
    const policy = join(dir, 'policy.yaml');
    await writeFile(policy, `tokens:\n  - { name: lab, sha256: "${user.sha256}", scopes: [run] }\n`);
    // A second agent with the same label, so a mesh over rack=ui has pairs (ui -> ui2 and back).
    niclab = await startNiclab(['ui', 'ui2'], { NICLAB_POLICY_FILE: policy, NICLAB_SETUP_SECONDS: '10', NICLAB_AGENT_LABELS: 'rack=ui' }, user.token);
    browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-background-networking'] });
  });
  after(async () => {
    await browser?.close();
    await niclab?.stop();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  test('without a token the page says one is needed, a wrong one is refused, the right one from the field works', async () => {
    const { page, errors } = await open('/jobs', { token: false });
    const notice = page.locator('#notice');
    await notice.and(page.locator('[data-status="401"]')).waitFor();
    assert.match(await notice.textContent() ?? '', /needs a token/);
    await mkdir(OUT, { recursive: true });
    await page.screenshot({ path: join(OUT, '401.png'), fullPage: true });
    await page.fill('#token', 'not-a-token');
    await page.click('#token-form button[type=submit]');
    await page.locator('#notice', { hasText: 'refused' }).waitFor();
    await page.fill('#token', user.token);
    await page.click('#token-form button[type=submit]');
    await page.locator('#jobs').waitFor();
    assert.equal(await notice.isHidden(), true);
    assert.equal(await page.evaluate('sessionStorage.getItem("niclab.token")'), user.token);
    // chromium logs each refused request; nothing else may be logged.
    await close(page, errors, 'jobs-with-token', /status of 401/);
  });

  test('the agents page lists the local agent with its interfaces, as /v1/agents has them', async () => {
    const { body: agent } = await niclab.client.call('getAgent', 'GET', '/v1/agents/ui');
    const { page, errors } = await open('/agents');
    const section = page.locator('section[data-agent="ui"]');
    await section.waitFor();
    assert.match(await section.locator('h2').textContent() ?? '', /online/);
    const rows = await section.locator('table.interfaces tbody tr').evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    assert.deepEqual(rows.map((r) => r[0]), agent.interfaces.map((i: { name: string }) => i.name));
    const loRow = rows.find((r) => r[0] === 'lo')!;
    assert.equal(loRow[3], String(agent.interfaces.find((i: { name: string }) => i.name === 'lo').mtu));
    assert.equal(loRow[6], 'free');
    await close(page, errors, 'agents');
  });

  let watched: string;
  test('a running job updates live on the jobs list and its own page; done, it shows its figure and downloads', async () => {
    // Two 6 s runs: the agents page (read every 5 s) must find the lease held while a run is on, even
    // when a loaded machine shows the job running late.
    const submitted = await niclab.client.submit(sweep(6));
    assert.equal(submitted.status, 202);
    watched = submitted.body.id;
    const list = await open('/jobs');
    const job = await open(`/jobs/${watched}`);
    const row = list.page.locator(`tr[data-job="${watched}"]`);

    await job.page.locator('#job-status [data-status="running"]').waitFor({ timeout: 30_000 });
    await row.locator('[data-status="running"]').waitFor();
    // What is leased now: the running job holds lo.
    const agents = await open('/agents');
    await agents.page.locator('section[data-agent="ui"] .leased a', { hasText: watched.slice(0, 8) }).first().waitFor({ timeout: 10_000 });
    await close(agents.page, agents.errors, 'agents-leased');
    // The receiver's samples arrive as the run goes: the live chart gains points.
    // A function, not a string: the page's CSP (script-src 'self') refuses a string's eval when the wait has to poll.
    await job.page.waitForFunction(() => (globalThis as unknown as { document: { querySelectorAll(s: string): { length: number } } }).document.querySelectorAll('.live-chart circle.sample').length >= 3, undefined, { timeout: 15_000 });
    await job.page.screenshot({ path: join(OUT, 'job-running.png'), fullPage: true });
    await list.page.screenshot({ path: join(OUT, 'jobs-running.png'), fullPage: true });

    const { job: finished } = await niclab.client.finish(watched, 60_000);
    assert.equal(finished.status, 'succeeded');
    // The list polls every 5 s; within 2 s only the event stream can have said so.
    await row.locator('[data-status="succeeded"]').waitFor({ timeout: 2000 });
    assert.equal(await row.locator('td').nth(4).textContent(), '2/2');
    // What it found, beside its status, as soon as the stream said it ended (read then, not at
    // the list's next 5 s poll): the best point's total, in Mbit/s.
    const { finding } = finished;
    await row.locator('td.found', { hasText: `${(finding.value / 1e6).toFixed(2)} Mbit/s at bufferLength=${finding.point.bufferLength}` }).waitFor({ timeout: 1500 });
    assert.equal(await row.locator('td.verdict').textContent(), finding.verdict ?? '–');
    await job.page.locator('#job-status [data-status="succeeded"]').waitFor({ timeout: 2000 });
    const progress = await job.page.evaluate('window.progressSeen') as string[];
    assert.deepEqual(progress.slice(-2), ['1/2 runs', '2/2 runs'], `the progress shown: ${progress.join(', ')}`);

    await job.page.locator('#report-chart > svg').waitFor();
    const { body: report } = await niclab.client.call('getReport', 'GET', `/v1/jobs/${watched}/report`);
    const best = Math.max(...report.points.map((p: { total: { bitsPerSecond: { mean: number } } }) => p.total.bitsPerSecond.mean));
    assert.equal(finding.value, best, 'the list shows the best point of the report');
    const means = markItems(await figure(job.page, '#report-chart'), 'means', 'symbol');
    assert.equal(means.length, 2);
    for (const [i, p] of report.points.entries()) {
      assert.ok(Math.abs(mbit(means[i]!['throughput (Mbit/s)']) - p.flows[0].bitsPerSecond.mean / 1e6) <= 0.01 + 1e-3 * p.flows[0].bitsPerSecond.mean / 1e6, JSON.stringify(means[i]));
    }
    assert.equal(await job.page.locator('#report-table tbody tr').count(), 4, 'a row per point and flow, and a total per point');
    const [csv] = await Promise.all([job.page.waitForEvent('download'), job.page.click('#downloads button[data-path$="format=csv"]')]);
    assert.equal(csv.suggestedFilename(), `${watched}.csv`);
    const text = await readFile(await csv.path(), 'utf8');
    const expected = await (await fetch(`${niclab.client.base}/v1/jobs/${watched}/report?format=csv`, { headers: { authorization: `Bearer ${user.token}` } })).text();
    assert.equal(text, expected);
    await close(list.page, list.errors, 'jobs');
    await close(job.page, job.errors, 'job');
  });

  test('an iperf3 job offers each end\'s raw JSON for download', async () => {
    const done = await niclab.client.succeed({ engine: 'iperf3', duration: 1, flows: [{ from: lo, to: lo }] }, 60_000);
    const { page, errors } = await open(`/jobs/${done.id}`);
    await page.locator('#downloads').waitFor();
    const raw = page.locator('#downloads button', { hasText: 'iperf3 JSON' });
    assert.equal(await raw.count(), 2);
    const [file] = await Promise.all([page.waitForEvent('download'), raw.first().click()]);
    const json = JSON.parse(await readFile(await file.path(), 'utf8'));
    assert.ok(json.start && json.end, 'iperf3 --json output');
    await close(page, errors, 'job-iperf3');
  });

  test('compare: pick two jobs, see the A/B figure and the verdict per point the API gives', async () => {
    const other = await niclab.client.succeed(sweep(0.5), 60_000);
    const { body: comparison } = await niclab.client.call('compareJobs', 'GET', `/v1/compare?baseline=${watched}&candidate=${other.id}`);
    const { page, errors } = await open('/compare');
    await page.selectOption('#pick-baseline', watched);
    await page.selectOption('#pick-candidate', other.id);
    await page.click('#compare-form button[type=submit]');
    await page.locator('#compare-chart > svg').waitFor();
    assert.equal(markItems(await figure(page, '#compare-chart'), 'bars', 'rect').length, 4);
    const verdicts = await page.locator('#verdicts tbody tr td:last-child').allTextContents();
    assert.deepEqual(verdicts, comparison.points.map((p: { verdict: string }) => p.verdict));
    assert.equal(new URL(page.url()).hash, `#/compare?baseline=${watched}&candidate=${other.id}`);
    await close(page, errors, 'compare');
  });

  test('a group job\'s page shows its matrix as the heatmap and as a table, cell for cell as the report has it', async () => {
    const job = await niclab.client.succeed({ engine: 'builtin', protocol: 'tcp', duration: 0.5, flows: { shape: 'mesh', members: { labels: { rack: 'ui' }, interface: 'lo' } } }, 60_000);
    const { body: report } = await niclab.client.call('getReport', 'GET', `/v1/jobs/${job.id}/report`);
    const [matrix] = report.matrix;
    const { page, errors } = await open(`/jobs/${job.id}`);
    await page.locator('#matrix-table-0').waitFor();
    assert.equal(markItems(await figure(page, '#report-chart'), 'cells', 'rect').length, 2, 'the heatmap has a cell per pair');
    const rows = await page.locator('#matrix-table-0 tbody tr').evaluateAll((trs) => trs.map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent)));
    assert.deepEqual(rows.map((r) => r[0]), matrix.sources.map((e: { agent: string; interface: string }) => `${e.agent}:${e.interface}`));
    assert.deepEqual(await page.locator('#matrix-table-0 thead th').allTextContents(), ['from \\ to', ...matrix.destinations.map((e: { agent: string; interface: string }) => `${e.agent}:${e.interface}`)]);
    // Each cell is the report's mean in Mbit/s; a pair with itself has none.
    const expected = matrix.cells.map((row: ({ value: { mean: number } } | null)[]) => row.map((c) => (c ? (c.value.mean / 1e6).toFixed(2) : '')));
    assert.deepEqual(rows.map((r) => r.slice(1)), expected);
    assert.ok(expected.flat().filter(Boolean).length === 2, 'two measured pairs');
    assert.equal(await page.locator('#report-table').count(), 0, 'no empty per-flow table for a group');
    await close(page, errors, 'job-group');
  });

  test('the live chart keeps a line per leg of each run in progress, and drops a run once it has ended', async () => {
    const { page, errors } = await open('/agents');
    await page.locator('section[data-agent="ui"]').waitFor();
    // The page's own module, driven with interleaved samples of two parallel runs (a group's round).
    const lines = await page.evaluate(`(async () => {
      const { LiveChart } = await import('/ui/js/live-chart.js');
      const chart = new LiveChart();
      const seen = [];
      const count = () => [...chart.element.querySelectorAll('polyline')].map((l) => l.getAttribute('data-run') + '/' + l.getAttribute('data-leg') + ':' + l.getAttribute('points').split(' ').length);
      for (let i = 1; i <= 3; i++) {
        chart.add('run-a', 0, { end: i * 0.25, bitsPerSecond: 1e8 }, i * 250);
        chart.add('run-b', 0, { end: i * 0.25, bitsPerSecond: 2e8 }, i * 250 + 10);
        chart.add('run-b', 1, { end: i * 0.25, bitsPerSecond: 3e8 }, i * 250 + 20);
      }
      seen.push(count());
      // Run a ended; run c starts 5 s later while b still goes.
      chart.add('run-b', 0, { end: 4, bitsPerSecond: 2e8 }, 4000);
      chart.add('run-c', 0, { end: 0.25, bitsPerSecond: 1e8 }, 5000);
      seen.push(count());
      return seen;
    })()`) as string[][];
    assert.deepEqual(lines[0], ['run-a/0:3', 'run-b/0:3', 'run-b/1:3'], 'interleaved runs keep their own lines');
    assert.deepEqual(lines[1], ['run-b/0:4', 'run-b/1:3', 'run-c/0:1'], 'a run quiet for 3 s has ended; one still sending stays, all its legs');
    await close(page, errors, 'agents-live-chart');
  });

  test('the changes page lists a change point with its step and what changed; its own page draws the series with the step', async () => {
    // A schedule's history with a 10% step (synthetic runs saved as the coordinator saves them).
    const redis = createRedis(niclab.env.REDIS_URL!);
    try {
      const fire = syntheticSchedule(jobStore(redis, new Keys(niclab.env.NICLAB_PREFIX!)).store, 'ui-step');
      for (const mbit of [...Array<number>(12).fill(100), ...Array<number>(6).fill(90)]) await fire(mbit, mbit * 125_000);
    } finally {
      redis.disconnect();
    }
    const { items: [change] } = (await niclab.client.call('listChanges', 'GET', '/v1/changes?schedule=ui-step')).body as { items: { id: string; relative: number }[] };
    const { page, errors } = await open('/changes');
    const row = page.locator('#changes tbody tr', { hasText: 'ui-step' });
    await row.waitFor();
    const text = await row.textContent() ?? '';
    assert.match(text, new RegExp(`A:eth1 → B:eth1bitsPerSecond−${Math.abs(change!.relative * 100).toFixed(1)}% \\[.*\\] worse`));
    assert.match(text, /sender qdiscs\.8001:\.options\.rate: 12500000 → 11250000/);
    assert.match(text, /open$/);
    await row.locator('a').click();
    await page.locator('#change-chart > svg').waitFor();
    const svg = await figure(page, '#change-chart');
    assert.equal(markItems(svg, 'runs', 'symbol').length, 18);
    assert.equal(markItems(svg, 'means', 'rule').length, 2);
    assert.equal(markItems(svg, 'step', 'rule').length, 1);
    // The means as the change point was found: 4 runs after the step (minSegment), of the 6 since.
    assert.match(await page.locator('#change').textContent() ?? '', /100\.\d\d Mbit\/s over 12 runs, then (89|90)\.\d\d Mbit\/s over the 4 after it/);
    await close(page, errors, 'changes');
  });

  /** The job the form submitted: the keyboard test starts from its spec (#/new?from=ID). */
  let formJob: string;
  test('new job: flows from the live inventory, the spec shown and edited, submitted; it runs, its live chart and table appear', async () => {
    const { page, errors } = await open('/new');
    await page.locator('#f-flow-0-from option[value*="ui2"]').first().waitFor({ state: 'attached' });
    // Every interface the inventory has is offered, on both ends.
    const { body: agents } = await niclab.client.call('listAgents', 'GET', '/v1/agents');
    const offered = await page.locator('#f-flow-0-from option').allTextContents();
    assert.deepEqual(offered.sort(), agents.items.flatMap((a: { id: string; interfaces: { name: string; operstate: string }[] }) => a.interfaces.map((i) => `${a.id}:${i.name}${i.operstate === 'down' ? ' (down)' : ''}`)).sort());
    await page.selectOption('#f-flow-0-from', { label: 'ui:lo' });
    await page.selectOption('#f-flow-0-to', { label: 'ui:lo' });
    await page.fill('#f-duration', '3');
    await page.dispatchEvent('#f-duration', 'change');
    await page.selectOption('#f-protocol', 'tcp');
    const shown = JSON.parse(await page.inputValue('#f-spec'));
    assert.deepEqual([shown.duration, shown.protocol, shown.flows], [3, 'tcp', [{ from: lo, to: lo }]]);
    assert.equal(shown.udp, undefined, 'the UDP fields are off for TCP');
    // What the form has no field for is typed into the JSON: it is what is sent.
    await page.fill('#f-spec', JSON.stringify({ ...shown, interval: 0.25, labels: { from: 'ui-form' } }, null, 2));
    await page.dispatchEvent('#f-spec', 'change');
    // A field changed after that keeps what the JSON holds beyond the fields.
    await page.fill('#f-streams', '2');
    await page.dispatchEvent('#f-streams', 'change');
    const kept = JSON.parse(await page.inputValue('#f-spec'));
    assert.deepEqual([kept.streams, kept.interval, kept.labels], [2, 0.25, { from: 'ui-form' }]);
    await page.click('#job-submit');
    await page.waitForURL(/#\/jobs\/[0-9a-f-]{36}$/);
    const id = new URL(page.url()).hash.split('/')[2]!;
    const { body: stored } = await niclab.client.job(id);
    assert.deepEqual([stored.spec.duration, stored.spec.streams, stored.spec.interval, stored.spec.labels, stored.owner], [3, 2, 0.25, { from: 'ui-form' }, 'lab'], 'the job is the JSON sent, with the page\'s token');
    await page.waitForFunction(() => (globalThis as unknown as { document: { querySelectorAll(s: string): { length: number } } }).document.querySelectorAll('.live-chart circle.sample').length >= 3, undefined, { timeout: 30_000 });
    await page.locator('#report-table').waitFor({ timeout: 30_000 });
    const { body: report } = await niclab.client.call('getReport', 'GET', `/v1/jobs/${id}/report`);
    assert.equal(await page.locator('#report-table tbody tr').first().locator('td').nth(2).textContent(), (report.points[0].flows[0].bitsPerSecond.mean / 1e6).toFixed(2));
    assert.match(await page.textContent('#job-finding') ?? '', new RegExp(`^Found ${(report.points[0].total.bitsPerSecond.mean / 1e6).toFixed(2)} Mbit/s · verdict: `));
    // Repeat makes the same job again: a new id, the same spec.
    await page.click('#job-repeat');
    await page.waitForURL((url) => /#\/jobs\/[0-9a-f-]{36}$/.test(url.hash) && !url.hash.endsWith(id));
    const again = new URL(page.url()).hash.split('/')[2]!;
    formJob = id;
    assert.deepEqual((await niclab.client.job(again)).body.spec, stored.spec);
    await niclab.client.finish(again, 60_000);
    await close(page, errors, 'new-job');
  });

  test('a bad field shows the API\'s problem beside its control; a running job is canceled from its page', async () => {
    const { page, errors } = await open('/new');
    await page.locator('#f-flow-0-from option').first().waitFor({ state: 'attached' });
    await page.fill('#f-duration', '0.1');
    await page.dispatchEvent('#f-duration', 'change');
    const spec = JSON.parse(await page.inputValue('#f-spec'));
    await page.fill('#f-spec', JSON.stringify({ ...spec, flows: [{ from: lo, to: { agent: 'nobody', interface: 'lo' } }] }));
    await page.click('#job-submit');
    await page.locator('#problems li').first().waitFor();
    const listed = await page.locator('#problems li').evaluateAll((lis) => lis.map((li) => li.getAttribute('data-field')));
    assert.ok(listed.includes('body.duration'), listed.join());
    assert.equal(await page.getAttribute('#f-duration', 'aria-invalid'), 'true');
    assert.match(await page.textContent('#f-duration-error') ?? '', /0\.5/);
    assert.equal(new URL(page.url()).hash, '#/new', 'nothing was submitted');
    // Fixed duration: the API's next word is the unknown agent, on the flow's own control.
    await page.fill('#f-spec', JSON.stringify({ ...spec, duration: 1, flows: [{ from: lo, to: { agent: 'nobody', interface: 'lo' } }] }));
    await page.click('#job-submit');
    await page.locator('#problems li[data-field="body.flows[0].to.agent"]').waitFor();
    assert.match(await page.textContent('#f-flow-0-to-error') ?? '', /not registered/);
    // The edited JSON shows in the form: the flow's end is the one sent, said to be unknown.
    assert.equal(await page.locator('#f-flow-0-to option:checked').textContent(), 'nobody:lo (not registered)');
    assert.equal(await page.inputValue('#f-duration'), '1');
    assert.equal(await page.getAttribute('#f-duration', 'aria-invalid'), null, 'the earlier error is gone');
    await close(page, errors, 'new-job-problem', /status of 422/);

    const long = await niclab.client.submit({ duration: 60, flows: [{ from: lo, to: lo }] });
    const job = await open(`/jobs/${long.body.id}`);
    await job.page.locator('#job-status [data-status="running"]').waitFor({ timeout: 30_000 });
    await job.page.click('#job-cancel');
    await job.page.locator('#job-status [data-status="canceled"]').waitFor({ timeout: 10_000 });
    assert.equal((await niclab.client.job(long.body.id)).body.status, 'canceled');
    await job.page.locator('#job-repeat').waitFor();
    await close(job.page, job.errors, 'job-canceled');
  });

  test('schedules: created from the form, paused, resumed and deleted from the list', async () => {
    const { page, errors } = await open('/new');
    await page.locator('#f-flow-0-from option').first().waitFor({ state: 'attached' });
    await page.selectOption('#f-flow-0-from', { label: 'ui:lo' });
    await page.selectOption('#f-flow-0-to', { label: 'ui2:lo' });
    await page.fill('#s-name', 'from-the-page');
    await page.fill('#s-everySeconds', '3600');
    // Enter in a schedule field creates the schedule (the form's first button would submit a job).
    await page.press('#s-everySeconds', 'Enter');
    await page.waitForURL(/#\/schedules$/);
    const row = page.locator('#schedules tbody tr', { hasText: 'from-the-page' });
    await row.waitFor();
    const { body: made } = await niclab.client.call('getSchedule', 'GET', '/v1/schedules/from-the-page');
    assert.deepEqual([made.everySeconds, made.owner, made.spec.flows.length], [3600, 'lab', 1]);
    await row.locator('button[data-action="pause"]').click();
    await row.locator('td', { hasText: /^yes$/ }).waitFor();
    assert.equal((await niclab.client.call('getSchedule', 'GET', '/v1/schedules/from-the-page')).body.paused, true);
    await row.locator('button[data-action="resume"]').click();
    await row.locator('td', { hasText: /^no$/ }).waitFor();
    assert.equal((await niclab.client.call('getSchedule', 'GET', '/v1/schedules/from-the-page')).body.paused, false);
    page.once('dialog', (dialog) => void dialog.accept());
    await row.locator('button[data-action="delete"]').click();
    await row.waitFor({ state: 'detached' });
    assert.equal((await niclab.client.call('getSchedule', 'GET', '/v1/schedules/from-the-page')).status, 404);
    // A schedule without a cadence is refused, the field named beside its control.
    await page.goto(`${niclab.client.base}/ui#/new`);
    await page.locator('#f-flow-0-from option').first().waitFor({ state: 'attached' });
    await page.fill('#s-name', 'no-cadence');
    await page.click('#schedule-create');
    await page.locator('#problems li').first().waitFor();
    assert.ok(await page.locator('#problems li[data-field^="body.cron"], #problems li[data-field^="body.everySeconds"]').count() >= 1, await page.textContent('#problems') ?? '');
    await close(page, errors, 'schedules-actions', /status of 422/);
  });

  test('keyboard only: Tab reaches every control of the form in order, Enter submits; axe finds no violation on any page', async () => {
    // Started from the form's earlier job ("Edit as a new job"): its flows and fields filled in.
    const { page, errors } = await open(`/new?from=${formJob}`);
    await page.locator('#f-flow-0-from option').first().waitFor({ state: 'attached' });
    assert.deepEqual([await page.inputValue('#f-duration'), JSON.parse(await page.inputValue('#f-spec')).interval], ['3', 0.25]);
    const controls = await page.locator('#new-job :is(input, select, textarea, button):not([disabled])').evaluateAll((els) => els.map((e) => e.id || e.textContent));
    const reached: string[] = [];
    await page.focus('#token-forget');
    for (let i = 0; i < 60 && reached.at(-1) !== 'job-submit'; i++) {
      await page.keyboard.press('Tab');
      reached.push(await page.evaluate(() => { const a = (globalThis as unknown as { document: { activeElement: { id: string; textContent: string } | null } }).document.activeElement; return a ? a.id || a.textContent : ''; }));
    }
    const formOrder = controls.slice(0, controls.indexOf('job-submit') + 1);
    assert.deepEqual(reached.filter((r) => formOrder.includes(r)), formOrder, `reached: ${reached.join(', ')}`);
    await page.keyboard.press('Enter');
    await Promise.race([page.waitForURL(/#\/jobs\/[0-9a-f-]{36}$/), page.locator('#problems li').first().waitFor().then(async () => assert.fail(await page.textContent('#problems') ?? ''))]);
    const id = new URL(page.url()).hash.split('/')[2]!;
    await niclab.client.finish(id, 60_000);
    await page.context().close();
    assert.deepEqual(errors, []);

    const axe = await readFile(AXE, 'utf8');
    for (const [hash, ready] of [['/new', '#f-flow-0-from option'], ['/jobs', '#jobs tbody tr'], [`/jobs/${id}`, '#report-table'], ['/schedules', 'h1'], ['/agents', 'section.agent'], ['/compare', 'h1'], ['/changes', 'h1']] as const) {
      const { page: p, errors: e } = await open(hash);
      await p.locator(ready).first().waitFor({ state: 'attached' });
      await p.evaluate(axe);
      const violations = await p.evaluate(async () => {
        const { axe: run } = globalThis as unknown as { axe: { run(o: object): Promise<{ violations: { id: string; nodes: { target: string[] }[] }[] }> } };
        const result = await run.run({ runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa'] } });
        return result.violations.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
      });
      assert.deepEqual(violations, [], `axe on #${hash}`);
      await close(p, e, `axe-${hash.split('/')[1]}`);
    }
  });

  test('the schedules page lists a schedule with its cadence', async () => {
    const created = await niclab.client.call('createSchedule', 'POST', '/v1/schedules', { name: 'nightly-ui', cron: '0 2 * * *', spec: sweep(1) });
    assert.equal(created.status, 201);
    const { page, errors } = await open('/schedules');
    const row = page.locator('#schedules tbody tr', { hasText: 'nightly-ui' });
    await row.waitFor();
    assert.match(await row.textContent() ?? '', /cron 0 2 \* \* \* \(UTC\)/);
    await close(page, errors, 'schedules');
  });
});
