/** What a `Range` header asks of a body of `size` bytes. */
export type RangeAnswer = { kind: 'full' } | { kind: 'partial'; start: number; end: number } | { kind: 'unsatisfiable' };

const SINGLE = /^bytes=(\d{0,16})-(\d{0,16})$/;

/**
 * Reads a `Range` header (RFC 9110 section 14) for one representation of `size` bytes: one
 * byte range gives `partial` (inclusive `start`..`end`, clamped to the body), a range starting
 * past the end `unsatisfiable`. No header, a malformed one, another unit or several ranges
 * give `full`: a server may ignore a Range it does not serve, and the whole body is correct.
 *
 * @example parseRange('bytes=0-99', 1000) // { kind: 'partial', start: 0, end: 99 }
 * @example parseRange('bytes=-100', 1000) // { kind: 'partial', start: 900, end: 999 }
 */
export function parseRange(header: string | undefined, size: number): RangeAnswer {
  if (header === undefined) return { kind: 'full' };
  const match = SINGLE.exec(header.replace(/\s+/g, ''));
  if (!match) return { kind: 'full' };
  const [, first = '', last = ''] = match;
  if (first === '' && last === '') return { kind: 'full' };
  if (first === '') {
    const suffix = Number(last);
    if (suffix === 0 || size === 0) return { kind: 'unsatisfiable' };
    return { kind: 'partial', start: Math.max(0, size - suffix), end: size - 1 };
  }
  const start = Number(first);
  if (last !== '' && Number(last) < start) return { kind: 'full' };
  if (start >= size) return { kind: 'unsatisfiable' };
  const end = last === '' ? size - 1 : Math.min(Number(last), size - 1);
  return { kind: 'partial', start, end };
}
