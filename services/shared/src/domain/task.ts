import type { EndTuning } from './tuning-rules.js';
import type { EndDiagnostics, EndFigures, EngineName, ErrorInfo, FileIo, FileStages, Interval, JobSpec, NicDelta } from './contract.js';
import type { Measured } from './test-kinds/measured.js';

/** The measurement parameters of one run, after the sweep point is applied. */
export type EngineParams = Pick<JobSpec, 'protocol' | 'test' | 'duration' | 'bufferLength' | 'socketBuffer' | 'streams' | 'noDelay' | 'udp'> & {
  /** Seconds between interval samples (a stored spec always has it: see withDefaults). */
  interval: number;
  /** Present exactly when the test is `rr`, with both sizes resolved. */
  rr?: { requestSize: number; responseSize: number };
  /** Present exactly when the test is `probe`: milliseconds between sends, datagram bytes. */
  probe?: { interval: number; packetSize: number };
  /** A latency flow's idle baseline: its first seconds (of `duration`) run before the other flows start. */
  idleSeconds?: number;
  /** Present exactly at a file point (`io: file`): the sender reads `source`, the receiver writes a sink when `sink`. */
  file?: FileIo;
};

interface TaskBase {
  jobId: string;
  runId: string;
  /** Which leg of the run: a flow has one (forward or reverse) or two (bidir). */
  leg: number;
  engine: EngineName;
  params: EngineParams;
  /** The interface this end uses on its agent. */
  interface: string;
  /** Epoch ms by which this end must have finished, whatever its peer does. */
  deadline: number;
  /** This end's own settings (the job's shorthand merged with its role's block), applied to its interface and host for the run, then restored. */
  tuning?: EndTuning;
}

/** Listen on the interface's address and report the port, then receive until every stream ends. */
export interface ReceiverTask extends TaskBase {
  role: 'receiver';
}

/** Connect from the interface to the peer and send from `startAt` (the run's common start instant). */
export interface SenderTask extends TaskBase {
  role: 'sender';
  peer: { address: string; port: number };
  startAt: number;
  /** The MTU the run set on the receiver's interface, when it set one: the sender proves the path at its own MTU then too. */
  peerMtu?: number;
}

export type Task = ReceiverTask | SenderTask;

/** A receiver announces where it listens (pushed on the run's ready list). */
export interface ReadyReply {
  leg: number;
  address: string;
  port: number;
}

/** One end's UDP counts: a sender knows what it sent, a receiver the rest. */
export interface EndUdp {
  sent?: number;
  targetPacketsPerSecond?: number;
  achievedPacketsPerSecond?: number;
  /** Builtin sender: datagrams it sent more than LATE_MS after they were due (catching up after a stall). */
  lateDatagrams?: number;
  received?: number;
  lost?: number;
  outOfOrder?: number;
  duplicates?: number;
  jitterSeconds?: number;
  /** Where the receiver's arrival times came from: the kernel's stamp of each datagram, or when the process read it. */
  arrivalTimes?: 'kernel' | 'process';
  oneWayDelaySeconds?: { min: number; mean: number; p50: number; p99: number; max: number };
}

/** One end's outcome (pushed on the run's results list). A failure is a report with an error, never a lost reply. */
export interface EndReport {
  leg: number;
  role: Task['role'];
  figures: EndFigures | null;
  intervals: Interval[];
  nic: NicDelta | null;
  error: ErrorInfo | null;
  diagnostics: EndDiagnostics;
  retransmits?: number | null;
  udp?: EndUdp | null;
  /** What this end measured for its test kind (rr's round trips, the probe's figures or its far end's counts); the kind merges two ends' (TestKind.result). */
  measured?: Measured | null;
  /** The end's raw engine output was kept under keys.runRaw(runId). */
  rawKept?: boolean;
  /** The kernel's boot id: two ends with the same one read the same clock. */
  bootId?: string;
  /** A file point's end: what its file did in the transfer and its disk alone (merged into FlowResult.file). */
  file?: EndFile | null;
}

/** One end of a file leg as its agent saw it: the sender's source, or the receiver's sink, and its disk alone. */
export type EndFile =
  | { role: 'source'; ioMode: FileIo['ioMode']; source: NonNullable<FileStages['source']> }
  | { role: 'sink'; ioMode: FileIo['ioMode']; sink: NonNullable<FileStages['sink']> };

/** One direction of data of one flow: the flow's own (forward) or back from its `to` end (reverse). */
export interface Leg {
  flowIndex: number;
  direction: 'forward' | 'reverse';
  sender: { agent: string; interface: string };
  receiver: { agent: string; interface: string };
}
