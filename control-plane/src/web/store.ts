import type { Queryable } from '../db/database.js';

/** Stores a nonce the server issued, usable once until `ttlSeconds` from now; returns its expiry. */
export async function insertSiweNonce(db: Queryable, nonce: string, ttlSeconds: number): Promise<Date> {
  const [row] = await db.query<{ expires_at: Date }>('INSERT INTO web_nonces (nonce, expires_at) VALUES ($1, now() + make_interval(secs => $2)) RETURNING expires_at', [nonce, ttlSeconds]);
  if (!row) throw new Error('the nonce insert returned no row');
  return row.expires_at;
}

/**
 * Takes a nonce: deletes it and says whether it was there and unexpired. One statement, so of
 * two sign-ins with the same nonce exactly one gets it.
 */
export async function takeSiweNonce(db: Queryable, nonce: string): Promise<'taken' | 'expired' | 'unknown'> {
  const [row] = await db.query<{ expired: boolean }>('DELETE FROM web_nonces WHERE nonce = $1 RETURNING expires_at <= now() AS expired', [nonce]);
  if (!row) return 'unknown';
  return row.expired ? 'expired' : 'taken';
}

/** Deletes nonces never used before they expired; returns how many. */
export async function deleteExpiredSiweNonces(db: Queryable): Promise<number> {
  const rows = await db.query('DELETE FROM web_nonces WHERE expires_at <= now() RETURNING nonce');
  return rows.length;
}
