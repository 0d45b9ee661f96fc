import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { startNiclab, type TestNiclab } from '../helpers/niclab.js';
import { waitFor } from '../helpers/processes.js';

/**
 * services/python/niclab.py against a live API (separate API and agent processes, a private
 * Redis) with the machine's python3: the README's example as it stands, then each call's
 * answer against what the API itself answers the test.
 */
const exec = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const README_EXAMPLE = /```python client\n([\s\S]*?)```/.exec(readFileSync(`${ROOT}README.md`, 'utf8'))![1]!;

let niclab: TestNiclab;
before(async () => {
  niclab = await startNiclab(['local']);
});
after(async () => {
  await niclab?.stop();
});

/** Runs `code` with python3 from the repository's root, the API in NICLAB_API. */
async function python(code: string, timeoutMs = 60_000): Promise<string> {
  const { stdout } = await exec('python3', ['-c', code], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', NICLAB_API: niclab.client.base }, timeout: timeoutMs });
  return stdout;
}

test("the README's Python example, as written: the job, its report, a comparison, the history and a refusal", async () => {
  const out = await python(README_EXAMPLE);
  const lines = out.split('\n');
  assert.deepEqual(lines.filter((l) => /^run \d+ \w+$/.test(l)), ['run 0 succeeded', 'run 1 succeeded'], out);
  const jobs = (await niclab.client.call('listJobs', 'GET', '/v1/jobs?limit=10')).body.items as { id: string; spec: { labels: Record<string, string> } }[];
  const job = (await niclab.client.job(jobs.find((j) => j.spec.labels.script === 'readme')!.id)).body;
  const mbit = job.runs.map((r: { flows: { bitsPerSecond: number }[] }) => Math.round(r.flows[0]!.bitsPerSecond / 1e5) / 10);
  // As Python prints a float: a whole number keeps its ".0" (2201.0, which JavaScript prints 2201).
  const printed = mbit.map((v: number) => (Number.isInteger(v) ? v.toFixed(1) : String(v))).join(', ');
  assert.ok(lines.includes(`succeeded [${printed}] Mbit/s`), `the runs the API recorded (${printed}):\n${out}`);
  const table = await (await fetch(`${niclab.client.base}/v1/jobs/${job.id}/report?format=table`)).text();
  assert.ok(out.includes(table.trimEnd()), 'the report table as the API renders it');
  assert.match(out, /^against itself: \['no significant change'\]$/m);
  assert.match(out, /^history: 2 runs$/m);
  assert.match(out, /^refused: 422 \[\('body\.duration', '[^']+'\)\]$/m);
});

test('events resume after an id, the history follows its cursor page by page, cancel, agents, an idempotency key', async () => {
  const out = await python(`
import json, sys, time; sys.path.insert(0, "services/python")
from niclab import Niclab, NiclabError
lab = Niclab()
lo = {"agent": "local", "interface": "lo"}
spec = {"duration": 0.5, "interval": 0.5, "repeat": 3, "labels": {"script": "paging"}, "flows": [{"from": lo, "to": lo}]}
first = lab.submit(spec, idempotency_key="py-1")
again = lab.submit(spec, idempotency_key="py-1")
seen = []
done = lab.wait(first["id"], on_event=lambda e, d: seen.append(e))
followed = lab.submit(spec)
events = list(lab.events(followed["id"]))
resumed = list(lab.events(followed["id"], last_event_id=events[1][2]))
paged = [s["runId"] for s in lab.results(label="script=paging", page_size=1)]
long = lab.submit({"duration": 30, "flows": [{"from": lo, "to": lo}]})
while lab.job(long["id"])["status"] == "queued": time.sleep(0.05)
canceled = lab.cancel(long["id"])
try:
    lab.job("00000000-0000-4000-8000-000000000000")
    missing = None
except NiclabError as error:
    missing = error.status
print(json.dumps({"same": again["id"] == first["id"], "status": done["status"], "seen": seen, "events": [[e, i] for e, _, i in events],
  "resumed": [[e, i] for e, _, i in resumed], "paged": paged, "canceled": canceled["status"], "missing": missing, "agents": [a["id"] for a in lab.agents()]}))
`);
  const r = JSON.parse(out) as { same: boolean; status: string; seen: string[]; events: [string, string][]; resumed: [string, string][]; paged: string[]; canceled: string; missing: number; agents: string[] };
  assert.equal(r.same, true, 'the same Idempotency-Key gives the same job');
  assert.equal(r.status, 'succeeded');
  assert.equal(r.seen.filter((e) => e === 'run').length, 3, `wait heard every run: ${r.seen.join(' ')}`);
  assert.deepEqual(r.resumed, r.events.slice(2), 'after the second event: the rest of the stream, once each');
  assert.equal(r.events.at(-1)![0], 'status');
  assert.ok(r.events.filter(([e]) => e === 'run').length === 3, JSON.stringify(r.events));
  const runIds = (await niclab.client.call('listResults', 'GET', '/v1/results?label=script%3Dpaging')).body.items.map((s: { runId: string }) => s.runId);
  assert.deepEqual(r.paged, runIds, 'pages of one, joined: the history the API gives in one');
  assert.equal(runIds.length, 6, 'two jobs of three runs');
  assert.equal(r.canceled, 'canceled');
  assert.equal(r.missing, 404);
  assert.deepEqual(r.agents, ['local']);
  await waitFor('the canceled job to settle', async () => (await niclab.client.call('listJobs', 'GET', '/v1/jobs?status=running')).body.items.length === 0, 20_000);
});
