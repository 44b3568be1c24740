/**
 * Hand-written ABI encoding of static words, for the job-creation hot path (viem's general
 * encoder costs about 50 µs per call). Tests check every use against viem's encoding.
 */

/** A 20- or 32-byte hex value (`0x…`) as one left-padded 32-byte word, lower-case hex without `0x`. */
export function hexWord(hex: string): string {
  return hex.slice(2).toLowerCase().padStart(64, '0');
}

/** A uint256 as one 32-byte word. Throws outside 0..2^256-1. */
export function uintWord(value: bigint): string {
  if (value < 0n || value >> 256n !== 0n) throw new RangeError(`${value} does not fit a uint256`);
  return value.toString(16).padStart(64, '0');
}
