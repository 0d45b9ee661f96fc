import { fileURLToPath } from 'node:url';

const PRELOAD = fileURLToPath(new URL('./no-koffi.cjs', import.meta.url));

/**
 * Calls `start`, which forks an engine child before it returns (engine.run does), with koffi made
 * unloadable in that child: a preload in NODE_OPTIONS, which fork passes on with the environment.
 * Not in execArgv: a compiled child of an agent run from source gets none of its flags
 * (child.ts's execArgvFor), so there the preload never ran, and the TCP fallback's test (in a
 * file that runs the compiled children) read through koffi all along.
 */
export function withoutKoffi<T>(start: () => T): T {
  const before = process.env.NODE_OPTIONS;
  process.env.NODE_OPTIONS = `${before ?? ''} --require "${PRELOAD}"`.trim();
  try {
    return start();
  } finally {
    if (before === undefined) delete process.env.NODE_OPTIONS;
    else process.env.NODE_OPTIONS = before;
  }
}
