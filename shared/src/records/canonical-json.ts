/**
 * Canonical JSON of the values an execution record holds (objects, arrays, strings, booleans,
 * null and safe integers): object keys sorted by UTF-16 code units, no whitespace, strings as
 * JSON.stringify writes them. Equal values give equal text, so a signature over the text
 * verifies on any side that rebuilds it (RFC 8785 agrees on these value kinds).
 *
 * @throws TypeError for other values (floats, undefined, functions, bigints).
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value === 'boolean' || typeof value === 'string') return JSON.stringify(value);
  if (typeof value === 'number') {
    if (!Number.isSafeInteger(value)) throw new TypeError(`canonical JSON holds safe integers only, got ${value}`);
    return String(value);
  }
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  throw new TypeError(`canonical JSON cannot hold a ${typeof value}`);
}
