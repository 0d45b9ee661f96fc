import { execFile } from 'node:child_process';

/**
 * Runs a system command with an argument array (never a shell); rejects with its stderr. It is
 * killed after 15 s, or as soon as `signal` aborts (a run's counters read beside a canceled run).
 */
export function command(file: string, args: string[], signal?: AbortSignal): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { timeout: 15_000, signal }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${file} ${args.join(' ')}: ${stderr.trim() || error.message}`));
      else resolve(stdout);
    });
  });
}
