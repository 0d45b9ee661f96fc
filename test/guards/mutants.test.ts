import assert from 'node:assert/strict';
import { existsSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { MUTANTS } from '../mutants/mutants.js';

/**
 * Every catalogued bug can still be planted: its `from` is in its file exactly once, and the
 * tests that must catch it exist. A mutant whose code moved (three had, when this was added)
 * is planted nowhere, and `npm run test:mutants` then proves nothing about it.
 */
test('every mutant plants into the code as it is now, and names tests that exist', () => {
  const stale: string[] = [];
  for (const mutant of MUTANTS) {
    const found = existsSync(mutant.file) ? readFileSync(mutant.file, 'utf8').split(mutant.from).length - 1 : -1;
    if (found !== 1) stale.push(`${mutant.id}: its 'from' is ${found === -1 ? 'in a file that does not exist' : `found ${found} times`} (${mutant.file})`);
    for (const file of mutant.tests) if (!existsSync(file)) stale.push(`${mutant.id}: no test ${file}`);
  }
  assert.deepEqual(stale, []);
  assert.equal(new Set(MUTANTS.map((m) => m.id)).size, MUTANTS.length, 'mutant ids are unique');
});
