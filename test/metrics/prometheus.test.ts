import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { parse } from 'yaml';
import { command } from '@niclab/shared/runtime/command';
import { flow, NOT_ROOT, startTestLab, type TestLab } from '../helpers/lab.js';
import { waitFor } from '../helpers/processes.js';
import { syntheticSchedule } from '../helpers/changes.js';
import { createRedis } from '@niclab/shared/runtime/redis';
import { jobStore } from '@niclab/shared/stores/job-queue';
import { Keys } from '@niclab/shared/stores/keys';
import { DEPLOY, RULES, startAlertmanager, startPrometheus, type TestAlertmanager, type TestPrometheus } from '../helpers/prometheus.js';

const DASHBOARDS = join(DEPLOY, 'grafana/dashboards');

interface Rule { record?: string; alert?: string; expr: string }
interface Panel { id: number; title: string; type: string; datasource?: { uid: string }; gridPos?: object; targets?: { expr: string; datasource?: { uid: string } }[] }
interface Dashboard {
  uid: string; title: string; schemaVersion: number; panels: Panel[];
  templating: { list: { name: string; query: { query: string }; datasource: { uid: string } }[] };
  annotations: { list: { expr?: string; datasource?: { uid: string } }[] };
}

const dashboards = readdirSync(DASHBOARDS).filter((f) => f.endsWith('.json')).map((f) => ({ file: f, dashboard: JSON.parse(readFileSync(join(DASHBOARDS, f), 'utf8')) as Dashboard }));
const rules = (parse(readFileSync(RULES, 'utf8')) as { groups: { rules: Rule[] }[] }).groups.flatMap((g) => g.rules);

/**
 * An alert's expression is empty while nothing fires. With `bool` on its top-level comparison
 * it returns 0 or 1 for every series it compares, which proves both sides have data.
 */
function withBool(expr: string): string {
  let depth = 0;
  let quoted = false;
  let at = -1;
  let length = 0;
  for (let i = 0; i < expr.length; i++) {
    const c = expr[i]!;
    if (c === '"') quoted = !quoted;
    if (quoted) continue;
    if ('([{'.includes(c)) depth++;
    else if (')]}'.includes(c)) depth--;
    else if (depth === 0) {
      const op = /^(==|!=|>=|<=|>|<)/.exec(expr.slice(i))?.[0];
      if (op && !/[=~!]/.test(expr[i - 1] ?? '')) {
        at = i;
        length = op.length;
        i += op.length - 1;
      }
    }
  }
  return at < 0 ? expr : `${expr.slice(0, at + length)} bool${expr.slice(at + length)}`;
}

/** Grafana's own syntax, resolved as Grafana would for "All" and a 1-hour range. */
function resolve(expr: string): string {
  const labelValues = /^label_values\((.*),\s*(\w+)\)$/s.exec(expr.trim());
  const promql = labelValues ? `group by (${labelValues[2]}) (${labelValues[1]})` : expr;
  return promql.replace(/\$__rate_interval/g, '1m').replace(/\$__interval/g, '15s').replace(/\$__range/g, '1h').replace(/\$(\w+)/g, '.*');
}

/** Every PromQL expression the deploy files contain, with where it comes from. */
function expressions(): { where: string; expr: string }[] {
  const found = rules.map((r) => ({ where: `rule ${r.record ?? r.alert}`, expr: r.alert ? withBool(r.expr) : r.expr }));
  for (const { file, dashboard } of dashboards) {
    for (const panel of dashboard.panels) for (const t of panel.targets ?? []) found.push({ where: `${file}: panel "${panel.title}"`, expr: resolve(t.expr) });
    for (const v of dashboard.templating.list) found.push({ where: `${file}: variable $${v.name}`, expr: resolve(v.query.query) });
    for (const a of dashboard.annotations.list) if (a.expr) found.push({ where: `${file}: annotation`, expr: resolve(a.expr) });
  }
  return found;
}

describe('deploy/prometheus: promtool', () => {
  test('check config, check rules and the rules\' unit tests pass', async () => {
    await command('promtool', ['check', 'config', join(DEPLOY, 'prometheus/prometheus.yml')]);
    await command('promtool', ['check', 'rules', RULES]);
    const out = await command('promtool', ['test', 'rules', join(DEPLOY, 'prometheus/tests/niclab.test.yml')]);
    await command('amtool', ['check-config', join(DEPLOY, 'alertmanager/alertmanager.yml')]);
    assert.match(out, /SUCCESS/);
  });

  test('withBool makes the top-level comparison of an alert return every series it compares', () => {
    assert.equal(withBool('up == 0'), 'up == bool 0');
    assert.equal(withBool('a{x!="",y=~"b>c"} > scalar(s)'), 'a{x!="",y=~"b>c"} > bool scalar(s)');
    assert.equal(withBool('time() - max by (s) (m{s!=""})\n  > scalar(t)'), 'time() - max by (s) (m{s!=""})\n  > bool scalar(t)');
    assert.equal(withBool('rate(x[5m])'), 'rate(x[5m])');
  });
});

describe('deploy/grafana: dashboards Grafana can load', () => {
  const provisioned = parse(readFileSync(join(DEPLOY, 'grafana/provisioning/datasources/niclab.yaml'), 'utf8')) as { datasources: { uid: string; type: string }[] };
  const uid = provisioned.datasources[0]!.uid;

  for (const { file, dashboard } of dashboards) {
    test(`${file}: uid, schemaVersion, panels and datasources that match the provisioned one`, () => {
      assert.match(dashboard.uid, /^[a-z0-9-]{1,40}$/);
      assert.ok(dashboard.schemaVersion >= 36, 'a current schemaVersion');
      assert.ok(dashboard.title.startsWith('niclab'));
      assert.equal(new Set(dashboard.panels.map((p) => p.id)).size, dashboard.panels.length, 'panel ids are unique');
      const variables = new Set(dashboard.templating.list.map((v) => v.name));
      for (const panel of dashboard.panels) {
        assert.ok(panel.gridPos && panel.type && panel.title, `panel ${panel.id} has a type, title and position`);
        assert.equal(panel.datasource?.uid, uid, `panel "${panel.title}" uses the provisioned datasource`);
        assert.ok((panel.targets ?? []).length > 0, `panel "${panel.title}" queries something`);
        for (const t of panel.targets ?? []) {
          assert.equal(t.datasource?.uid, uid);
          for (const [, name] of t.expr.matchAll(/\$(\w+)/g)) assert.ok(name!.startsWith('__') || variables.has(name!), `panel "${panel.title}" uses undefined $${name}`);
        }
      }
      for (const v of dashboard.templating.list) assert.equal(v.datasource.uid, uid);
      for (const a of dashboard.annotations.list) if (a.expr) assert.equal(a.datasource?.uid, uid);
    });
  }
  test('the three dashboards of the issue are there, uids unique', () => {
    assert.deepEqual(dashboards.map((d) => d.dashboard.uid).sort(), ['niclab-fleet', 'niclab-health', 'niclab-link']);
  });
});

describe('a real Prometheus scraping niclab after real jobs: every expression returns data', { skip: NOT_ROOT }, () => {
  let t: TestLab;
  let prometheus: TestPrometheus | undefined;
  let alertmanager: TestAlertmanager | undefined;
  const query = (expr: string) => prometheus!.query(expr);

  before(async () => {
    t = await startTestLab(2, 'none');
    // The shipped configuration, pointed at this test's API and scraping every second.
    alertmanager = await startAlertmanager();
    prometheus = await startPrometheus(t.env.NICLAB_PORT!, alertmanager.address);
    // Jobs run while Prometheus watches, so the annotation query sees runs end. One of each
    // kind of result on A -> B: TCP (both engines), UDP, request/response, both searches; one with a schedule.
    for (const spec of [
      { engine: 'builtin', labels: { schedule: 'nightly' } },
      { engine: 'iperf3' },
      { engine: 'builtin', protocol: 'udp', udp: { packetSize: 1400, rate: { packetsPerSecond: 5000 } } },
      { engine: 'builtin', test: 'rr' },
      // A rate search whose first trial (max) passes: the link's search result.
      { engine: 'builtin', protocol: 'udp', udp: { packetSize: 1000, rate: { packetsPerSecond: 500 } }, search: { target: 'ndr', min: { packetsPerSecond: 500 }, max: { packetsPerSecond: 2000 }, confirmations: 0 } },
      // An MLRsearch whose max is a lower bound after one 1 s trial: its conditional throughput.
      { engine: 'builtin', protocol: 'udp', udp: { packetSize: 1000, rate: { packetsPerSecond: 500 } }, search: { algorithm: 'mlrsearch', min: { packetsPerSecond: 500 }, max: { packetsPerSecond: 2000 }, goals: [{ lossRatio: 0.005, finalTrialDuration: 1, durationSum: 1 }] } },
    ]) {
      await t.client.succeed({ duration: 1, flows: [flow('A', 'B')], ...spec }, 60_000);
    }
    // A schedule's history with a 10% step (synthetic runs, saved as the coordinator saves
    // them): an open change point for the regression alert and the change-point families.
    const redis = createRedis(t.env.REDIS_URL!);
    try {
      const fire = syntheticSchedule(jobStore(redis, new Keys(t.env.NICLAB_PREFIX!)).store, 'synthetic-step');
      for (const mbit of [...Array(12).fill(100), ...Array(6).fill(90)] as number[]) await fire(mbit, mbit * 125_000);
    } finally {
      redis.disconnect();
    }
    // The same link again once Prometheus has its first result: the result changes under its eyes.
    await waitFor('the rr result scraped', async () => ((await query('niclab_link_rtt_seconds')).data?.result.length ?? 0) > 0, 30_000);
    await t.client.succeed({ duration: 1, flows: [flow('A', 'B')], engine: 'builtin', test: 'rr' }, 60_000);
    // Enough scrapes and rule evaluations for rate() and the recording rules to have samples.
    await waitFor('niclab scraped and rules evaluated', async () => {
      const rate = await query('rate(niclab_runs_total[1m])');
      const recorded = await query('niclab:link_throughput:speed_ratio');
      const rerun = await query('changes(niclab_link_last_run_timestamp_seconds{test="rr"}[2m]) > 0');
      return [rate, recorded, rerun].every((reply) => (reply.data?.result.length ?? 0) > 0);
    }, 30_000);
  });

  after(async () => {
    await prometheus?.stop();
    await alertmanager?.stop();
    await t?.close();
  });

  test('the niclab target is up', async () => {
    const up = await query('up{job="niclab"}');
    assert.deepEqual((up.data?.result as { value: [number, string] }[]).map((r) => r.value[1]), ['1']);
  });

  test('every dashboard, variable, annotation and rule expression is valid and not empty', async (ctx) => {
    const all = expressions();
    const empty: string[] = [];
    for (const { where, expr } of all) {
      const reply = await query(expr);
      assert.equal(reply.status, 'success', `${where}: ${reply.error} in ${expr}`);
      if ((reply.data?.result.length ?? 0) === 0) empty.push(`${where}: ${expr}`);
    }
    ctx.diagnostic(`${all.length} expressions queried, ${all.length - empty.length} returned data`);
    assert.deepEqual(empty, [], 'expressions that returned nothing');
    assert.ok(all.length >= 40, `found ${all.length} expressions`);
  });

  test("a regression reaches the lab's receiver through the shipped Alertmanager, and acknowledging it resolves it there", async () => {
    const regression = () => alertmanager!.notifications.flatMap((n) => n.alerts).filter((a) => a.labels.alertname === 'NiclabRegression' && a.labels.schedule === 'synthetic-step');
    await waitFor('NiclabRegression notified', () => regression().some((a) => a.status === 'firing'), 30_000);
    const [firing] = regression();
    assert.deepEqual([firing!.labels.figure, firing!.labels.verdict, firing!.labels.severity], ['bitsPerSecond', 'worse', 'warning']);
    assert.match(firing!.annotations.description!, /niclab changes --schedule synthetic-step --figure bitsPerSecond/);
    const { items } = (await t.client.call('listChanges', 'GET', '/v1/changes?schedule=synthetic-step')).body as { items: { id: string }[] };
    assert.equal(items.length, 1);
    assert.equal((await t.client.call('acknowledgeChange', 'POST', `/v1/changes/${items[0]!.id}/acknowledge`, { as: 'expected', note: 'synthetic' })).status, 200);
    await waitFor('NiclabRegression resolved', () => regression().some((a) => a.status === 'resolved'), 60_000);
  });

  test('the link metrics carry the run\'s figures, not the time of the scrape', async () => {
    const job = (await t.client.call('listJobs', 'GET', '/v1/jobs?limit=1')).body.items[0];
    const full = (await t.client.call('getJob', 'GET', `/v1/jobs/${job.id}`)).body;
    const rr = await query('niclab_link_rtt_seconds{test="rr", quantile="0.5"}');
    const [series] = rr.data!.result as { value: [number, string] }[];
    assert.equal(Number(series!.value[1]), full.runs[0].flows[0].rr.rttSeconds.p50);
    const ended = await query('niclab_link_last_run_timestamp_seconds{test="rr"}');
    assert.equal(Number((ended.data!.result[0] as { value: [number, string] }).value[1]), Date.parse(full.runs[0].finishedAt) / 1000);
  });
});
