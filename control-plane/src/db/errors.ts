import { GpufarmError } from '@gpufarm/shared';

/** Raised when no connection to the database could be made at all; a later try may succeed. */
export class DatabaseUnavailableError extends GpufarmError<'database_unavailable'> {
  constructor(cause: unknown) {
    super('database_unavailable', 'the database cannot be reached; check that it runs and DATABASE_URL points at it, then retry', { cause, retryable: true });
  }
}

/**
 * True when an error means the database cannot be reached (as opposed to a bad statement):
 * such errors become 503 `unavailable`, everything else 500 `internal`.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  if (err instanceof DatabaseUnavailableError) return true;
  if (!(err instanceof Error)) return false;
  const code = (err as { code?: unknown }).code;
  if (typeof code === 'string') {
    if (['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EHOSTUNREACH', 'ETIMEDOUT', 'EPIPE', 'EAI_AGAIN'].includes(code)) return true;
    // SQLSTATE class 08 (connection exception), 57P01-57P03 (shutdown, cannot connect now), 53300 (too many connections).
    if (code.startsWith('08') || ['57P01', '57P02', '57P03', '53300'].includes(code)) return true;
  }
  // pg, pg-pool and PGlite raise these as plain Errors with no code to check: their text is all there is.
  return /Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|PGlite is closed/i.test(err.message);
}
