import { constants } from 'node:fs';
import { access, open, readdir, realpath, stat, unlink } from 'node:fs/promises';
import { join, sep } from 'node:path';
import { ConfigError } from '@niclab/shared/runtime/config';
import type { Logger } from '@niclab/shared/runtime/logger';

/** Why an end could not use its file: the run error it fails with, and a sentence. */
export class FileError extends Error {
  constructor(readonly code: 'file_refused' | 'file_io', message: string) {
    super(message);
    this.name = 'FileError';
  }
}

/** What an end makes in the directory: the sink's file, and the disk probe's. Hidden, so no source can name one. */
export type TemporaryKind = 'sink' | 'probe';

/**
 * The agent's file directory (NICLAB_FILE_DIR): the only place a job's source is read from and
 * its sink written to. Every path is checked against it when a run uses it (realpath: a symlink
 * out of it is refused), and the temporary files of this agent carry its id, so the ones a
 * killed agent left behind are removed when it starts again, and no other agent's are.
 */
export class FileArea {
  private constructor(
    /** The directory's real path. */
    readonly directory: string,
    private readonly agentId: string,
    private readonly log: Logger,
  ) {}

  /** The configured directory, checked: it must exist, be a directory and be writable (else the agent does not start). */
  static async open(configured: string, agentId: string, log: Logger): Promise<FileArea> {
    try {
      const real = await realpath(configured);
      if (!(await stat(real)).isDirectory()) throw new Error('is not a directory');
      await access(real, constants.R_OK | constants.W_OK | constants.X_OK);
      return new FileArea(real, agentId, log);
    } catch (error) {
      throw new ConfigError('NICLAB_FILE_DIR', `"${configured}" cannot be the agent's file directory: ${(error as Error).message}`);
    }
  }

  /** Where `relative` really is, if inside the directory (its real path, symlinks resolved): a regular, non-empty file. */
  async source(relative: string): Promise<{ path: string; sizeBytes: number }> {
    let real: string;
    try {
      real = await realpath(join(this.directory, relative));
    } catch (error) {
      const missing = (error as NodeJS.ErrnoException).code === 'ENOENT';
      throw new FileError('file_refused', `the source "${relative}" ${missing ? 'does not exist' : `cannot be resolved (${(error as Error).message})`} in the file directory of agent ${this.agentId}`);
    }
    if (!real.startsWith(this.directory + sep)) throw new FileError('file_refused', `the source "${relative}" leads out of the file directory of agent ${this.agentId} (to ${real})`);
    const info = await stat(real).catch((error: Error) => {
      throw new FileError('file_refused', `the source "${relative}" cannot be read: ${error.message}`);
    });
    if (!info.isFile()) throw new FileError('file_refused', `the source "${relative}" on agent ${this.agentId} is not a regular file`);
    if (info.size === 0) throw new FileError('file_refused', `the source "${relative}" on agent ${this.agentId} is empty`);
    return { path: real, sizeBytes: info.size };
  }

  /** A temporary file of this end's, made empty (its name its own: created exclusively, mode 0600). */
  async temporary(runId: string, leg: number, role: string, kind: TemporaryKind): Promise<string> {
    const path = join(this.directory, `${this.prefix}${runId}-${leg}-${role}.${kind}`);
    try {
      const handle = await open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL | constants.O_NOFOLLOW, 0o600);
      await handle.close();
      return path;
    } catch (error) {
      throw new FileError('file_refused', `the ${kind} file could not be made in the file directory of agent ${this.agentId}: ${(error as Error).message}`);
    }
  }

  /** Removes a temporary file; true when it is gone (or was never made). */
  async remove(path: string): Promise<boolean> {
    try {
      await unlink(path);
      return true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return true;
      this.log.error({ err: error, path }, 'a temporary file could not be removed');
      return false;
    }
  }

  /** Removes what a previous life of this agent left (it was killed mid-run); returns the names removed. */
  async recover(): Promise<string[]> {
    const names = (await readdir(this.directory)).filter((name) => name.startsWith(this.prefix) && /\.(sink|probe)$/.test(name));
    const removed: string[] = [];
    for (const name of names) if (await this.remove(join(this.directory, name))) removed.push(name);
    if (removed.length > 0) this.log.warn({ removed }, 'removed temporary files a previous run of this agent left');
    return removed;
  }

  /** This agent's temporary files: hidden (a source may not start with "."), named by the agent and "@", which no agent id has. */
  private get prefix(): string {
    return `.niclab-${this.agentId}@`;
  }
}
