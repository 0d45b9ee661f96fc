/**
 * A command's own help: its lines of the usage text. A usage text is blocks, each starting
 * with a line `  niclab <command> ...` (one line may name several short commands) and going on
 * with the lines indented further; a command's help is every block that names it.
 */
export function helpFor(usage: string, command: string): string | null {
  const names = new RegExp(String.raw`niclab ${command.replace(/[^\w-]/g, '')}(?=\s|$)`);
  const blocks: string[][] = [];
  for (const line of usage.split('\n')) {
    if (/^ {2}niclab /.test(line)) blocks.push([line]);
    else if (/^ {3,}\S/.test(line) && blocks.length > 0) blocks.at(-1)!.push(line);
    else blocks.push([]);
  }
  const own = blocks.filter((block) => block.length > 0 && names.test(block[0]!));
  return own.length > 0 ? own.map((block) => block.join('\n')).join('\n') : null;
}
