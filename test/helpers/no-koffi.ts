import { fileURLToPath } from 'node:url';

const PRELOAD = fileURLToPath(new URL('./no-koffi.cjs', import.meta.url));

/**
 * Calls `start`, which forks an engine child before it returns (engine.run does), with koffi made
 * unloadable in that child (a preload in its execArgv, which fork copies from this process's).
 */
export function withoutKoffi<T>(start: () => T): T {
  process.execArgv.push('--require', PRELOAD);
  try {
    return start();
  } finally {
    process.execArgv.splice(process.execArgv.lastIndexOf(PRELOAD) - 1, 2);
  }
}
