import { execFile } from 'node:child_process';

/** Runs a system command with an argument array (never a shell); rejects with its stderr. */
export function command(file: string, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(file, args, { timeout: 15_000 }, (error, stdout, stderr) => {
      if (error) reject(new Error(`${file} ${args.join(' ')}: ${stderr.trim() || error.message}`));
      else resolve(stdout);
    });
  });
}
