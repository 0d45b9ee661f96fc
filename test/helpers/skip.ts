import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

/**
 * A suite's `skip` option: the reason its prerequisite is missing, or false. Under CI (`CI`
 * set) nothing may be skipped, since providing the prerequisites (root, podman, iperf3) is
 * CI's job: a missing one throws, which fails the test file and names what was missing.
 */
export function skipUnlessProvided(missing: string | false): string | false {
  if (missing && process.env.CI) throw new Error(`CI is set, so this suite may not skip, but it ${missing}`);
  return missing;
}

/** Why a suite cannot run without `command` (no executable of that name on PATH), or false: `why` says what provides it. */
export function needsCommand(command: string, why: string): string | false {
  const found = (process.env.PATH ?? '').split(delimiter).some((dir) => {
    try {
      accessSync(join(dir, command), constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
  return found ? false : `needs ${command} (${why})`;
}

export const NOT_ROOT = skipUnlessProvided(process.getuid?.() !== 0 && 'needs root: the virtual lab creates network namespaces (CI runs as root)');
