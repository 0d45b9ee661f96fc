import { readFile } from 'node:fs/promises';
import type { Redis } from 'ioredis';
import type { AgentInterface, EndDiagnostics, ErrorInfo, NicDelta } from '@niclab/shared/domain/contract';
import type { Keys } from '@niclab/shared/stores/keys';
import type { Logger } from '@niclab/shared/runtime/logger';
import { publishJobEvent } from '@niclab/shared/stores/events';
import { RunChannel } from '@niclab/shared/stores/run-channel';
import type { EndFile, EndReport, Task } from '@niclab/shared/domain/task';
import { taskProblems } from '@niclab/shared/runtime/task-check';
import type { Engine, EngineFile, EngineOutcome } from './engines/engine.js';
import { engineFor } from './engines/registry.js';
import type { Tuner } from './tuning.js';
import { bindAddress, isUsable } from '@niclab/shared/domain/interfaces';
import { counterDelta, readCounters, readEnvironment, readInterface } from './interfaces.js';
import { HostWatch } from './host-counters.js';
import { pathMtuMessage, provePathMtu } from './path-mtu.js';
import { abortError } from './engines/child.js';
import type { FileArea } from './files/file-area.js';
import { FileLeg, fileError } from './files/file-leg.js';

/** The kernel's boot id, read once: equal on every end that shares this kernel's clock. */
let bootId: Promise<string | undefined> | undefined;
const readBootId = () => (bootId ??= readFile('/proc/sys/kernel/random/boot_id', 'utf8').then((id) => id.trim(), () => undefined));

/** Raw engine output larger than this is not kept (a long run with fine intervals). */
export const RAW_OUTPUT_MAX_BYTES = 8 * 1024 * 1024;

export interface ProcessorDeps {
  agentId: string;
  redis: Redis;
  keys: Keys;
  log: Logger;
  /** Applies and restores a job's tuning; absent, a task with tuning is refused. */
  tuner?: Tuner;
  /** The agent's file directory (NICLAB_FILE_DIR); absent, a task with a file is refused. */
  files?: FileArea;
}

/**
 * Runs one end of one flow: checks the task again (nothing unvalidated reaches a process),
 * reads the interface's counters around the engine, and always answers with a report.
 */
export async function processTask(task: Task, signal: AbortSignal, deps: ProcessorDeps): Promise<EndReport> {
  const channel = new RunChannel(deps.redis, deps.keys, task.runId);
  const log = deps.log.child({ jobId: task.jobId, runId: task.runId, leg: task.leg, role: task.role, interface: task.interface });
  const diagnostics: EndDiagnostics = { agent: deps.agentId, interface: task.interface, address: '', port: null, command: [] };
  const report = async (error: ErrorInfo | null, rest: Partial<EndReport> = {}): Promise<EndReport> => {
    const full: EndReport = { leg: task.leg, role: task.role, figures: null, intervals: [], nic: null, error, diagnostics, bootId: await readBootId(), ...rest };
    await channel.postReport(full);
    log.info({ outcome: error ? error.code : 'ok', bitsPerSecond: full.figures?.realBitsPerSecond }, 'task finished');
    return full;
  };

  const problems = taskProblems(task);
  if (problems) return report({ code: 'invalid_task', message: `the agent refused the task: ${problems}` });
  const engine = engineFor(task.engine);
  if (!engine) return report({ code: 'engine_unavailable', message: `agent ${deps.agentId} has no ${task.engine} engine` });
  if (Date.now() >= task.deadline) return report({ code: 'deadline_exceeded', message: 'the task reached the agent after its deadline' });
  // The interface is read while Redis answers whether the run was abandoned: the end starts sooner.
  const iface = readInterface(task.interface);
  if (await channel.isAbandoned()) return report({ code: 'canceled', message: 'the run was canceled or abandoned before this end started' });
  const proving = task.role === 'sender' && (task.tuning?.mtu !== undefined || task.peerMtu !== undefined);
  if (!task.tuning && !proving) return measure({ task, engine, signal, deps, channel, diagnostics, report, log, reading: iface });
  if (task.tuning && !deps.tuner) return report({ code: 'tuning_failed', message: `agent ${deps.agentId} cannot apply tuning` });
  const tuner = task.tuning ? deps.tuner : undefined;
  try {
    if (tuner) diagnostics.tuning = await tuner.apply(task.runId, task.interface, task.tuning!);
  } catch (error) {
    return report({ code: 'tuning_failed', message: (error as Error).message });
  }
  // Restored before the report goes out: the coordinator starts the next run (which may tune
  // the same interface again) only once every end has reported.
  let released = !tuner;
  const release = async () => {
    if (released) return;
    released = true;
    await tuner!.release(task.runId).catch((error: Error) => log.error({ err: error }, 'restoring the tuning failed'));
  };
  const restoreThenReport: typeof report = async (error, rest) => {
    await release();
    return report(error, rest);
  };
  try {
    // A sender proves the path carries the MTU it will send at before it measures anything at it:
    // its own as set, or, when only the receiver's was set, its interface's as it is.
    // (An interface that cannot be read has no MTU to prove: the measurement says it is missing.)
    const mtu = proving ? (task.tuning?.mtu ?? (await iface)?.mtu) : null;
    if (task.role === 'sender' && typeof mtu === 'number') {
      const proof = await provePathMtu(task.interface, task.peer.address, mtu, signal).catch((error: Error) => error);
      if (proof instanceof Error) return await restoreThenReport(signal.aborted ? abortError(signal) : { code: 'path_mtu', message: `the path's MTU could not be probed: ${proof.message}` });
      diagnostics.pathMtu = proof;
      if (!proof.passed) return await restoreThenReport({ code: 'path_mtu', message: pathMtuMessage(proof, `${deps.agentId}:${task.interface}`, task.peer.address, task.peerMtu) });
    }
    // Read again: tuning may change what the interface reports (its MTU).
    return await measure({ task, engine, signal, deps, channel, diagnostics, report: restoreThenReport, log, reading: tuner ? readInterface(task.interface) : iface });
  } finally {
    await release();
  }
}

/** What one measurement works with: its task and engine, the run's channel, and how it reports. */
interface Measurement {
  task: Task;
  engine: Engine;
  signal: AbortSignal;
  deps: ProcessorDeps;
  channel: RunChannel;
  diagnostics: EndDiagnostics;
  report: (error: ErrorInfo | null, rest?: Partial<EndReport>) => Promise<EndReport>;
  log: Logger;
  /** The interface as it is read now (a run that tuned it reads it again after). */
  reading: Promise<AgentInterface | null>;
}

/** The measurement itself: the interface checked, its counters read around the engine. */
async function measure(measurement: Measurement): Promise<EndReport> {
  const { task, signal, deps, channel, diagnostics, report, log, reading } = measurement;
  const iface = await reading;
  if (!iface) return report({ code: 'interface_missing', message: `agent ${deps.agentId} has no interface ${task.interface}` });
  if (!isUsable(iface)) return report({ code: 'interface_down', message: `interface ${task.interface} on agent ${deps.agentId} is ${iface.operstate}` });
  const address = bindAddress(iface);
  if (!address) return report({ code: 'no_address', message: `interface ${task.interface} on agent ${deps.agentId} has no address` });
  diagnostics.address = address;
  const [environment, before] = await Promise.all([readEnvironment(iface), readCounters(task.interface)]);
  diagnostics.environment = environment;

  // A file point's end: its file found or made before the engine, its disk measured alone after
  // it, and its temporary files removed however it ends (an agent killed meanwhile: at its start).
  const leg = await FileLeg.prepare(task, deps.files, deps.agentId, signal).catch((error: unknown) => (signal.aborted ? abortError(signal) : fileError(error)));
  if (leg && !(leg instanceof FileLeg)) return report(leg);
  if (leg) diagnostics.file = leg.diagnostics;
  let file: EndFile | null = null;
  let outcome: EngineOutcome;
  let nic: NicDelta | null;
  let error: ErrorInfo | null;
  try {
    ({ outcome, nic } = await runEngine(measurement, before, leg?.engineFile));
    error = outcome.error;
    if (leg && !error) file = await leg.finish(outcome).catch((failure: unknown) => ((error = signal.aborted ? abortError(signal) : fileError(failure)), null));
  } finally {
    const removed = await leg?.cleanup();
    if (file?.role === 'sink') file.sink.removed = removed ?? true;
  }
  const rawKept = await keepRaw(outcome, channel, task, log);
  return report(error, { figures: outcome.figures, intervals: outcome.intervals, nic, retransmits: outcome.retransmits ?? null, udp: outcome.udp ?? null, measured: outcome.measured ?? null, rawKept, ...(leg ? { file } : {}) });
}

/** The engine run between the interface's counters, its diagnostics recorded. */
async function runEngine({ task, engine, signal, deps, channel, diagnostics, log }: Measurement, before: Awaited<ReturnType<typeof readCounters>>, file: EngineFile | undefined): Promise<{ outcome: EngineOutcome; nic: NicDelta | null }> {
  const { redis, keys } = deps;
  log.info({ engine: task.engine }, 'task started');
  diagnostics.engineStartedAt = new Date().toISOString();
  const watch = HostWatch.start(task.interface, task.runId, task.leg, signal);
  const outcome = await engine.run(task, {
    signal,
    address: diagnostics.address,
    ...(file ? { file } : {}),
    spawned: (pid) => watch.engineStarted(pid),
    interval: (sample) => {
      void publishJobEvent(redis, keys, task.jobId, { type: 'interval', runId: task.runId, leg: task.leg, role: 'receiver', agent: deps.agentId, interface: task.interface, interval: sample }).catch(() => undefined);
    },
    ready: (port) => {
      void channel.postReady({ leg: task.leg, address: diagnostics.address, port });
    },
  }).catch((error: unknown) => {
    watch.cancel();
    throw error;
  });
  diagnostics.engineEndedAt = new Date().toISOString();
  const [after, host] = await Promise.all([readCounters(task.interface), watch.finish().catch((error: Error) => (log.warn({ err: error }, 'reading the host counters failed'), null))]);
  if (host) diagnostics.host = host;
  const nic: NicDelta | null = before && after ? { agent: deps.agentId, interface: task.interface, ...counterDelta(before, after) } : null;
  diagnostics.port = outcome.port;
  diagnostics.command = outcome.command;
  if (outcome.engineVersion) diagnostics.engineVersion = outcome.engineVersion;
  if (outcome.socketBuffers) diagnostics.socketBuffers = outcome.socketBuffers;
  if (outcome.tcpTimes) diagnostics.tcpTimes = outcome.tcpTimes;
  return { outcome, nic };
}

/** The engine's raw output kept beside the run, when it has one small enough. */
async function keepRaw(outcome: EngineOutcome, channel: RunChannel, task: Task, log: Logger): Promise<boolean> {
  if (outcome.raw === undefined) return false;
  const bytes = Buffer.byteLength(outcome.raw);
  if (bytes > RAW_OUTPUT_MAX_BYTES) {
    log.warn({ bytes, limit: RAW_OUTPUT_MAX_BYTES }, 'raw engine output too large to keep');
    return false;
  }
  await channel.saveRaw(task.leg, task.role, outcome.raw);
  return true;
}
