/** `npm run bench [name ...]`: runs the named benchmarks (all when none is named), one after another. */
import { readdirSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const all = readdirSync(here).filter((f) => f.endsWith('.ts') && !['run.ts', 'lib.ts'].includes(f)).map((f) => f.replace(/\.ts$/, ''));
const wanted = process.argv.slice(2);
const unknown = wanted.filter((name) => !all.includes(name));
if (unknown.length > 0) {
  console.error(`unknown benchmark: ${unknown.join(', ')} (have: ${all.join(', ')})`);
  process.exit(2);
}
if (process.getuid?.() !== 0) {
  console.error('the benchmarks build a virtual lab of network namespaces: run them as root');
  process.exit(2);
}
for (const name of wanted.length > 0 ? wanted : all) {
  console.log(`== ${name}`);
  await import(`./${name}.ts`);
}
