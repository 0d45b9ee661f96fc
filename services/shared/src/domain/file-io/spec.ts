/**
 * File I/O (`file`): a stream whose source is a file read from disk and/or whose sink writes
 * to disk, beside memory to memory. What a spec's file block means for a run: which points read
 * and write files, what they default to, and how long an end of one takes beyond its transfer.
 */
import type { FileIo, JobSpec, SweepPoint } from '../contract.js';

/** Seconds an end of a file point may take beyond its transfer and its disk probe: the cache drops, the sink's removal. */
export const FILE_SETUP_SECONDS = 3;

/** The file block a run at `point` uses: the spec's at a file point (`io: file`), none at a memory point or without `file`. */
export function fileAt(spec: Pick<JobSpec, 'file'>, point: SweepPoint): FileIo | undefined {
  return spec.file && point.io !== 'memory' ? spec.file : undefined;
}

/** `sweep.io` made `[memory, file]` when `file` is given without it, so the report compares the two. */
export function withFileDefaults(spec: JobSpec): JobSpec {
  if (!spec.file || spec.sweep?.io) return spec;
  return { ...spec, sweep: { ...spec.sweep, io: ['memory', 'file'] } };
}

/** Seconds a run at `point` gives its ends beyond the load: each end's disk probe after its transfer, and the file work around it. */
export function fileSeconds(spec: Pick<JobSpec, 'file'>, point: SweepPoint): number {
  const file = fileAt(spec, point);
  return file ? (file.probeSeconds ?? 2) + FILE_SETUP_SECONDS : 0;
}
