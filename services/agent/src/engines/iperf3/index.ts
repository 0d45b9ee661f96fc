import { createServer } from 'node:net';
import { command } from '@niclab/shared/runtime/command';
import type { EngineInfo, ErrorInfo } from '@niclab/shared/domain/contract';
import { udpBitsPerSecond, udpPacketsPerSecond } from '@niclab/shared/domain/udp-rate';
import type { Task } from '@niclab/shared/domain/task';
import type { Engine, EngineContext, EngineOutcome } from '../engine.js';
import { abortError, runProcess, type ProcessOutcome } from '../child.js';
import { parseEnd, type Iperf3Json } from './parse.js';

interface Probe {
  info: EngineInfo;
  bindDev: boolean;
}

let probed: Promise<Probe> | undefined;

/** Is iperf3 installed, which version, can it bind to a device (SO_BINDTODEVICE)? Asked once. */
function probeIperf3(): Promise<Probe> {
  probed ??= (async () => {
    try {
      const version = (await command('iperf3', ['--version'])).split('\n')[0]?.trim() ?? 'iperf3';
      const help = await command('iperf3', ['--help']).catch((error: Error) => error.message);
      return { info: { available: true, version }, bindDev: help.includes('--bind-dev') };
    } catch (error) {
      const missing = /ENOENT/.test((error as Error).message);
      return { info: { available: false, reason: missing ? 'iperf3 is not installed (apt-get install iperf3)' : (error as Error).message }, bindDev: false };
    }
  })();
  return probed;
}

/** A TCP port free on this address right now (iperf3's server needs a number; 0 is not one). */
function freePort(address: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, address, () => {
      const bound = server.address();
      server.close(() => resolve(typeof bound === 'object' && bound ? bound.port : 0));
    });
  });
}

/** Waits until something listens on the port (iperf3 prints nothing before the end with --json). */
async function listening(port: number, signal: AbortSignal, exited: () => boolean): Promise<boolean> {
  const deadline = Date.now() + 5000;
  while (Date.now() < deadline && !signal.aborted && !exited()) {
    const out = await command('ss', ['-Hltn', `sport = :${port}`]).catch(() => '');
    if (out.trim()) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return false;
}

/** Tries for a server that listens: the port found free can be taken before iperf3 binds it (another socket's source port). */
const LISTEN_ATTEMPTS = 3;

/** iperf3's server on a free port of the receiver's address, told to `context.ready` once it listens. */
async function serve(params: Task['params'], context: EngineContext): Promise<{ argv: string[]; port: number; running: Promise<ProcessOutcome> }> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort(context.address);
    // --idle-timeout: a client that vanishes never leaves the server waiting forever.
    const argv = ['iperf3', '-s', '-1', '-B', context.address, '-p', String(port), '-i', String(params.interval), '--json', '--idle-timeout', String(Math.ceil(params.duration) + 30)];
    // A file sink: the server writes what it receives to it (iperf3 -F on the receiving side).
    if (context.file?.sink) argv.push('-F', context.file.sink);
    let exited = false;
    const running = runProcess(argv, context.signal, context.spawned);
    void running.then(() => (exited = true));
    if (await listening(port, context.signal, () => exited)) {
      context.ready(port);
      return { argv, port, running };
    }
    const outcome = await running;
    if (attempt >= LISTEN_ATTEMPTS || !/address already in use/i.test(outcome.stdout + outcome.stderr)) return { argv, port, running };
  }
}

function failure(outcome: ProcessOutcome, json: Iperf3Json | null): ErrorInfo {
  if (outcome.aborted) return outcome.aborted;
  if (outcome.spawnError) {
    const missing = (outcome.spawnError as NodeJS.ErrnoException).code === 'ENOENT';
    return { code: missing ? 'engine_unavailable' : 'engine_failed', message: missing ? 'iperf3 is not installed on this agent' : outcome.spawnError.message };
  }
  const text = json?.error ?? (outcome.stderr.trim() || `iperf3 exited with ${outcome.signal ?? `code ${outcome.code}`}`);
  return { code: /connect|refused|unreachable/i.test(text) ? 'connect_failed' : 'engine_failed', message: `iperf3: ${text}` };
}

/** iperf3 (JSON output): one server per leg on the receiver's interface, the client bound to the sender's. */
export const iperf3Engine: Engine = {
  name: 'iperf3',

  async capabilities() {
    return (await probeIperf3()).info;
  },

  async run(task, context): Promise<EngineOutcome> {
    const { params } = task;
    const probe = await probeIperf3();
    let argv: string[];
    let port: number;
    let running: Promise<ProcessOutcome>;
    if (task.role === 'receiver') {
      ({ argv, port, running } = await serve(params, context));
    } else {
      port = task.peer.port;
      const wait = task.startAt - Date.now();
      if (wait > 0 && !context.signal.aborted) await new Promise((r) => setTimeout(r, wait));
      argv = ['iperf3', '-c', task.peer.address, '-p', String(port), '-B', context.address];
      if (probe.bindDev) argv.push('--bind-dev', task.interface);
      argv.push('-t', String(params.duration), '-i', String(params.interval), '-P', String(params.streams), '--json');
      // iperf3's -b is each stream's: the flow's rate is shared by its streams, as the builtin's is.
      if (params.udp) argv.push('-u', '-b', String(Math.round(udpBitsPerSecond(params.udp) / params.streams)), '-l', String(params.udp.packetSize));
      else argv.push('-l', String(params.bufferLength));
      if (params.noDelay) argv.push('-N');
      if (params.socketBuffer !== undefined) argv.push('-w', String(params.socketBuffer));
      // A file source: the client sends the file from its start and ends the test at its end (iperf3 -F).
      if (context.file?.source) argv.push('-F', context.file.source);
      running = runProcess(argv, context.signal, context.spawned);
    }
    const outcome = await running;
    const base: EngineOutcome = { figures: null, intervals: [], error: null, command: argv, port, engineVersion: probe.info.version };
    if (outcome.stdout.trim()) base.raw = outcome.stdout;
    let json: Iperf3Json | null = null;
    try {
      json = JSON.parse(outcome.stdout) as Iperf3Json;
    } catch {
      // no JSON: it failed before producing any; failure() says why
    }
    if (context.signal.aborted) return { ...base, error: abortError(context.signal) };
    if (!json || json.error || outcome.code !== 0) return { ...base, error: failure(outcome, json) };
    try {
      const end = parseEnd(json, task.role, params.udp?.packetSize);
      // A UDP sender offered its datagrams over the run's length, as the builtin's says.
      const udp = end.udp && task.role === 'sender' && params.udp ? { ...end.udp, targetPacketsPerSecond: udpPacketsPerSecond(params.udp), achievedPacketsPerSecond: (end.udp.sent ?? 0) / params.duration } : end.udp;
      return { ...base, figures: end.figures, intervals: end.intervals, retransmits: end.retransmits, udp, socketBuffers: end.socketBuffers };
    } catch (error) {
      return { ...base, error: { code: 'engine_failed', message: `iperf3 output: ${(error as Error).message}` } };
    }
  },
};
