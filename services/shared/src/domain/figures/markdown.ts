/**
 * The README's "Figures" section, from the catalogue: a row per figure with its unit, which way
 * is better, what it means and what it is checked against (test/guards/figures.test.ts keeps the
 * README equal to it; `npm run gen:figures` writes it).
 */
import { FIGURES, NOT_FIGURES } from './catalogue.js';

const cell = (text: string) => text.replace(/\|/g, '\\|').replace(/\n/g, ' ');

export function figuresMarkdown(): string {
  const rows = FIGURES.map((f) => {
    const unit = f.display.unit && f.display.unit !== f.unit ? `${f.unit} (shown in ${f.display.unit})` : f.unit;
    const better = f.better === null ? '–' : f.better;
    return `| \`${f.name}\` | ${cell(unit)} | ${better} | ${cell(f.meaning)} | ${f.reference.kind}: ${cell(f.reference.against)} (\`${f.reference.test}\`) |`;
  });
  const not = NOT_FIGURES.map((n) => `- ${cell(n.why)}.`);
  return [
    '| figure | unit | better | meaning | checked against (test) |',
    '| --- | --- | --- | --- | --- |',
    ...rows,
    '',
    'Numeric fields of the results that are not figures:',
    '',
    ...not,
  ].join('\n');
}
