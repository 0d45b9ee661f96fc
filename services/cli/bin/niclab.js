#!/usr/bin/env node
// The niclab command. A launcher that exists before the build, so `npm ci` links it (npx niclab)
// even in a fresh checkout; the command itself is compiled to dist/ by `npm run build`.
import { existsSync } from 'node:fs';

const main = new URL('../dist/main.js', import.meta.url);
if (!existsSync(main)) {
  process.stderr.write('niclab is not built yet: run `npm run build` (npm start and npm test build it too)\n');
  process.exit(2);
}
await import(main.href);
