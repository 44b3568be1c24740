import { formatBytes, formatUsdCents, tokenUnitsToDecimalString } from '@gpufarm/shared';

/** Micro-USD (an integer) as dollars for reading: `2500000` is `$2.50`. Exact: no float on the way. */
export function usd(micro: number | bigint): string {
  return `$${formatUsdCents(micro)}`;
}

/** Token base units (a decimal string or bigint) in whole tokens with the symbol: `1500000` of 6 decimals is `1.5 tUSDC`. */
export function tokenAmount(units: string | bigint, decimals: number, symbol: string): string {
  return `${tokenUnitsToDecimalString(typeof units === 'bigint' ? units : BigInt(units), decimals)} ${symbol}`;
}

/** Bytes in the largest unit that keeps a number ≥ 1, one decimal (`1.5 MiB`), exact bytes below 1 KiB. */
export const bytes = formatBytes;

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });

/** An ISO time as the reader's local date and time; a dash for null. */
export function when(iso: string | null | undefined): string {
  if (!iso) return '—';
  const at = new Date(iso);
  return Number.isNaN(at.getTime()) ? iso : dateTime.format(at);
}

const shortDateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'short', timeStyle: 'short' });

/** An ISO time as the reader's local date and time to the minute, for narrow table columns; a dash for null. */
export function whenShort(iso: string | null | undefined): string {
  if (!iso) return '—';
  const at = new Date(iso);
  return Number.isNaN(at.getTime()) ? iso : shortDateTime.format(at);
}

/** `text` as a sentence: its first letter upper case, a full stop at the end. */
export function sentence(text: string): string {
  return `${text.charAt(0).toUpperCase()}${text.slice(1)}${text.endsWith('.') ? '' : '.'}`;
}

/** `0x1234…abcd`: enough of a hash or address to recognise it. */
export function shortHex(hex: string): string {
  return hex.length <= 14 ? hex : `${hex.slice(0, 6)}…${hex.slice(-4)}`;
}

/** A duration in seconds for reading: `45 s`, `3.5 min`, `2.1 h`; a dash for null. */
export function duration(seconds: number | null | undefined): string {
  if (seconds == null) return '—';
  if (seconds < 60) return `${Number(seconds.toFixed(seconds < 10 ? 1 : 0))} s`;
  if (seconds < 3600) return `${Number((seconds / 60).toFixed(1))} min`;
  if (seconds < 86_400) return `${Number((seconds / 3600).toFixed(1))} h`;
  return `${Number((seconds / 86_400).toFixed(1))} d`;
}

/** Milliseconds for reading: `340 ms` under a second, else as `duration` writes seconds; a dash for null. */
export function millis(ms: number | null | undefined): string {
  if (ms == null) return '—';
  return ms < 1000 ? `${Math.round(ms)} ms` : duration(ms / 1000);
}

/** Basis points as a percentage: `125` is `1.25 %`. */
export function basisPoints(bps: number): string {
  return `${(bps / 100).toFixed(2)} %`;
}

/** A 0–100 value with its sign: `42 %`; a dash for null. */
export function percent(value: number | null | undefined): string {
  return value == null ? '—' : `${Math.round(value)} %`;
}
