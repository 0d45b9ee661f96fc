import { constants } from 'node:fs';
import { open, stat } from 'node:fs/promises';
import type { DiskRate, EndDiagnostics, ErrorInfo, FileIo } from '@niclab/shared/domain/contract';
import type { EndFile, Task } from '@niclab/shared/domain/task';
import { command } from '@niclab/shared/runtime/command';
import type { EngineFile, EngineOutcome } from '../engines/engine.js';
import { FileError, type FileArea } from './file-area.js';
import { readRate, writeRate, type ProbeOptions } from './disk-probe.js';

/** GNU dd's request to drop a file's pages from the page cache (posix_fadvise DONTNEED over the whole file), as an argument vector. */
export const dropCacheArgv = (path: string) => ['dd', `if=${path}`, 'iflag=nocache', 'count=0', 'status=none'];

/**
 * Drops a file's pages from the page cache: its dirty pages written first (fdatasync: DONTNEED
 * leaves dirty pages where they are, so a source written just before the run would stay cached),
 * then dd's DONTNEED. Returns the command it ran; rejects with what failed.
 */
export async function dropPageCache(path: string, signal?: AbortSignal): Promise<string[]> {
  const handle = await open(path, constants.O_RDONLY | constants.O_NOFOLLOW);
  try {
    await handle.datasync();
  } finally {
    await handle.close();
  }
  const argv = dropCacheArgv(path);
  await command(argv[0]!, argv.slice(1), signal);
  return argv;
}

/** A failure of an end's file as its run error (a FileError's own code; anything else is an I/O failure). */
export function fileError(error: unknown): ErrorInfo {
  return error instanceof FileError ? { code: error.code, message: error.message } : { code: 'file_io', message: `the end's file: ${(error as Error).message}` };
}

/** A disk probe's failure: what it was doing, as the run's error (an abort passes through). */
const probeFailure = (what: string, signal: AbortSignal) => (error: Error): never => {
  if (signal.aborted) throw error;
  throw new FileError('file_io', `${what} failed: ${error.message}`);
};

/**
 * One end of a file point, around its engine: before it, the source found in the agent's file
 * directory (its page cache dropped when asked) or the sink's temporary file made; after it, what
 * the transfer did (the source's end reached, what the engine wrote) and the end's disk alone in
 * the same directory with the same I/O mode; and its temporary files removed however it ended.
 */
export class FileLeg {
  readonly engineFile: EngineFile;
  readonly diagnostics: NonNullable<EndDiagnostics['file']>;
  private readonly temporaries: string[] = [];

  private constructor(
    private readonly task: Task,
    private readonly file: FileIo,
    private readonly area: FileArea,
    private readonly source: { path: string; sizeBytes: number } | null,
    private readonly signal: AbortSignal,
  ) {
    this.engineFile = { dsync: file.ioMode === 'dsync' };
    this.diagnostics = { path: source?.path ?? '', commands: [] };
  }

  /**
   * The end's file made ready for its engine, or null when this end has none at this point (a
   * memory point, a sender without a source, a receiver without a sink). Throws a FileError.
   */
  static async prepare(task: Task, area: FileArea | undefined, agentId: string, signal: AbortSignal): Promise<FileLeg | null> {
    const file = task.params.file;
    const role = task.role === 'sender' ? (file?.source !== undefined ? 'source' : null) : file?.sink ? 'sink' : null;
    if (!file || !role) return null;
    if (!area) throw new FileError('file_refused', `agent ${agentId} has no file directory (NICLAB_FILE_DIR) to ${role === 'source' ? 'read the source from' : 'write the sink in'}`);
    if (role === 'source') {
      const leg = new FileLeg(task, file, area, await area.source(file.source!), signal);
      if (file.dropCache) await leg.dropCache();
      leg.engineFile.source = leg.source!.path;
      return leg;
    }
    const leg = new FileLeg(task, file, area, null, signal);
    const sink = await leg.temporary('sink');
    leg.engineFile.sink = sink;
    leg.diagnostics.path = sink;
    // iperf3 opens its sink itself, without O_DSYNC: the file's synchronous-update attribute makes its writes synchronous.
    if (leg.engineFile.dsync && task.engine === 'iperf3') await leg.run(['chattr', '+S', sink], "setting the sink's synchronous attribute (chattr +S)");
    return leg;
  }

  /**
   * After the engine: what the transfer did, then the end's disk alone (a source read again from
   * its start, its cache dropped again when asked; a sink's file replaced by a probe's of its own).
   */
  async finish(outcome: EngineOutcome): Promise<EndFile> {
    const probe: ProbeOptions = { blockBytes: this.task.params.bufferLength, seconds: this.file.probeSeconds, signal: this.signal };
    if (this.source) {
      const endedAtEof = (outcome.figures?.bytes ?? 0) >= this.source.sizeBytes;
      if (this.file.dropCache) await this.dropCache();
      const disk = await readRate(this.source.path, probe).catch(probeFailure('reading the source alone', this.signal));
      return { role: 'source', ioMode: this.file.ioMode, source: { path: this.file.source!, sizeBytes: this.source.sizeBytes, endedAtEof, cacheDropped: this.file.dropCache, disk } };
    }
    const sink = this.engineFile.sink!;
    const writtenBytes = (await stat(sink)).size;
    const received = outcome.figures?.bytes ?? 0;
    // iperf3 does not check its writes to the sink: a full file system shows only here.
    if (writtenBytes < received) throw new FileError('file_io', `the engine wrote ${writtenBytes} of the ${received} bytes it received to the sink (the file system full?)`);
    await this.area.remove(sink); // its space back before the probe writes
    const path = await this.temporary('probe');
    const disk: DiskRate = await writeRate(path, this.engineFile.dsync, probe).catch(probeFailure('writing alone in the file directory', this.signal));
    return { role: 'sink', ioMode: this.file.ioMode, sink: { writtenBytes, removed: false, disk } };
  }

  /** Removes the end's temporary files; true when none is left. */
  async cleanup(): Promise<boolean> {
    const removed = await Promise.all(this.temporaries.map((path) => this.area.remove(path)));
    return removed.every(Boolean);
  }

  private async temporary(kind: 'sink' | 'probe'): Promise<string> {
    const path = await this.area.temporary(this.task.runId, this.task.leg, this.task.role, kind);
    this.temporaries.push(path);
    return path;
  }

  private async dropCache(): Promise<void> {
    this.diagnostics.commands.push(dropCacheArgv(this.source!.path));
    await dropPageCache(this.source!.path, this.signal).catch(this.failed("dropping the source's page cache"));
  }

  /** A command for the file beside the engine (argument array), kept in the end's diagnostics. */
  private async run(argv: string[], what: string): Promise<void> {
    this.diagnostics.commands.push(argv);
    await command(argv[0]!, argv.slice(1), this.signal).catch(this.failed(what));
  }

  /** A failure of `what` as the end's file_io error (an abort passes through as it is). */
  private failed(what: string): (error: Error) => never {
    return (error) => {
      if (this.signal.aborted) throw error;
      throw new FileError('file_io', `${what} failed: ${error.message}`);
    };
  }
}
