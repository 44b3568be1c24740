/** One column of a text table: its heading, how to show an item, and whether it is right-aligned (numbers). */
export interface Column<T> {
  heading: string;
  cell: (item: T) => string;
  right?: boolean;
}

/** A plain text table: headings, then one line per item, columns padded to their widest cell. */
export function renderTable<T>(columns: Column<T>[], items: readonly T[]): string {
  const cells = items.map((item) => columns.map((c) => c.cell(item)));
  const widths = columns.map((c, i) => Math.max(c.heading.length, ...cells.map((row) => row[i]!.length)));
  const line = (row: string[]) =>
    row
      .map((text, i) => (columns[i]!.right ? text.padStart(widths[i]!) : text.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [line(columns.map((c) => c.heading)), ...cells.map(line)].join('\n') + '\n';
}
