import { execFileSync } from 'node:child_process';

/**
 * A suite's `skip` option: the reason its prerequisite is missing, or false. Under CI (`CI`
 * set) nothing may be skipped, since providing the prerequisites (root, podman, iperf3) is
 * CI's job: a missing one throws, which fails the test file and names what was missing.
 */
export function skipUnlessProvided(missing: string | false): string | false {
  if (missing && process.env.CI) throw new Error(`CI is set, so this suite may not skip, but it ${missing}`);
  return missing;
}

/** Why a suite cannot run without `command` (it does not answer `--version`), or false: `why` says what provides it. */
export function needsCommand(command: string, why: string): string | false {
  try {
    execFileSync(command, ['--version'], { stdio: 'ignore' });
    return false;
  } catch {
    return `needs ${command} (${why})`;
  }
}

export const NOT_ROOT = skipUnlessProvided(process.getuid?.() !== 0 && 'needs root: the virtual lab creates network namespaces (CI runs as root)');
