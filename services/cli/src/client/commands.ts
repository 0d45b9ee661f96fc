/**
 * The scripting commands: `niclab run|jobs|job|cancel|agents|report|compare|schedules|changes`, all
 * through the REST API (`--api URL` or NICLAB_API, `--token` or NICLAB_TOKEN).
 */
import { writeFile } from 'node:fs/promises';
import { parseArgs } from 'node:util';
import type { Agent, Job, JobRequest, JobSpec } from '@niclab/shared/domain/contract';
import { historyOpenMetrics, type RunSummary } from '@niclab/shared/stores/results';
import { pointLabel } from '@niclab/shared/domain/plan';
import { alignTable } from '@niclab/shared/domain/text-table';
import { findingText } from '@niclab/shared/domain/finding';
import { kindOf } from '@niclab/shared/domain/test-kinds/index';
import { combineHeadline } from '@niclab/shared/domain/test-kinds/kind';
import { measuresHeadline } from '@niclab/shared/domain/flow-tests';
import { Api, ClientError } from './http.js';
import { helpFor } from '../help.js';
import { ArgumentError, searchSpecOf, specOf, type RunOptions } from './spec.js';

export const CLIENT_COMMANDS = ['run', 'search', 'jobs', 'job', 'cancel', 'agents', 'report', 'compare', 'schedules', 'changes', 'results'] as const;

const RUN_OPTIONS = {
  from: { type: 'string', multiple: true },
  to: { type: 'string', multiple: true },
  mesh: { type: 'string' },
  disjoint: { type: 'string', multiple: true },
  star: { type: 'string', multiple: true },
  'star-direction': { type: 'string' },
  engine: { type: 'string' },
  t: { type: 'string', short: 't' },
  l: { type: 'string', short: 'l' },
  w: { type: 'string', short: 'w' },
  P: { type: 'string', short: 'P' },
  nodelay: { type: 'boolean' },
  udp: { type: 'boolean' },
  rate: { type: 'string' },
  size: { type: 'string' },
  rr: { type: 'boolean' },
  request: { type: 'string' },
  response: { type: 'string' },
  reverse: { type: 'boolean' },
  bidir: { type: 'boolean' },
  repeat: { type: 'string' },
  sweep: { type: 'string', multiple: true },
  interval: { type: 'string' },
  label: { type: 'string', multiple: true },
  pdr: { type: 'string' },
  min: { type: 'string' },
  max: { type: 'string' },
  resolution: { type: 'string' },
  confirm: { type: 'string' },
  goal: { type: 'string', multiple: true },
  mlrsearch: { type: 'boolean' },
  'latency-at': { type: 'string' },
  'exceed-ratio': { type: 'string' },
  'duration-sum': { type: 'string' },
  'both-directions': { type: 'boolean' },
  'with-rr': { type: 'boolean' },
  probe: { type: 'boolean' },
  'with-probe': { type: 'boolean' },
  'probe-interval': { type: 'string' },
  'probe-size': { type: 'string' },
  idle: { type: 'string' },
  tune: { type: 'string', multiple: true },
  'tune-sender': { type: 'string', multiple: true },
  'tune-receiver': { type: 'string', multiple: true },
  factorial: { type: 'boolean' },
  'from-file': { type: 'string' },
  'to-file': { type: 'boolean' },
  dsync: { type: 'boolean' },
  'drop-cache': { type: 'boolean' },
} as const;

const COMMON = {
  help: { type: 'boolean', short: 'h' },
  api: { type: 'string' },
  token: { type: 'string' },
  json: { type: 'boolean' },
  csv: { type: 'boolean' },
  svg: { type: 'string' },
  wait: { type: 'boolean' },
  quiet: { type: 'boolean', short: 'q' },
  status: { type: 'string' },
  limit: { type: 'string' },
  every: { type: 'string' },
  cron: { type: 'string' },
  tz: { type: 'string' },
  'min-change': { type: 'string' },
  metric: { type: 'string' },
  schedule: { type: 'string' },
  agent: { type: 'string' },
  figure: { type: 'string' },
  since: { type: 'string' },
  until: { type: 'string' },
  interface: { type: 'string' },
  jsonl: { type: 'boolean' },
  openmetrics: { type: 'boolean' },
  as: { type: 'string' },
  note: { type: 'string' },
} as const;

/** Every flag of the scripting commands, as parseArgs takes them. */
export const CLIENT_OPTIONS = { ...COMMON, ...RUN_OPTIONS };

export const CLIENT_USAGE = `Scripting commands (through the API: --api URL or NICLAB_API, default http://127.0.0.1:8080;
--token TOKEN or NICLAB_TOKEN):
  niclab run --from A:eth1 --to D:eth1 [--to ...] [--engine builtin|iperf3] [-t 10] [-l 8k]
             [-w 128k] [-P 4] [--nodelay] [--udp --rate 70kpps|100mbit --size 1500]
             [--rr --request 1 --response 1] [--probe] [--with-rr] [--with-probe] [--idle 3]
             [--probe-interval 10ms --probe-size 64] [--reverse|--bidir] [--repeat 10]
             [--sweep w=8k,16k,32k] [--label key=value] [--from-file PATH] [--to-file]
             [--dsync] [--drop-cache] [--wait [-q]] [--json]
             [--tune K=V,...] [--tune-sender K=V,...] [--tune-receiver K=V,...] [--factorial]
      several --from and one --to: fan-in; one --from, several --to: fan-out; as many of
      each: pairs. Sweep names: l, w, P, nodelay (on,off), size, rate, request, response,
      dir (forward,reverse,bidir), mtu (each end's interface, admin: the path is proven
      first), io (memory,file); --both-directions is --sweep dir=forward,reverse.
      --from-file PATH: each sender reads PATH (relative to its agent's NICLAB_FILE_DIR)
      instead of memory, as iperf3 -F; --to-file: each receiver writes a temporary file there
      (removed after); --dsync: the sink's writes synchronous; --drop-cache: the source's
      page cache dropped first. Beside each file point a memory point runs (--sweep io=file
      for none), each end measures its disk alone, and the table names the slowest stage.
      --with-rr: latency under load, an rr flow (builtin, 1 connection, TCP_NODELAY) beside
      each path, alone for --idle seconds (default 3; 0: none) before the load starts; the
      table shows idle and loaded round trips side by side. --with-probe: the same with the
      UDP latency probe (a datagram every --probe-interval ms, default 10, reflected: round
      trips, one-way delays where both ends share a clock, loss each way, IPDV); both flags
      together add one of each. --probe: a job of the probe alone.
      --tune, --tune-sender, --tune-receiver (admin): settings for both ends, each leg's
      sender, each leg's receiver, as KEY=VALUE pairs: mtu, txqueuelen, a sysctl
      ('net.ipv4.tcp_rmem=4096 131072 16777216'), gro=off, rx-ring=4096, qdisc=pfifo,
      qdisc.limit=1000; always restored. --factorial: the four cells none, sender, receiver
      and both, each --repeat times (2 or more) in rotation; the table gives each end's effect,
      the interaction and whether tuning one end alone harms throughput.
      --mesh rack=a:eth1 instead of --from/--to: every ordered pair of the agents with those
      labels, on eth1 (or rack=a:198.18.1.0/24, the interface in that prefix), each pair a run,
      in rounds sharing no interface; --wait prints the matrix. --disjoint rack=a:eth1
      --disjoint rack=b:eth1: every member of the first to every member of the second.
      --star role=hub:eth1 --star rack=a:eth1 [--star-direction to|from|both]: the members
      to and/or from the center (the first).
      Without --wait it prints the job id; with it, live progress, then the nttcp table
      (exit 1 when the job did not succeed; 2 when a group job measured some pairs and
      others failed); -q: only the job id, once it has ended.
  niclab search --from A:eth1 --to B:eth1 [--size 1500] [--pdr 0.1%] [--min 1kpps] [--max 100mbit]
             [--resolution 1] [--confirm 1] [-t 2] [--sweep size=64,512,1500] [--both-directions] [--wait]
      The highest UDP rate with no loss (or at most --pdr), by binary search (RFC 2544); --max
      defaults to the sender's link speed. With --wait: one line per trial, then the table.
  niclab search --from A:eth1 --to B:eth1 --goal ndr --goal pdr=0.5% [-t 10] [--min R] [--max R]
             [--exceed-ratio 50%] [--duration-sum 21] [--latency-at 10%,50%,90%] [--wait]
      Several loss goals in one MLRsearch (draft-ietf-bmwg-mlrsearch, RFC 9971): per goal the
      relevant bounds and the conditional throughput; -t is the final trial duration. --mlrsearch
      alone searches NDR and PDR 0.5%. --exceed-ratio and --duration-sum (s) set every goal's
      (70% and 31 with -t 10: one clean final trial in three decides, for noise that only adds
      loss). --latency-at: then a run at each fraction of the PDR's conditional throughput with a
      latency probe beside each flow (round trips in the table).
  niclab jobs [--status S] [--limit N]
  niclab job ID
  niclab cancel ID
  niclab agents
  niclab report ID [--csv | --svg FILE]
  niclab compare BASELINE CANDIDATE [--min-change 1] [--metric rttP99Seconds] [--svg FILE]
      --svg FILE writes the job's figure (a sweep's curve, a search's loss against rate, a
      fan-in's bars, a single run's intervals; A/B bars with the verdict) as SVG to FILE.
  niclab schedules [list | show NAME | pause NAME | resume NAME | delete NAME]
  niclab schedules create NAME (--every SECONDS | --cron "0 2 * * *" [--tz Europe/Berlin]) RUN-OPTIONS
  niclab changes [--schedule S] [--agent A] [--figure bitsPerSecond] [--since 2026-11-01] [--limit N]
      The change points found in the schedules' series: between which runs, the step with its
      95% interval, better or worse, and what changed at either end between those runs.
  niclab changes ack ID --as expected|known-regression [--note "new kernel"]
      Acknowledges one: it is no longer open in /metrics, and its step is not raised again.
  niclab results [--agent A [--interface eth1]] [--schedule S] [--label key=value]
             [--since 2026-11-01] [--until 2026-11-30T12:00Z] [--limit N]
             [--csv | --jsonl | --openmetrics | --json]
      The history of run summaries, oldest first (default: the last 24 hours), every page of
      it unless --limit: a table; --csv a row per flow (for a spreadsheet or pandas), --jsonl
      one summary per line, --openmetrics its figures as gauges at each run's end (for
      promtool tsdb create-blocks-from openmetrics).
  --json prints the API's JSON instead of tables.`;

type Out = (line: string) => void;

export interface ClientContext {
  /** Where the API is and the token to send, unless --api and --token say otherwise. */
  env: { api: string; token?: string };
  out: Out;
  err: Out;
  /** A terminal: progress redraws one line; otherwise plain lines. */
  tty: boolean;
}

const mbit = (bps: number | null | undefined) => (bps === null || bps === undefined ? '-' : `${(bps / 1e6).toFixed(2)} Mbit/s`);
const short = (id: string) => id.slice(0, 8);

const JOB_COLUMNS = ['id', 'status', 'found', 'verdict', 'created', 'engine', 'runs', 'flows'];

/** A job's line: what it found (its headline figure and verdict) beside its status. */
function jobLine(j: Job): string[] {
  const flows = j.spec.flows.map((f) => `${f.from.agent}:${f.from.interface}->${f.to.agent}:${f.to.interface}`).join(' ');
  const { found, verdict } = findingText(j.finding);
  return [j.id, j.status, found, verdict, j.createdAt.replace(/\.\d+Z$/, 'Z'), `${j.spec.engine}/${j.spec.protocol}/${j.spec.test}`, `${j.progress.runsDone}/${j.progress.runsTotal}`, flows];
}

/** Writes the figure the API draws to `file` and says where it went. */
async function saveSvg(api: Api, path: string, file: string, out: Out): Promise<number> {
  if (!file) throw new ArgumentError('--svg needs a file name');
  const svg = await api.text(path, 'image/svg+xml');
  await writeFile(file, svg);
  out(`wrote ${file} (${svg.length} bytes)`);
  return 0;
}

/** Runs one scripting command; returns the process exit code. */
export async function clientCommand(command: string, argv: string[], ctx: ClientContext): Promise<number> {
  const { values, positionals } = parseArgs({ args: argv, allowPositionals: true, options: CLIENT_OPTIONS });
  const { out } = ctx;
  // `niclab run --help`: that command's lines of the usage, exit 0.
  if (values.help) return out(helpFor(CLIENT_USAGE, command) ?? CLIENT_USAGE), 0;
  const api = new Api(values.api ?? ctx.env.api, values.token ?? ctx.env.token);
  const print = (value: unknown) => out(JSON.stringify(value, null, 2));
  try {
    switch (command) {
      case 'run':
        return await run(api, specOf(values as RunOptions), values, ctx);
      case 'search':
        return await run(api, searchSpecOf(values as RunOptions), values, ctx);
      case 'jobs': {
        const q = new URLSearchParams({ limit: values.limit ?? '20', ...(values.status ? { status: values.status } : {}) });
        const page = await api.json<{ items: Job[] }>('GET', `/v1/jobs?${q}`);
        if (values.json) return print(page), 0;
        out(alignTable([JOB_COLUMNS, ...page.items.map(jobLine)]));
        return 0;
      }
      case 'job': {
        const job = await api.json<Job>('GET', `/v1/jobs/${need(positionals[0], 'a job id')}`);
        if (values.json) return print(job), 0;
        out(alignTable([JOB_COLUMNS, jobLine(job)]));
        if (job.error) out(`error: ${job.error.code}: ${job.error.message}`);
        const rows = (job.runs ?? []).map((r) => [String(r.index), pointLabel(r.point), String(r.repetition), r.status, r.flows.map((f) => mbit(f.bitsPerSecond)).join(' + '), r.error ? `${r.error.code}: ${r.error.message}` : '']);
        if (rows.length) out('\n' + alignTable([['run', 'point', 'rep', 'status', 'throughput', 'error'], ...rows]));
        return 0;
      }
      case 'cancel': {
        const job = await api.json<Job>('DELETE', `/v1/jobs/${need(positionals[0], 'a job id')}`);
        if (values.json) return print(job), 0;
        out(`job ${job.id} ${job.status}`);
        return 0;
      }
      case 'agents': {
        const { items } = await api.json<{ items: Agent[] }>('GET', '/v1/agents');
        if (values.json) return print(items), 0;
        const rows = items.flatMap((a) => [
          [a.id, a.online ? 'online' : 'offline', a.lastSeen.replace(/\.\d+Z$/, 'Z'), '', '', '', '', a.fileDirectory ? 'yes' : '-'],
          ...a.interfaces.map((i) => ['', '', '', i.name, i.operstate, i.speedBitsPerSecond ? `${i.speedBitsPerSecond / 1e9} Gbit/s` : '-', `${i.mtu ?? '-'}  ${i.addresses.map((x) => x.address).join(' ')}`, '']),
        ]);
        out(alignTable([['agent', 'state', 'last seen', 'interface', 'oper', 'speed', 'mtu  addresses', 'file dir'], ...rows]));
        return 0;
      }
      case 'report': {
        const id = need(positionals[0], 'a job id');
        if (values.json) return print(await api.json('GET', `/v1/jobs/${id}/report`)), 0;
        if (values.svg !== undefined) return await saveSvg(api, `/v1/jobs/${id}/report?format=svg`, values.svg, out);
        out((await api.text(`/v1/jobs/${id}/report?format=${values.csv ? 'csv' : 'table'}`)).trimEnd());
        return 0;
      }
      case 'compare': {
        const q = new URLSearchParams({ baseline: need(positionals[0], 'a baseline job id'), candidate: need(positionals[1], 'a candidate job id') });
        if (values['min-change']) q.set('minChangePercent', values['min-change']);
        if (values.metric) q.set('metric', values.metric);
        if (values.json) return print(await api.json('GET', `/v1/compare?${q}`)), 0;
        if (values.svg !== undefined) return await saveSvg(api, `/v1/compare?${q}&format=svg`, values.svg, out);
        q.set('format', 'table');
        out((await api.text(`/v1/compare?${q}`)).trimEnd());
        return 0;
      }
      case 'schedules':
        return await schedules(api, positionals, values as RunOptions & typeof values, ctx);
      case 'changes':
        return await changes(api, positionals, values, ctx);
      case 'results':
        return await results(api, values, ctx);
    }
    throw new ArgumentError(`unknown command "${command}"`);
  } catch (error) {
    if (error instanceof ArgumentError) {
      ctx.err(`niclab ${command}: ${error.message}`);
      return 2;
    }
    if (error instanceof ClientError) {
      ctx.err(`niclab ${command}: ${error.message}`);
      return error.exitCode;
    }
    throw error;
  }
}

function need(value: string | undefined, what: string): string {
  if (!value) throw new ArgumentError(`give ${what}`);
  return value;
}

async function run(api: Api, spec: Partial<JobRequest>, o: { wait?: boolean; json?: boolean; quiet?: boolean }, ctx: ClientContext): Promise<number> {
  const submitted = await api.submit<Job>(spec);
  if (!o.wait) {
    if (o.json) ctx.out(JSON.stringify(submitted, null, 2));
    else ctx.out(submitted.id);
    return 0;
  }
  const quiet = o.quiet || o.json;
  if (!quiet) ctx.err(`job ${submitted.id}: ${submitted.progress.runsTotal} run${submitted.progress.runsTotal === 1 ? '' : 's'}`);
  let status = submitted.status;
  let done = 0;
  let total = submitted.progress.runsTotal;
  let point = '';
  let rate = '';
  const draw = () => {
    if (!ctx.tty || quiet) return;
    const width = 24;
    const filled = total ? Math.round((done / total) * width) : 0;
    process.stderr.write(`\r[${'='.repeat(filled)}${' '.repeat(width - filled)}] ${done}/${total} runs  ${point}  ${rate}`.padEnd(100).slice(0, 100));
  };
  for await (const { event, data } of api.jobEvents(submitted.id)) {
    if (event === 'status') status = data.status;
    if (event === 'progress') [done, total] = [data.runsDone, data.runsTotal];
    if (event === 'interval') rate = mbit(data.interval.bitsPerSecond);
    if (event === 'run') {
      const run = data.run;
      point = pointLabel(run.point);
      const headline = kindOf(run).headline;
      const { name, table } = headline;
      // The job's own test's flows only: an rr flow beside a stream is no part of its throughput.
      const value = combineHeadline(headline, run.flows.filter((f: Record<string, number | null>) => measuresHeadline(submitted.spec, f.flowIndex!)).map((f: Record<string, number | null>) => f[name])) ?? 0;
      const loss = run.flows.some((f: { udpLossRatio: number | null }) => f.udpLossRatio !== null) ? `, loss ${(Math.max(...run.flows.map((f: { udpLossRatio: number | null }) => f.udpLossRatio ?? 0)) * 100).toFixed(3)}%` : '';
      const figure = `${(value / table.scale).toFixed(table.digits)} ${table.unit}${loss}`;
      if (!ctx.tty && !quiet) ctx.err(`run ${run.index + 1}/${total} ${point === '-' ? '' : `${point} `}${run.status}: ${figure}${run.error ? ` (${run.error})` : ''}`);
      rate = figure;
    }
    draw();
  }
  if (ctx.tty && !quiet) process.stderr.write('\n');
  const job = await api.json<Job>('GET', `/v1/jobs/${submitted.id}`);
  if (o.json) ctx.out(JSON.stringify(job, null, 2));
  else if (o.quiet) ctx.out(job.id);
  else {
    ctx.out((await api.text(`/v1/jobs/${job.id}/report?format=table`)).trimEnd());
    if (job.error) ctx.err(`job ${short(job.id)} ${job.status}: ${job.error.code}: ${job.error.message}`);
    if (job.pairs?.failed) ctx.err(`job ${short(job.id)}: ${job.pairs.failed} of ${job.pairs.total} pairs failed`);
  }
  if ((job.status ?? status) !== 'succeeded') return 1;
  return job.pairs?.failed ? 2 : 0;
}

async function schedules(api: Api, positionals: string[], o: RunOptions & { json?: boolean; every?: string; cron?: string; tz?: string }, ctx: ClientContext): Promise<number> {
  const [action = 'list', name] = positionals;
  const print = (value: unknown) => ctx.out(JSON.stringify(value, null, 2));
  const line = (s: { name: string; cron: string | null; timezone: string | null; everySeconds: number | null; paused: boolean; nextFireAt: string | null; firings: number; skipped: number; lastJobId: string | null }) => [
    s.name, s.cron ? `cron ${s.cron} ${s.timezone}` : `every ${s.everySeconds} s`, s.paused ? 'paused' : 'active', s.nextFireAt ?? '-', String(s.firings), String(s.skipped), s.lastJobId ?? '-',
  ];
  const header = ['name', 'when', 'state', 'next', 'firings', 'skipped', 'last job'];
  switch (action) {
    case 'list': {
      const { items } = await api.json('GET', '/v1/schedules');
      if (o.json) return print(items), 0;
      ctx.out(alignTable([header, ...items.map(line)]));
      return 0;
    }
    case 'create': {
      const body: Record<string, unknown> = { name: need(name, 'a schedule name'), spec: specOf(o) };
      if (o.every) body.everySeconds = Number(o.every);
      if (o.cron) body.cron = o.cron;
      if (o.tz) body.timezone = o.tz;
      const schedule = await api.json('POST', '/v1/schedules', body);
      if (o.json) return print(schedule), 0;
      ctx.out(alignTable([header, line(schedule)]));
      return 0;
    }
    case 'show':
    case 'pause':
    case 'resume': {
      const path = `/v1/schedules/${need(name, 'a schedule name')}`;
      const schedule = action === 'show' ? await api.json('GET', path) : await api.json('POST', `${path}/${action}`);
      if (o.json) return print(schedule), 0;
      ctx.out(alignTable([header, line(schedule)]));
      return 0;
    }
    case 'delete':
      await api.json('DELETE', `/v1/schedules/${need(name, 'a schedule name')}`);
      ctx.out(`schedule ${name} deleted`);
      return 0;
  }
  throw new ArgumentError(`schedules: unknown action "${action}" (list, show, create, pause, resume, delete)`);
}

type Change = { id: string; series: { schedule: string; flowIndex: number; src: { agent: string; interface: string }; dst: { agent: string; interface: string }; point: Record<string, unknown>; figure: string }; unit: string; verdict: string; before: { finishedAt: string; mean: number }; after: { finishedAt: string; mean: number }; relative: number | null; relativeInterval: [number, number] | null; difference: number; changed: { end: string; agent: string; field: string; before: unknown; after: unknown }[]; acknowledged: { as: string; note: string } | null };

/** One change point as a row: its series, when, the step (relative when it can be), and what changed. */
function changeLine(c: Change): string[] {
  const percent = (x: number) => `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)}%`;
  const step = c.relative !== null && c.relativeInterval ? `${percent(c.relative)} [${percent(c.relativeInterval[0])}, ${percent(c.relativeInterval[1])}]` : `${c.difference.toPrecision(3)} ${c.unit}`;
  const changed = c.changed.map((x) => `${x.end} ${x.agent} ${x.field}: ${JSON.stringify(x.before)} -> ${JSON.stringify(x.after)}`).join('; ') || '-';
  return [c.id, c.series.schedule, `${c.series.src.agent}:${c.series.src.interface}->${c.series.dst.agent}:${c.series.dst.interface}`, c.series.figure, `${c.before.finishedAt.replace(/\.\d+Z$/, 'Z')} .. ${c.after.finishedAt.replace(/\.\d+Z$/, 'Z')}`, step, c.verdict, c.acknowledged ? c.acknowledged.as : 'open', changed];
}

async function changes(api: Api, positionals: string[], o: { json?: boolean; schedule?: string; agent?: string; figure?: string; since?: string; limit?: string; as?: string; note?: string }, ctx: ClientContext): Promise<number> {
  const [action = 'list', id] = positionals;
  const print = (value: unknown) => ctx.out(JSON.stringify(value, null, 2));
  const header = ['id', 'schedule', 'link', 'figure', 'between', 'step [95%]', 'verdict', 'state', 'what changed'];
  if (action === 'ack') {
    if (!o.as) throw new ArgumentError('ack needs --as expected or --as known-regression');
    const change = await api.json<Change>('POST', `/v1/changes/${need(id, 'a change point id')}/acknowledge`, { as: o.as, ...(o.note !== undefined ? { note: o.note } : {}) });
    if (o.json) return print(change), 0;
    ctx.out(alignTable([header, changeLine(change)]));
    return 0;
  }
  if (action !== 'list') throw new ArgumentError(`changes: unknown action "${action}" (list, ack)`);
  const q = new URLSearchParams();
  for (const key of ['schedule', 'agent', 'figure', 'limit'] as const) if (o[key]) q.set(key, o[key]);
  if (o.since) {
    const since = new Date(o.since);
    if (Number.isNaN(since.getTime())) throw new ArgumentError(`--since: "${o.since}" is no date (2026-11-01 or an ISO time)`);
    q.set('since', since.toISOString());
  }
  const items: Change[] = [];
  for (let cursor: string | null = null; ; ) {
    if (cursor) q.set('cursor', cursor);
    const page: { items: Change[]; next: string | null } = await api.json('GET', `/v1/changes?${q}`);
    items.push(...page.items);
    cursor = page.next;
    if (!cursor || o.limit) break;
  }
  if (o.json) return print(items), 0;
  ctx.out(items.length ? alignTable([header, ...items.map(changeLine)]) : 'no change points');
  return 0;
}

type ResultsOptions = { json?: boolean; csv?: boolean; jsonl?: boolean; openmetrics?: boolean; agent?: string; interface?: string; schedule?: string; label?: string[]; since?: string; until?: string; limit?: string };

/** An ISO time from a flag: a date or a time, as `new Date` reads it. */
function timeFlag(value: string | undefined, flag: string): string | undefined {
  if (value === undefined) return undefined;
  const at = new Date(value);
  if (Number.isNaN(at.getTime())) throw new ArgumentError(`${flag}: "${value}" is no date (2026-11-01 or an ISO time)`);
  return at.toISOString();
}

/** `niclab results`: the history, page after page, as a table, CSV, JSON lines or JSON. */
async function results(api: Api, o: ResultsOptions, ctx: ClientContext): Promise<number> {
  if ([o.json, o.csv, o.jsonl, o.openmetrics].filter(Boolean).length > 1) throw new ArgumentError('give one of --json, --csv, --jsonl and --openmetrics');
  if ((o.label ?? []).length > 1) throw new ArgumentError('--label: one key=value (the history filters by one label)');
  const q = new URLSearchParams();
  for (const key of ['agent', 'interface', 'schedule', 'limit'] as const) if (o[key]) q.set(key, o[key]);
  if (o.label?.[0]) q.set('label', o.label[0]);
  const from = timeFlag(o.since, '--since');
  const to = timeFlag(o.until, '--until') ?? new Date().toISOString();
  q.set('to', to);
  q.set('from', from ?? new Date(Date.parse(to) - 24 * 3600_000).toISOString());
  const format = o.csv ? 'csv' : o.jsonl ? 'jsonl' : 'json';
  q.set('format', format);
  const texts: string[] = [];
  for (let cursor: string | null = null, first = true; first || cursor; first = false) {
    if (cursor) q.set('cursor', cursor);
    const page = await api.page(`/v1/results?${q}`, format === 'csv' ? 'text/csv' : format === 'jsonl' ? 'application/x-ndjson' : 'application/json');
    // Each CSV page starts with the header: the first one's is kept.
    texts.push(format === 'csv' && !first ? page.text.slice(page.text.indexOf('\n') + 1) : page.text);
    cursor = o.limit ? null : page.next;
  }
  if (format !== 'json') return ctx.out(texts.join('').trimEnd()), 0;
  const items = texts.flatMap((t) => (JSON.parse(t) as { items: RunSummary[] }).items);
  if (o.json) return ctx.out(JSON.stringify(items, null, 2)), 0;
  // Rendered here from every page: a family's samples must not be split across pages' texts.
  if (o.openmetrics) return ctx.out(historyOpenMetrics(items).trimEnd()), 0;
  const rows = items.flatMap((s) => (s.flows.length ? s.flows : [null]).map((f) => [
    s.finishedAt.replace(/\.\d+Z$/, 'Z'), short(s.jobId), String(s.index), s.status, pointLabel(s.point), s.labels.schedule ?? '',
    f ? `${f.src.agent}:${f.src.interface}->${f.dst.agent}:${f.dst.interface}` : '-', f ? mbit(f.bitsPerSecond) : '-',
    f?.udpLossRatio === null || !f ? '-' : `${(f.udpLossRatio * 100).toFixed(3)}%`, f?.rttP50Seconds === null || !f ? '-' : `${(f.rttP50Seconds * 1e3).toFixed(3)} ms`, s.error ?? '',
  ]));
  ctx.out(rows.length ? alignTable([['finished', 'job', 'run', 'status', 'point', 'schedule', 'link', 'throughput', 'loss', 'rtt p50', 'error'], ...rows]) : 'no runs in that range');
  return 0;
}
