import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { startNiclab, type TestNiclab } from '../helpers/niclab.js';

/**
 * @niclab/client as a script uses it: the README's example type-checked against the package
 * (and a job spec with only its flows, which the service's own strict types refuse), then run
 * against a live API and compared with what the API answers the test.
 */
const exec = promisify(execFile);
const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const EXAMPLE = /```ts client\n([\s\S]*?)```/.exec(readFileSync(join(ROOT, 'README.md'), 'utf8'))![1]!;
/** Inside the repository, so that @niclab/client resolves as a workspace package. */
const WORK = join(ROOT, 'test-output', `client-${process.pid}`);

let niclab: TestNiclab;
before(async () => {
  mkdirSync(WORK, { recursive: true });
  niclab = await startNiclab(['local']);
});
after(async () => {
  await niclab?.stop();
  rmSync(WORK, { recursive: true, force: true });
});

/** TypeScript's errors for each file, as the repository's strict settings give them. */
function typeErrors(files: Record<string, string>): Record<string, string[]> {
  const paths = Object.entries(files).map(([name, text]) => {
    const file = join(WORK, `${name}.ts`);
    writeFileSync(file, text);
    return [name, file] as const;
  });
  const program = ts.createProgram(paths.map(([, f]) => f), {
    strict: true, noEmit: true, skipLibCheck: true, target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext,
    customConditions: ['niclab-source'], types: ['node'], noUncheckedIndexedAccess: true,
  });
  const diagnostics = ts.getPreEmitDiagnostics(program);
  return Object.fromEntries(paths.map(([name, file]) => [name, diagnostics.filter((d) => d.file?.fileName === file).map((d) => ts.flattenDiagnosticMessageText(d.messageText, ' '))]));
}

test("the README's example type-checks against @niclab/client, and a spec of flows alone does there but not against the service's strict types", () => {
  const flowsOnly = "const lo = { agent: 'A', interface: 'eth1' };\nexport const spec: JobSpec = { flows: [{ from: lo, to: lo }] };\n";
  const errors = typeErrors({
    example: EXAMPLE,
    loose: `import type { JobSpec } from '@niclab/client';\n${flowsOnly}`,
    strict: `import type { JobSpec } from '@niclab/shared/domain/contract';\n${flowsOnly}`,
    wrong: `import type { JobSpec } from '@niclab/client';\nexport const spec: JobSpec = { duration: '10', flows: [] };\n`,
  });
  assert.deepEqual(errors.example, [], 'the README example compiles');
  assert.deepEqual(errors.loose, [], "a job of flows alone is a client's JobSpec");
  assert.ok(errors.strict!.some((e) => /missing the following properties .*(test|protocol|bufferLength)/.test(e)), `the service's types require the defaulted fields: ${errors.strict!.join('; ')}`);
  assert.ok(errors.wrong!.some((e) => /'string' is not assignable to type 'number'/.test(e)), `a wrong type is still an error: ${errors.wrong!.join('; ')}`);
});

test("the README's example runs against a live API: its runs, report and history are the API's", async () => {
  const file = join(WORK, 'run-example.ts');
  writeFileSync(file, EXAMPLE);
  const { stdout } = await exec(process.execPath, ['--import', 'tsx', '--conditions=niclab-source', file], { cwd: ROOT, env: { PATH: process.env.PATH ?? '', NICLAB_API: niclab.client.base }, timeout: 60_000 });
  const lines = stdout.trim().split('\n');
  assert.deepEqual(lines.filter((l) => l.startsWith('run ')), ['run 0 succeeded', 'run 1 succeeded'], stdout);
  const jobs = (await niclab.client.call('listJobs', 'GET', '/v1/jobs?limit=10')).body.items as { id: string; spec: { labels: Record<string, string> } }[];
  const job = (await niclab.client.job(jobs.find((j) => j.spec.labels.script === 'readme-ts')!.id)).body;
  const mbit = job.runs.map((r: { flows: { bitsPerSecond: number }[] }) => (r.flows[0]!.bitsPerSecond / 1e6).toFixed(1));
  assert.ok(lines.includes(`succeeded ${mbit.join(' ')} Mbit/s`), `the runs the API recorded (${mbit.join(' ')}):\n${stdout}`);
  const report = (await niclab.client.call('getReport', 'GET', `/v1/jobs/${job.id}/report`)).body;
  assert.ok(lines.includes(`mean ${(report.points[0].total.bitsPerSecond.mean / 1e6).toFixed(1)} Mbit/s`), stdout);
  assert.ok(lines.includes('history: 2 flows'), stdout);
  assert.ok(lines.includes('refused: 422 body.duration'), stdout);
});
