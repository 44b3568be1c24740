import { z } from 'zod';

/**
 * Money math, exact and float-free.
 *
 * - USD amounts are integer micro-dollars (`*MicroUsd`, 1 USD = 1,000,000), held in a `number`
 *   that must be a non-negative safe integer. Products that could leave the safe range are
 *   computed in bigint and checked on the way out.
 * - Token amounts are bigint inside and canonical decimal strings of base units on the wire
 *   (they may exceed 2^53; the escrow stores them as uint256).
 * - Decimal input is converted by working on its digit string, never by multiplying a float.
 */

export const MICRO_USD_PER_USD = 1_000_000;
/** Decimal places a micro-USD amount can express. */
export const USD_DECIMALS = 6;
/** The USD stablecoin has 6 decimals, so its base units equal micro-USD. */
export const STABLE_DECIMALS = 6;
/** The largest amount the escrow contract can hold (uint256). */
export const MAX_UINT256 = (1n << 256n) - 1n;

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** The outcome of parsing a USD amount: micro-USD, or a message phrase a caller prefixes with the field path. */
export type UsdParseResult = { ok: true; microUsd: number } | { ok: false; message: string };

/**
 * Throws a RangeError unless `value` is a valid micro-USD amount: a non-negative safe integer.
 * `label` names the value in the message.
 */
export function assertMicroUsd(value: unknown, label = 'amount'): asserts value is number {
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) {
    throw new RangeError(`${label} must be a non-negative safe integer of micro-USD, got ${String(value)}`);
  }
}

/** True when `value` is a non-negative safe integer (a valid micro-USD amount). */
export function isMicroUsd(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

const PLAIN_DECIMAL = /^(\d+)(?:\.(\d+))?$/;
/** The shapes `String(n)` produces for a finite, non-negative number. */
const NUMBER_FORM = /^(\d+)(?:\.(\d+))?(?:e([+-]\d+))?$/;
/** Longer strings are refused before any digit work; no sensible USD amount needs more. */
const MAX_USD_INPUT_LENGTH = 64;

/**
 * Converts a USD amount to integer micro-USD, exactly.
 *
 * - A string must be a plain decimal: digits, optionally a point and more digits (`"2"`, `"2.5"`,
 *   `"0.000001"`). No sign, exponent, spaces, thousands separators or leading/trailing point.
 * - A number is read through its shortest round-trip string `String(n)` (so `2.675` is
 *   `"2.675"`, 2675000 micro-USD, and `1e-6` is 1 micro-USD); exponent forms are expanded on the
 *   digits. `0.1 + 0.2` is `"0.30000000000000004"` and is refused, not rounded.
 * - More than 6 significant decimal places is an error (no rounding); trailing zeros do not
 *   count (`"2.5000000"` is 2500000). Negative, NaN, Infinity and amounts above
 *   `Number.MAX_SAFE_INTEGER` micro-USD are errors.
 *
 * The failure `message` is a phrase without a subject (`"must have at most 6 decimal places"`)
 * so a caller builds a field error as `` `${field} ${message}` ``.
 */
export function parseUsdToMicroUsd(input: number | string): UsdParseResult {
  let match: RegExpExecArray | null;
  if (typeof input === 'number') {
    if (!Number.isFinite(input)) return { ok: false, message: 'must be a finite number' };
    if (input < 0) return { ok: false, message: 'must not be negative' };
    // String(-0) is "0"; every other finite non-negative number matches NUMBER_FORM.
    match = NUMBER_FORM.exec(String(input));
    if (!match) return { ok: false, message: 'must be a finite number' };
  } else if (typeof input === 'string') {
    if (input.length > MAX_USD_INPUT_LENGTH) return { ok: false, message: 'is too long to be a USD amount' };
    if (/^-\d/.test(input)) return { ok: false, message: 'must not be negative' };
    match = PLAIN_DECIMAL.exec(input);
    if (!match) {
      return { ok: false, message: 'must be a plain decimal USD amount such as "2.5" (digits, an optional point and decimals)' };
    }
  } else {
    return { ok: false, message: 'must be a number or a decimal string' };
  }

  const intDigits = match[1] ?? '';
  const fracDigits = match[2] ?? '';
  const exponent = match[3] === undefined ? 0 : Number(match[3]);
  // value = digits * 10^-scale
  let digits = (intDigits + fracDigits).replace(/^0+(?=\d)/, '');
  let scale = fracDigits.length - exponent;
  while (scale > 0 && digits.length > 1 && digits.endsWith('0')) {
    digits = digits.slice(0, -1);
    scale -= 1;
  }
  if (digits === '0') return { ok: true, microUsd: 0 };
  if (scale > USD_DECIMALS) {
    return { ok: false, message: `must have at most ${USD_DECIMALS} decimal places (1 micro-USD); it is not rounded` };
  }
  // Integer digits of the result in micro-USD; MAX_SAFE_INTEGER has 16 digits.
  if (digits.length - scale + USD_DECIMALS > 16) return { ok: false, message: 'is too large' };
  const micro = BigInt(digits) * 10n ** BigInt(USD_DECIMALS - scale);
  if (micro > MAX_SAFE) return { ok: false, message: 'is too large' };
  return { ok: true, microUsd: Number(micro) };
}

/**
 * Formats micro-USD as an exact, minimal USD decimal string: no trailing zeros, no point for
 * whole dollars, no currency sign or grouping. `2500000` is `"2.5"`, `3000000` is `"3"`,
 * `1` is `"0.000001"`. Display code pads to cents itself if it wants `"2.50"`.
 */
export function formatMicroUsd(micro: number | bigint): string {
  if (typeof micro === 'number' && !Number.isSafeInteger(micro)) {
    throw new RangeError(`micro-USD must be a safe integer, got ${String(micro)}`);
  }
  return unitsToDecimal(BigInt(micro), USD_DECIMALS);
}

/** USD with at least two decimals, for lines people read: `2500000` is `"2.50"`, `2345000` is `"2.345"`. */
export function formatUsdCents(micro: number | bigint): string {
  const [whole, fraction = ''] = formatMicroUsd(micro).split('.');
  return `${whole}.${fraction.padEnd(2, '0')}`;
}

const CANONICAL_UNITS = /^(0|[1-9][0-9]*)$/;

/**
 * Parses a token amount in base units from its canonical decimal string: digits only, no sign,
 * no spaces, no leading zeros (except `"0"` itself), at most 2^256 - 1. Throws an Error naming
 * the problem otherwise.
 */
export function parseTokenAmount(s: string): bigint {
  if (typeof s !== 'string') throw new TypeError(`token amount must be a string of base units, got ${typeof s}`);
  if (!CANONICAL_UNITS.test(s)) {
    throw new Error(`token amount must be a decimal string of base units (digits only, no sign, spaces or leading zeros), got ${JSON.stringify(s.slice(0, 100))}`);
  }
  if (s.length > 78) throw new RangeError('token amount exceeds 2^256 - 1');
  const value = BigInt(s);
  if (value > MAX_UINT256) throw new RangeError('token amount exceeds 2^256 - 1');
  return value;
}

/** Formats base units as the canonical decimal string. Throws for negative or > 2^256 - 1. */
export function formatTokenAmount(b: bigint): string {
  if (typeof b !== 'bigint') throw new TypeError('token amount must be a bigint');
  if (b < 0n) throw new RangeError('token amount must not be negative');
  if (b > MAX_UINT256) throw new RangeError('token amount exceeds 2^256 - 1');
  return b.toString();
}

function assertDecimals(decimals: number): void {
  if (!Number.isInteger(decimals) || decimals < 0 || decimals > 77) {
    throw new RangeError(`decimals must be an integer from 0 to 77, got ${String(decimals)}`);
  }
}

function unitsToDecimal(units: bigint, decimals: number): string {
  const negative = units < 0n;
  const digits = (negative ? -units : units).toString().padStart(decimals + 1, '0');
  const whole = digits.slice(0, digits.length - decimals);
  const frac = digits.slice(digits.length - decimals).replace(/0+$/, '');
  return `${negative ? '-' : ''}${whole}${frac ? `.${frac}` : ''}`;
}

/**
 * Writes base units as a minimal exact decimal in whole tokens: `(1500000n, 6)` is `"1.5"`,
 * `(10n ** 18n, 18)` is `"1"`. Throws for negative units or decimals outside 0-77.
 */
export function tokenUnitsToDecimalString(units: bigint, decimals: number): string {
  assertDecimals(decimals);
  if (units < 0n) throw new RangeError('token amount must not be negative');
  return unitsToDecimal(units, decimals);
}

/**
 * Reads a plain decimal amount of whole tokens (`"1.5"`) as base units, exactly:
 * `("1.5", 6)` is `1500000n`. Throws when the string is not a plain non-negative decimal or
 * has non-zero digits beyond `decimals` places (no rounding).
 */
export function decimalStringToTokenUnits(s: string, decimals: number): bigint {
  assertDecimals(decimals);
  const match = typeof s === 'string' ? PLAIN_DECIMAL.exec(s) : null;
  if (!match) throw new Error(`token amount must be a plain decimal such as "1.5", got ${JSON.stringify(String(s).slice(0, 100))}`);
  const whole = match[1] ?? '0';
  const frac = (match[2] ?? '').replace(/0+$/, '');
  if (frac.length > decimals) {
    throw new RangeError(`token amount has more than ${decimals} decimal places: ${s}`);
  }
  return BigInt(whole + frac.padEnd(decimals, '0'));
}

/** A token amount on the wire: canonical decimal string of base units, up to 2^256 - 1. */
export const tokenAmountSchema = z
  .string()
  .regex(CANONICAL_UNITS, { error: 'must be a decimal string of token base units (digits only, no sign or leading zeros)' })
  .refine((s) => !CANONICAL_UNITS.test(s) || (s.length <= 78 && BigInt(s) <= MAX_UINT256), { error: 'must not exceed 2^256 - 1' });
export type TokenAmount = z.infer<typeof tokenAmountSchema>;

/** Integer division rounded toward positive infinity. `b` must be positive. */
export function ceilDiv(a: bigint, b: bigint): bigint {
  if (b <= 0n) throw new RangeError('ceilDiv divisor must be positive');
  const q = a / b;
  // bigint division truncates toward zero, which already is the ceiling for negative quotients.
  return a % b !== 0n && a > 0n ? q + 1n : q;
}

function toBig(value: number, label: string): bigint {
  assertMicroUsd(value, label);
  return BigInt(value);
}

function toSafeNumber(value: bigint, label: string): number {
  if (value > MAX_SAFE) throw new RangeError(`${label} exceeds Number.MAX_SAFE_INTEGER micro-USD`);
  return Number(value);
}

function assertFeeBps(bps: number): void {
  if (!Number.isSafeInteger(bps) || bps < 0 || bps > 10_000) {
    throw new RangeError(`platformFeeBps must be an integer from 0 to 10000, got ${String(bps)}`);
  }
}

export interface CostBreakdown {
  computeMicroUsd: number;
  feeMicroUsd: number;
  totalMicroUsd: number;
}

/**
 * The most a job can cost, fixed at creation (the escrow's `maxCostMicroUsd`):
 * `compute = ceil(price * gpuCount * maxRuntimeSeconds / 3600)`,
 * `fee = ceil(compute * platformFeeBps / 10000)`, `total = compute + fee`.
 * Inputs are non-negative safe integers; throws a RangeError otherwise or when a result leaves
 * the safe-integer range.
 *
 * @example maxCostMicroUsd({ maxPricePerGpuHourMicroUsd: 2_000_000, gpuCount: 2,
 *   maxRuntimeSeconds: 5400, platformFeeBps: 1000 }) // { computeMicroUsd: 6000000, feeMicroUsd: 600000, totalMicroUsd: 6600000 }
 */
export function maxCostMicroUsd(params: {
  maxPricePerGpuHourMicroUsd: number;
  gpuCount: number;
  maxRuntimeSeconds: number;
  platformFeeBps: number;
}): CostBreakdown {
  assertFeeBps(params.platformFeeBps);
  const price = toBig(params.maxPricePerGpuHourMicroUsd, 'maxPricePerGpuHourMicroUsd');
  const count = toBig(params.gpuCount, 'gpuCount');
  const seconds = toBig(params.maxRuntimeSeconds, 'maxRuntimeSeconds');
  const compute = ceilDiv(price * count * seconds, 3600n);
  const fee = ceilDiv(compute * BigInt(params.platformFeeBps), 10_000n);
  return {
    computeMicroUsd: toSafeNumber(compute, 'computeMicroUsd'),
    feeMicroUsd: toSafeNumber(fee, 'feeMicroUsd'),
    totalMicroUsd: toSafeNumber(compute + fee, 'totalMicroUsd'),
  };
}

export interface FinalCost extends CostBreakdown {
  billableGpuSeconds: number;
}

/**
 * The cost of a finished job: `billableGpuSeconds = max(runtimeSeconds, minBillingSeconds) * gpuCount`,
 * `compute = ceil(billableGpuSeconds * pricePerGpuHourMicroUsd / 3600)`,
 * `fee = ceil(compute * platformFeeBps / 10000)`. `runtimeSeconds` is whole seconds (the caller
 * rounds a measured duration up). Capping the payment at the escrowed `maxPayment` is the
 * caller's job: the receipt's `finalPayment` never exceeds the deposit.
 */
export function finalCost(params: {
  runtimeSeconds: number;
  minBillingSeconds: number;
  gpuCount: number;
  pricePerGpuHourMicroUsd: number;
  platformFeeBps: number;
}): FinalCost {
  assertFeeBps(params.platformFeeBps);
  const runtime = toBig(params.runtimeSeconds, 'runtimeSeconds');
  const minBilling = toBig(params.minBillingSeconds, 'minBillingSeconds');
  const count = toBig(params.gpuCount, 'gpuCount');
  const price = toBig(params.pricePerGpuHourMicroUsd, 'pricePerGpuHourMicroUsd');
  const billable = (runtime > minBilling ? runtime : minBilling) * count;
  const compute = ceilDiv(billable * price, 3600n);
  const fee = ceilDiv(compute * BigInt(params.platformFeeBps), 10_000n);
  return {
    billableGpuSeconds: toSafeNumber(billable, 'billableGpuSeconds'),
    computeMicroUsd: toSafeNumber(compute, 'computeMicroUsd'),
    feeMicroUsd: toSafeNumber(fee, 'feeMicroUsd'),
    totalMicroUsd: toSafeNumber(compute + fee, 'totalMicroUsd'),
  };
}

/** Stablecoin payment for a micro-USD amount: 6 decimals, so base units equal micro-USD. */
export function stableMaxPayment(maxCostMicroUsd: number): bigint {
  return toBig(maxCostMicroUsd, 'maxCostMicroUsd');
}

/**
 * ETH payment in wei for a micro-USD amount at the job's fixed rate:
 * `ceil(maxCostMicroUsd * weiPerUsd / 1e6)`, rounded up so the escrow always covers the cost.
 */
export function ethMaxPayment(maxCostMicroUsd: number, weiPerUsd: bigint): bigint {
  if (typeof weiPerUsd !== 'bigint' || weiPerUsd <= 0n) throw new RangeError('weiPerUsd must be a positive bigint');
  return ceilDiv(toBig(maxCostMicroUsd, 'maxCostMicroUsd') * weiPerUsd, BigInt(MICRO_USD_PER_USD));
}
