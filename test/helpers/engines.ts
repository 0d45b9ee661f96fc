import type { EngineOutcome } from '@niclab/agent/engines/engine';
import type { ENGINES } from '@niclab/agent/engines/registry';
import type { EngineParams, ReceiverTask, SenderTask } from '@niclab/shared/domain/task';
import type { RrMeasured } from '@niclab/shared/domain/test-kinds/rr/measured';

export type TestEngine = NonNullable<(typeof ENGINES)['builtin']>;

/**
 * Runs a receiver and then a sender against it on loopback, as the coordinator would: the
 * receiver first, the sender once the receiver said its port, both to the same deadline.
 */
export async function enginePair(
  engine: TestEngine,
  params: EngineParams,
  options: {
    runId?: string; signal?: AbortSignal; pids?: number[]; beforeSend?: (port: number) => Promise<void>; startInMs?: number;
    /** Wraps each end's start (engine.run, which forks its child at once): e.g. test/helpers/no-koffi.ts's withoutKoffi. */
    spawnWith?: (start: () => Promise<EngineOutcome>) => Promise<EngineOutcome>;
    /** A file point's ends, as the agent hands them over: the sender reads `source`, the receiver writes `sink`. */
    file?: { source?: string; sink?: string; dsync?: boolean };
  } = {},
): Promise<[EngineOutcome, EngineOutcome]> {
  const spawnWith = options.spawnWith ?? ((start) => start());
  const ids = { jobId: '00000000-0000-4000-8000-000000000001', runId: options.runId ?? '00000000-0000-4000-8000-000000000002', leg: 0 };
  const signal = options.signal ?? new AbortController().signal;
  const spawned = (pid: number) => options.pids?.push(pid);
  const deadline = Date.now() + (params.duration + 10) * 1000;
  let ready!: (port: number) => void;
  const port = new Promise<number>((resolve) => (ready = resolve));
  const receiverTask: ReceiverTask = { ...ids, role: 'receiver', engine: engine.name, params, interface: 'lo', deadline };
  const file = (part: 'source' | 'sink') => (options.file?.[part] ? { file: { [part]: options.file[part], dsync: options.file.dsync ?? false } } : {});
  const receiver = spawnWith(() => engine.run(receiverTask, { signal, address: '127.0.0.1', ready, spawned, ...file('sink') }));
  const peerPort = await port;
  await options.beforeSend?.(peerPort);
  const senderTask: SenderTask = { ...ids, role: 'sender', engine: engine.name, params, interface: 'lo', deadline, peer: { address: '127.0.0.1', port: peerPort }, startAt: Date.now() + (options.startInMs ?? 100) };
  const sender = spawnWith(() => engine.run(senderTask, { signal, address: '127.0.0.1', ready: () => undefined, spawned, ...file('source') }));
  return Promise.all([sender, receiver]);
}

/**
 * What an end `measured` for its kind, read as that kind's: the requesting end's rr figures, a
 * probe's sending end's figures or its far end's counts (undefined when the end has none).
 */
export const measuredRr = (end: EngineOutcome) => (end.measured as RrMeasured | null | undefined)?.rr;
export const measuredProbe = (end: EngineOutcome) => (end.measured && 'probe' in end.measured ? end.measured.probe : undefined);
export const measuredReflector = (end: EngineOutcome) => (end.measured && 'reflector' in end.measured ? end.measured.reflector : undefined);
