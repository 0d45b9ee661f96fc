/** Plain-text tables for terminals and mail: the report, the comparison, every CLI listing. */

/** Columns padded to their widest cell; numbers right-aligned. */
export function alignTable(rows: string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)));
  return rows
    .map((r) => r.map((cell, c) => (/^-?[\d.]+%?$/.test(cell) ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!))).join('  ').trimEnd())
    .join('\n');
}
