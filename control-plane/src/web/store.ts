import type { Queryable } from '../db/database.js';

/**
 * Stores a nonce the server issued to the browser whose cookie hashes to `browserHash`, usable
 * once until `ttlSeconds` from now; returns its expiry.
 */
export async function insertSiweNonce(db: Queryable, params: { nonce: string; browserHash: string; ttlSeconds: number }): Promise<Date> {
  const [row] = await db.query<{ expires_at: Date }>(
    'INSERT INTO web_nonces (nonce, browser_hash, expires_at) VALUES ($1, $2, now() + make_interval(secs => $3)) RETURNING expires_at',
    [params.nonce, params.browserHash, params.ttlSeconds],
  );
  if (!row) throw new Error('the nonce insert returned no row');
  return row.expires_at;
}

/**
 * Takes a nonce: deletes it and says whether it was there, unexpired and issued to the browser
 * whose cookie hashes to `browserHash` (null: the request carried no browser cookie). One
 * statement, so of two sign-ins with the same nonce exactly one gets it.
 */
export async function takeSiweNonce(db: Queryable, nonce: string, browserHash: string | null): Promise<'taken' | 'expired' | 'other_browser' | 'unknown'> {
  const [row] = await db.query<{ expired: boolean; same_browser: boolean }>(
    'DELETE FROM web_nonces WHERE nonce = $1 RETURNING expires_at <= now() AS expired, browser_hash IS NOT DISTINCT FROM $2 AS same_browser',
    [nonce, browserHash],
  );
  if (!row) return 'unknown';
  if (row.expired) return 'expired';
  return row.same_browser ? 'taken' : 'other_browser';
}

/** Deletes nonces never used before they expired; returns how many. */
export async function deleteExpiredSiweNonces(db: Queryable): Promise<number> {
  const rows = await db.query('DELETE FROM web_nonces WHERE expires_at <= now() RETURNING nonce');
  return rows.length;
}
