import { randomBytes } from 'node:crypto';
import type { Database, Queryable } from '../db/database.js';
import { lockAccount } from './store.js';
import { hashCookieValue } from './web-cookies.js';

/** A signed-in dashboard browser, as `auth/plugin.ts` resolves it from the cookie. */
export interface WebSession {
  /** The SHA-256 (hex) of the cookie value. */
  id: string;
  accountId: string;
  accountStatus: 'active' | 'suspended';
  walletAddress: string;
  chainId: number;
  csrfToken: string;
  expiresAt: Date;
}

/**
 * Opens a session for the account and returns the cookie value to set (shown once, never
 * stored) with the session; `replacing`, a cookie value the browser already held, is deleted
 * first so that each sign-in gets a fresh cookie. With `maxPerAccount` (GF_SESSIONS_PER_ACCOUNT)
 * the account's oldest unexpired sessions past that many, this one included, are deleted: those
 * browsers are signed out, as if they had signed out themselves.
 */
export async function createWebSession(
  db: Database,
  params: { accountId: string; walletAddress: string; chainId: number; ttlSeconds: number; replacing: string | null; maxPerAccount?: number },
): Promise<{ cookie: string; session: Omit<WebSession, 'accountStatus'> }> {
  const cookie = randomBytes(32).toString('base64url');
  const csrfToken = randomBytes(32).toString('base64url');
  const id = hashCookieValue(cookie);
  const { maxPerAccount } = params;
  const row = await db.transaction(async (tx) => {
    if (maxPerAccount !== undefined) await lockAccount(tx, params.accountId);
    if (params.replacing) await deleteWebSession(tx, params.replacing);
    const [inserted] = await tx.query<{ id: string; expires_at: Date }>(
      `INSERT INTO web_sessions (id, account_id, wallet_address, chain_id, csrf_token, expires_at)
       VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6)) RETURNING id, expires_at`,
      [id, params.accountId, params.walletAddress, params.chainId, csrfToken, params.ttlSeconds],
    );
    if (maxPerAccount !== undefined) {
      await tx.query(
        `DELETE FROM web_sessions WHERE id IN (
           SELECT id FROM web_sessions WHERE account_id = $1 AND expires_at > now() AND id <> $2
            ORDER BY created_at DESC, id OFFSET $3)`,
        [params.accountId, id, maxPerAccount - 1],
      );
    }
    return inserted;
  });
  if (!row) throw new Error('the session insert returned no row');
  return {
    cookie,
    session: { id: row.id, accountId: params.accountId, walletAddress: params.walletAddress, chainId: params.chainId, csrfToken, expiresAt: row.expires_at },
  };
}

/** The session of this cookie value, expired or not (the caller tells the two apart); null when unknown. */
export async function findWebSession(db: Queryable, cookie: string): Promise<WebSession | null> {
  const [row] = await db.query<{
    id: string;
    account_id: string;
    account_status: 'active' | 'suspended';
    wallet_address: string;
    chain_id: number;
    csrf_token: string;
    expires_at: Date;
  }>(
    `SELECT s.id, s.account_id, a.status AS account_status, s.wallet_address, s.chain_id, s.csrf_token, s.expires_at
       FROM web_sessions s JOIN accounts a ON a.id = s.account_id
      WHERE s.id = $1`,
    [hashCookieValue(cookie)],
  );
  if (!row) return null;
  return {
    id: row.id,
    accountId: row.account_id,
    accountStatus: row.account_status,
    walletAddress: row.wallet_address,
    chainId: row.chain_id,
    csrfToken: row.csrf_token,
    expiresAt: row.expires_at,
  };
}

/** Signs the cookie's session out; nothing happens when there is none. */
export async function deleteWebSession(db: Queryable, cookie: string): Promise<void> {
  await db.query('DELETE FROM web_sessions WHERE id = $1', [hashCookieValue(cookie)]);
}

/** Ends every session of the account (it was suspended); returns how many. */
export async function deleteAccountWebSessions(db: Queryable, accountId: string): Promise<number> {
  const rows = await db.query('DELETE FROM web_sessions WHERE account_id = $1 RETURNING id', [accountId]);
  return rows.length;
}

/** Deletes sessions that expired; returns how many. */
export async function deleteExpiredWebSessions(db: Queryable): Promise<number> {
  const rows = await db.query('DELETE FROM web_sessions WHERE expires_at <= now() RETURNING id');
  return rows.length;
}
