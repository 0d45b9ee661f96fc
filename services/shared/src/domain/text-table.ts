/** Plain-text tables for terminals and mail: the report, the comparison, every CLI listing. */

/** Columns padded to their widest cell; numbers right-aligned. */
export function alignTable(rows: string[][]): string {
  const widths = rows[0]!.map((_, c) => Math.max(...rows.map((r) => (r[c] ?? '').length)));
  return rows
    .map((r) => r.map((cell, c) => (/^-?[\d.]+%?$/.test(cell) ? cell.padStart(widths[c]!) : cell.padEnd(widths[c]!))).join('  ').trimEnd())
    .join('\n');
}

/** One CSV cell (RFC 4180): empty for null, quoted when it holds a quote, a comma or a newline. */
export const csvCell = (value: unknown): string => {
  const text = value === null || value === undefined ? '' : String(value);
  return /[",\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
};
