/**
 * `npm run gen:figures`: writes the README's "Figures" section from the figure catalogue,
 * between its markers (test/guards/figures.test.ts fails while the two differ).
 */
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { figuresMarkdown } from '@niclab/shared/domain/figures/markdown';

export const README = fileURLToPath(new URL('../README.md', import.meta.url));
export const START = '<!-- figures: generated from services/shared/src/domain/figures/catalogue.ts by npm run gen:figures -->';
export const END = '<!-- figures: end -->';

/** The README with its Figures section as the catalogue has it. */
export function withFigures(readme: string): string {
  const from = readme.indexOf(START);
  const to = readme.indexOf(END);
  if (from < 0 || to < from) throw new Error(`README.md has no ${START} ... ${END} section`);
  return `${readme.slice(0, from + START.length)}\n${figuresMarkdown()}\n${readme.slice(to)}`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) writeFileSync(README, withFigures(readFileSync(README, 'utf8')));
