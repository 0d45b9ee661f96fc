import type { EndDiagnostics, EndFigures, EngineInfo, EngineName, ErrorInfo, Interval } from '@niclab/shared/domain/contract';
import type { EndUdp, Task } from '@niclab/shared/domain/task';
import type { Measured } from '@niclab/shared/domain/test-kinds/measured';

/** What the agent gives an engine for one end of one flow. */
export interface EngineContext {
  /** Aborted on cancel, on the run's deadline and on agent shutdown; the engine must stop at once. */
  signal: AbortSignal;
  /** The address of the task's interface; the engine binds to it. */
  address: string;
  /** A receiver calls this once it listens, with its port. */
  ready(port: number): void;
  /** A sender calls this once it is loaded and waits only for the run's start (engines that can tell). */
  armed?(): void;
  /** Told the PID of every process the engine starts, so the agent can account for them. */
  spawned?(pid: number): void;
  /** A receiver's interval sample as it is taken (engines that can report live). */
  interval?(sample: Interval): void;
  /** A file point's end: the file it reads (a sender) or writes (a receiver), as the agent checked and made it. */
  file?: EngineFile;
}

/** What an engine is given of a file point (JobSpec.file): real paths inside the agent's file directory. */
export interface EngineFile {
  /** The sender reads its data from this file, from its start, and stops at its end. */
  source?: string;
  /** The receiver writes what it receives to this file (made empty by the agent). */
  sink?: string;
  /** The sink's every write on the device before the next (ioMode dsync). */
  dsync: boolean;
}

/** One end's outcome. A failed measurement is an outcome with an error, not an exception. */
export interface EngineOutcome {
  figures: EndFigures | null;
  intervals: Interval[];
  error: ErrorInfo | null;
  /** The exact argument vector of the engine process, for diagnostics. */
  command: string[];
  port: number | null;
  /** TCP retransmits seen by a sender, where the engine can read them. */
  retransmits?: number | null;
  /** This end's UDP counts. */
  udp?: EndUdp | null;
  /** What this end measured for its test kind (the requesting end of an rr test, either end of a probe). */
  measured?: Measured | null;
  socketBuffers?: EndDiagnostics['socketBuffers'];
  /** A TCP sender's TCP_INFO chronograph, summed over its connections. */
  tcpTimes?: EndDiagnostics['tcpTimes'];
  engineVersion?: string;
  /** The tool's own report (iperf3's JSON), kept as it was printed. */
  raw?: string;
}

/**
 * An engine: one file or folder under engines/, found through the registry. What it can run
 * (its test kinds, its rules) is shared/engine-rules.ts, which the API checks without it.
 */
export interface Engine {
  readonly name: EngineName;
  /** What this host can run (is the tool installed, which version). */
  capabilities(): Promise<EngineInfo>;
  run(task: Task, context: EngineContext): Promise<EngineOutcome>;
}
