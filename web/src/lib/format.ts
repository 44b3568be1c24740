import { formatUsdCents, tokenUnitsToDecimalString } from '@gpufarm/shared';

/** Micro-USD (an integer) as dollars for reading: `2500000` is `$2.50`. Exact: no float on the way. */
export function usd(micro: number | bigint): string {
  return `$${formatUsdCents(micro)}`;
}

/** Token base units (a decimal string or bigint) in whole tokens with the symbol: `1500000` of 6 decimals is `1.5 tUSDC`. */
export function tokenAmount(units: string | bigint, decimals: number, symbol: string): string {
  return `${tokenUnitsToDecimalString(typeof units === 'bigint' ? units : BigInt(units), decimals)} ${symbol}`;
}

/** Bytes in the largest unit that keeps a number ≥ 1, one decimal (`1.5 MiB`), exact bytes below 1 KiB. */
export function bytes(count: number): string {
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

const dateTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' });

/** An ISO time as the reader's local date and time; a dash for null. */
export function when(iso: string | null | undefined): string {
  if (!iso) return '—';
  const at = new Date(iso);
  return Number.isNaN(at.getTime()) ? iso : dateTime.format(at);
}

/** `0x1234…abcd`: enough of a hash or address to recognise it. */
export function shortHex(hex: string): string {
  return hex.length <= 14 ? hex : `${hex.slice(0, 6)}…${hex.slice(-4)}`;
}
