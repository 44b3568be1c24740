import { API_KEY_SCOPES, type ApiKeyScope } from '@gpufarm/shared';
import type { Queryable } from '../db/database.js';
import { newId } from '../ids.js';
import { generateApiKey, hashApiKey, type KeyEnvironment } from './api-keys.js';

export interface ApiKeyRecord {
  keyId: string;
  accountId: string;
  walletAddress: string;
  accountStatus: 'active' | 'suspended';
  scopes: ApiKeyScope[];
  revokedAt: Date | null;
}

/** The keys of these hashes with their accounts, one answer per hash in the same order (null when unknown). */
export async function findApiKeysByHash(db: Queryable, keyHashes: readonly string[]): Promise<Array<ApiKeyRecord | null>> {
  const rows = await db.query<{
    key_hash: string;
    key_id: string;
    account_id: string;
    wallet_address: string;
    account_status: 'active' | 'suspended';
    scopes: string[];
    revoked_at: Date | null;
  }>(
    `SELECT k.key_hash, k.id AS key_id, k.account_id, a.wallet_address, a.status AS account_status, k.scopes, k.revoked_at
       FROM api_keys k JOIN accounts a ON a.id = k.account_id
      WHERE k.key_hash = ANY($1::text[])`,
    [keyHashes],
  );
  const byHash = new Map(
    rows.map((row) => [
      row.key_hash,
      {
        keyId: row.key_id,
        accountId: row.account_id,
        walletAddress: row.wallet_address,
        accountStatus: row.account_status,
        scopes: row.scopes.filter((s): s is ApiKeyScope => (API_KEY_SCOPES as readonly string[]).includes(s)),
        revokedAt: row.revoked_at,
      },
    ]),
  );
  return keyHashes.map((hash) => byHash.get(hash) ?? null);
}

export interface CreatedApiKey {
  /** The full key: shown once, never stored. */
  key: string;
  keyId: string;
  accountId: string;
  walletAddress: string;
  scopes: ApiKeyScope[];
  accountCreated: boolean;
}

/**
 * Creates a key for the account whose primary wallet is `walletAddress`, creating the account
 * first when there is none. Only the key's SHA-256 is stored.
 */
export async function createApiKey(
  db: Queryable,
  params: { walletAddress: string; scopes: ApiKeyScope[]; environment: KeyEnvironment; label?: string | null },
): Promise<CreatedApiKey> {
  const wallet = params.walletAddress.toLowerCase();
  const inserted = await db.query<{ id: string }>(
    'INSERT INTO accounts (id, wallet_address) VALUES ($1, $2) ON CONFLICT (wallet_address) DO NOTHING RETURNING id',
    [newId('acct'), wallet],
  );
  const [account] = inserted.length > 0 ? inserted : await db.query<{ id: string }>('SELECT id FROM accounts WHERE wallet_address = $1', [wallet]);
  if (!account) throw new Error(`account for ${wallet} vanished while creating a key`);
  const key = generateApiKey(params.environment);
  const keyId = newId('key');
  const scopes = [...new Set(params.scopes)];
  await db.query(
    'INSERT INTO api_keys (id, account_id, key_hash, environment, last_four, scopes, label) VALUES ($1, $2, $3, $4, $5, $6, $7)',
    [keyId, account.id, hashApiKey(key), params.environment, key.slice(-4), scopes, params.label ?? null],
  );
  return { key, keyId, accountId: account.id, walletAddress: wallet, scopes, accountCreated: inserted.length > 0 };
}

/** Revokes a key; returns false when there is no such key. Revoking twice keeps the first time. */
export async function revokeApiKey(db: Queryable, keyId: string): Promise<boolean> {
  const rows = await db.query('UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1 RETURNING id', [keyId]);
  return rows.length > 0;
}

export async function setAccountStatus(db: Queryable, accountId: string, status: 'active' | 'suspended'): Promise<boolean> {
  const rows = await db.query('UPDATE accounts SET status = $2 WHERE id = $1 RETURNING id', [accountId, status]);
  return rows.length > 0;
}

/** The enrolled machine whose token hashes to `tokenHash`, unless an operator disabled it. */
export async function findMachineByTokenHash(db: Queryable, tokenHash: string): Promise<{ machineId: string; farmId: string } | null> {
  const [row] = await db.query<{ machineId: string; farmId: string }>(
    `SELECT id AS "machineId", farm_id AS "farmId" FROM machines WHERE token_hash = $1 AND status <> 'disabled'`,
    [tokenHash],
  );
  return row ?? null;
}

/**
 * Creates, once, an account of the service itself with a revoked key that no presented key can
 * match (its `key_hash` is not a SHA-256): the owner of jobs the control plane runs for itself.
 */
export async function ensureServiceAccount(db: Queryable, params: { accountId: string; keyId: string; label: string }): Promise<void> {
  await db.query(`INSERT INTO accounts (id, wallet_address) VALUES ($1, '0x0000000000000000000000000000000000000000') ON CONFLICT DO NOTHING`, [params.accountId]);
  await db.query(
    `INSERT INTO api_keys (id, account_id, key_hash, environment, last_four, scopes, label, revoked_at)
     VALUES ($1, $2, 'service: no key', 'live', '----', ARRAY[]::text[], $3, now()) ON CONFLICT DO NOTHING`,
    [params.keyId, params.accountId, params.label],
  );
}
