import { formatUsdCents } from '@gpufarm/shared';

/** Integer micro-USD as `$2.50`, through the shared formatter (never a float). */
export const usd = (micro: number | bigint): string => `$${formatUsdCents(micro)}`;

/** Bytes as whole GiB, for VRAM columns. */
export const gib = (bytes: number): string => `${Math.round(bytes / 2 ** 30)} GB`;

/** A byte count for people: `812 B`, `3.4 MiB`, `1.2 GiB`. */
export function bytesText(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${n} B` : `${value.toFixed(1)} ${units[unit]}`;
}

/** Seconds as `1h02m`, `4m05s` or `12s`. */
export function durationText(seconds: number): string {
  const s = Math.max(0, Math.round(seconds));
  if (s >= 3600) return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
  if (s >= 60) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${s}s`;
}
