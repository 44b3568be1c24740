/** Bytes in the largest unit that keeps a number ≥ 1, one decimal (`1.5 MiB`), exact bytes below 1 KiB. */
export function formatBytes(count: number): string {
  if (count < 1024) return `${count} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB'];
  let value = count / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}
