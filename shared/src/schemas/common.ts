import { z } from 'zod';
import { fieldDetail, type ErrorDetail } from '../errors.js';

/**
 * Building blocks shared by the /v1 resource schemas.
 *
 * Response resources are strict objects: every field of the spec is present (absent values are
 * `null`, never omitted) and an unknown field is an error, so a test that parses a response
 * catches both a missing field and a leaked one (host IPs, internal ids).
 */

/** ISO-8601 UTC time with a `Z` suffix, optional fraction: `2026-10-01T12:00:00.000Z`. */
export const isoTimeSchema = z.iso.datetime({ error: 'must be an ISO-8601 UTC time such as 2026-10-01T12:00:00Z' });

/** A 20-byte EVM address, `0x` + 40 hex digits (either case; the checksum is not verified). */
export const addressSchema = z.string().regex(/^0x[0-9a-fA-F]{40}$/, { error: 'must be a 0x-prefixed 20-byte hex address' });
export type Address = z.infer<typeof addressSchema>;

/** 32 bytes as `0x` + 64 hex digits (escrow job keys, job hashes, on-chain result hashes). */
export const bytes32Schema = z.string().regex(/^0x[0-9a-fA-F]{64}$/, { error: 'must be 0x followed by 64 hex digits' });
export type Bytes32 = z.infer<typeof bytes32Schema>;

/** A transaction hash: 32 bytes, `0x` + 64 hex digits. */
export const TX_HASH = /^0x[0-9a-fA-F]{64}$/;
export const txHashSchema = z.string().regex(TX_HASH, { error: 'must be a transaction hash: 0x followed by 64 hex digits' });
export type TxHash = z.infer<typeof txHashSchema>;

/** Arbitrary bytes such as calldata: `0x` + an even number of hex digits (`0x` alone is empty). */
export const hexDataSchema = z.string().regex(/^0x(?:[0-9a-fA-F]{2})*$/, { error: 'must be 0x followed by an even number of hex digits' });

/** A SHA-256 digest of stored bytes as 64 lower-case hex digits, no prefix (artifact and result hashes). */
export const sha256HexSchema = z.string().regex(/^[0-9a-f]{64}$/, { error: 'must be 64 lower-case hex digits' });

/** An absolute http(s) URL. */
export const httpUrlSchema = z.url({ protocol: /^https?$/, error: 'must be an absolute http(s) URL' });

/** A non-negative safe integer (counts, bytes, seconds, micro-USD). */
export const nonNegativeIntSchema = z.int().min(0);

/** A list response: `{ object: 'list', data, nextCursor }`; `nextCursor` is null on the last page. */
export function listEnvelopeSchema<T extends z.ZodType>(item: T) {
  return z.strictObject({
    object: z.literal('list'),
    data: z.array(item),
    nextCursor: z.string().nullable(),
  });
}

/** The capacity list adds the chain id and the time the listing was computed. */
export function capacityListEnvelopeSchema<T extends z.ZodType>(item: T) {
  return z.strictObject({
    object: z.literal('list'),
    chainId: z.int().positive(),
    generatedAt: isoTimeSchema,
    data: z.array(item),
    nextCursor: z.string().nullable(),
  });
}

const IDENTIFIER = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

/**
 * Writes a zod issue path the way error details name fields: dots for keys, brackets for
 * indices (`outputRules[0].path`, `env.HF_TOKEN`). A key that is not identifier-like is written
 * as a quoted bracket (`env["MY-VAR"]`) so the path stays unambiguous. The empty path is `body`.
 */
export function formatFieldPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const segment of path) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else {
      const key = String(segment);
      if (IDENTIFIER.test(key)) out += out === '' ? key : `.${key}`;
      else out += `[${JSON.stringify(key)}]`;
    }
  }
  return out === '' ? 'body' : out;
}

/**
 * Turns zod issues into `error.details`: one entry per offending field (the first issue on a
 * path wins), each message starting with the field path. Schemas in this package phrase their
 * messages as predicates (`must be an integer from 1 to 16`) so the result reads
 * `gpu.count must be an integer from 1 to 16`. An unknown key yields its own entry,
 * `<path> is not a known field`.
 */
export function issuesToDetails(issues: readonly z.core.$ZodIssue[]): ErrorDetail[] {
  const details: ErrorDetail[] = [];
  const seen = new Set<string>();
  const add = (path: readonly PropertyKey[], phrase: string) => {
    const field = formatFieldPath(path);
    if (seen.has(field)) return;
    seen.add(field);
    details.push(fieldDetail(field, phrase, { subject: true }));
  };
  for (const issue of issues) {
    if (issue.code === 'unrecognized_keys') {
      for (const key of issue.keys) add([...issue.path, key], 'is not a known field');
    } else {
      add(issue.path, phraseOf(issue));
    }
  }
  return details;
}

/** Zod's default messages read "Invalid input: ..."; ours are predicates. Fall back politely. */
function phraseOf(issue: z.core.$ZodIssue): string {
  const message = issue.message;
  if (message && !/^(Invalid|Too (small|big)|Unrecognized)/.test(message)) return message;
  switch (issue.code) {
    case 'invalid_type':
      return issue.input === undefined ? 'is required' : `must be ${article(issue.expected)}`;
    case 'too_small':
      return `is too small (minimum ${String(issue.minimum)})`;
    case 'too_big':
      return `is too big (maximum ${String(issue.maximum)})`;
    default:
      return 'is invalid';
  }
}

function article(expected: string): string {
  return /^[aeiou]/.test(expected) ? `an ${expected}` : `a ${expected}`;
}

/**
 * A zod error callback: `is required` when the value is missing, otherwise `phrase`.
 * Use it as the `error` option of a field schema and of its checks.
 */
export function fieldError(phrase: string): { error: (issue: { input?: unknown }) => string } {
  return { error: (issue) => (issue.input === undefined ? 'is required' : phrase) };
}

/**
 * UTF-8 length of a string in bytes without allocating (a lone surrogate counts 3 bytes, as
 * the encoder's replacement character would).
 */
export function utf8ByteLength(s: string): number {
  let bytes = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) bytes += 1;
    else if (c < 0x800) bytes += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      const next = s.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 4;
        i++;
      } else bytes += 3;
    } else bytes += 3;
  }
  return bytes;
}

const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * True when a string can be stored and passed on as-is: no NUL character (PostgreSQL text and
 * argv cannot hold one) and no unpaired surrogate (not encodable as UTF-8).
 */
export function isCleanText(s: string): boolean {
  return !s.includes('\u0000') && !LONE_SURROGATE.test(s);
}
