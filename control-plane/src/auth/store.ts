import { API_KEY_SCOPES, fieldDetail, GpufarmError, type ApiKeyScope } from '@gpufarm/shared';
import type { Database, Queryable } from '../db/database.js';
import { newId } from '../ids.js';
import { generateApiKey, hashApiKey, type KeyEnvironment } from './api-keys.js';

export interface ApiKeyRecord {
  keyId: string;
  accountId: string;
  walletAddress: string;
  accountStatus: 'active' | 'suspended';
  scopes: ApiKeyScope[];
  revokedAt: Date | null;
  lastUsedAt: Date | null;
}

function knownScopes(scopes: readonly string[]): ApiKeyScope[] {
  return scopes.filter((s): s is ApiKeyScope => (API_KEY_SCOPES as readonly string[]).includes(s));
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
    last_used_at: Date | null;
  }>(
    `SELECT k.key_hash, k.id AS key_id, k.account_id, a.wallet_address, a.status AS account_status, k.scopes, k.revoked_at, k.last_used_at
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
        scopes: knownScopes(row.scopes),
        revokedAt: row.revoked_at,
        lastUsedAt: row.last_used_at,
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

/** The account already has as many keys (not revoked) as it may: 409 `conflict` at the HTTP edge. */
export class ApiKeyLimitError extends GpufarmError<'conflict'> {
  constructor(readonly max: number) {
    super(
      'conflict',
      `This account already has ${max} API keys that are not revoked, the most one account may have. Revoke a key it no longer uses, then create the new one.`,
      { details: [fieldDetail('apiKeys', `${max} not revoked, the most an account may have`, { subject: true })] },
    );
  }
}

/**
 * Holds the account's row until the transaction ends: the writes that count the account's keys
 * or sessions against a cap take turns, so two at once cannot both pass it.
 */
export async function lockAccount(tx: Queryable, accountId: string): Promise<void> {
  await tx.query('SELECT 1 FROM accounts WHERE id = $1 FOR UPDATE', [accountId]);
}

/**
 * Creates a key for the account whose primary wallet is `walletAddress`, creating the account
 * first when there is none. Only the key's SHA-256 is stored. With `maxActiveKeys` (the
 * account's cap, GF_API_KEYS_PER_ACCOUNT) an account holding that many keys not revoked gets
 * none: ApiKeyLimitError.
 */
export async function createApiKey(
  db: Database,
  params: { walletAddress: string; scopes: ApiKeyScope[]; environment: KeyEnvironment; label?: string | null; maxActiveKeys?: number },
): Promise<CreatedApiKey> {
  const wallet = params.walletAddress.toLowerCase();
  const account = await ensureAccount(db, wallet);
  const key = generateApiKey(params.environment);
  const keyId = newId('key');
  const scopes = [...new Set(params.scopes)];
  const { maxActiveKeys } = params;
  await db.transaction(async (tx) => {
    if (maxActiveKeys !== undefined) {
      await lockAccount(tx, account.id);
      const [row] = await tx.query<{ active: number }>('SELECT count(*)::int AS active FROM api_keys WHERE account_id = $1 AND revoked_at IS NULL', [account.id]);
      if ((row?.active ?? 0) >= maxActiveKeys) throw new ApiKeyLimitError(maxActiveKeys);
    }
    await tx.query(
      'INSERT INTO api_keys (id, account_id, key_hash, environment, last_four, scopes, label) VALUES ($1, $2, $3, $4, $5, $6, $7)',
      [keyId, account.id, hashApiKey(key), params.environment, key.slice(-4), scopes, params.label ?? null],
    );
  });
  return { key, keyId, accountId: account.id, walletAddress: wallet, scopes, accountCreated: account.created };
}

/** The account whose primary wallet is `walletAddress` (lower-case), created when there is none. */
export async function ensureAccount(db: Queryable, walletAddress: string): Promise<{ id: string; status: 'active' | 'suspended'; created: boolean }> {
  const inserted = await db.query<{ id: string; status: 'active' | 'suspended' }>(
    'INSERT INTO accounts (id, wallet_address) VALUES ($1, $2) ON CONFLICT (wallet_address) DO NOTHING RETURNING id, status',
    [newId('acct'), walletAddress],
  );
  if (inserted[0]) return { ...inserted[0], created: true };
  const [found] = await db.query<{ id: string; status: 'active' | 'suspended' }>('SELECT id, status FROM accounts WHERE wallet_address = $1', [walletAddress]);
  if (!found) throw new Error(`account for ${walletAddress} vanished while it was being created`);
  return { ...found, created: false };
}

/** A key as its owner sees it: never the key, its hash or its account. */
export interface ApiKeySummary {
  id: string;
  environment: KeyEnvironment;
  lastFour: string;
  label: string | null;
  scopes: ApiKeyScope[];
  createdAt: Date;
  lastUsedAt: Date | null;
  revokedAt: Date | null;
}

interface ApiKeySummaryRow {
  id: string;
  environment: KeyEnvironment;
  last_four: string;
  label: string | null;
  scopes: string[];
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

const SUMMARY_COLUMNS = 'id, environment, last_four, label, scopes, created_at, last_used_at, revoked_at';

function toSummary(row: ApiKeySummaryRow): ApiKeySummary {
  return {
    id: row.id,
    environment: row.environment,
    lastFour: row.last_four,
    label: row.label,
    scopes: knownScopes(row.scopes),
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at,
    revokedAt: row.revoked_at,
  };
}

/** Where a page of keys starts: after the key created at `at` (epoch seconds, to the microsecond, as text) with `id`. */
export interface KeyCursor {
  at: string;
  id: string;
}

/**
 * A page of the account's keys, newest first, revoked ones included: `limit` of them after
 * `after` when given, each with the cursor that starts the page after it.
 */
export async function listApiKeys(db: Queryable, accountId: string, page: { after: KeyCursor | null; limit: number }): Promise<Array<ApiKeySummary & { cursor: KeyCursor }>> {
  const rows = await db.query<ApiKeySummaryRow & { at: string }>(
    `SELECT ${SUMMARY_COLUMNS}, extract(epoch FROM created_at)::text AS at FROM api_keys
      WHERE account_id = $1 AND ($2::numeric IS NULL OR (extract(epoch FROM created_at), id) < ($2::numeric, $3::text))
      ORDER BY created_at DESC, id DESC LIMIT $4`,
    [accountId, page.after?.at ?? null, page.after?.id ?? null, page.limit],
  );
  return rows.map((row) => ({ ...toSummary(row), cursor: { at: row.at, id: row.id } }));
}

/** One key of the account; null when it has no such key. */
export async function findApiKey(db: Queryable, accountId: string, keyId: string): Promise<ApiKeySummary | null> {
  const [row] = await db.query<ApiKeySummaryRow>(`SELECT ${SUMMARY_COLUMNS} FROM api_keys WHERE id = $1 AND account_id = $2`, [keyId, accountId]);
  return row ? toSummary(row) : null;
}

/**
 * Records that the key was used now, unless that was already recorded within the last minute
 * (so a busy key costs one write a minute, and concurrent callers write at most once between them).
 */
export async function touchApiKey(db: Queryable, keyId: string): Promise<void> {
  await db.query(`UPDATE api_keys SET last_used_at = now() WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')`, [keyId]);
}

/**
 * Revokes a key (of `accountId` when given: another account's key is no such key); returns the
 * revoked key, or null when there is no such key. Revoking twice keeps the first time.
 */
export async function revokeApiKey(db: Queryable, keyId: string, accountId: string | null = null): Promise<ApiKeySummary | null> {
  const [row] = await db.query<ApiKeySummaryRow>(
    `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, now()) WHERE id = $1 AND ($2::text IS NULL OR account_id = $2) RETURNING ${SUMMARY_COLUMNS}`,
    [keyId, accountId],
  );
  return row ? toSummary(row) : null;
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

/** A farm a wallet may run from the operator area, and why: its payout wallet, or a listed operator. */
export interface OperatorFarm {
  id: string;
  slug: string;
  name: string;
  payoutAddress: string | null;
  role: 'payout' | 'operator';
}

/** The farms whose payout wallet this is or which list it as an operator, by slug. */
export async function operatorFarmsOf(db: Queryable, wallet: string): Promise<OperatorFarm[]> {
  const rows = await db.query<{ id: string; slug: string; name: string; payout_address: string | null; is_payout: boolean }>(
    `SELECT f.id, f.slug, f.name, f.payout_address, f.payout_address = $1 AS is_payout
       FROM farms f
      WHERE f.payout_address = $1 OR EXISTS (SELECT 1 FROM farm_operators o WHERE o.farm_id = f.id AND o.wallet_address = $1)
      ORDER BY f.slug`,
    [wallet.toLowerCase()],
  );
  return rows.map((row) => ({ id: row.id, slug: row.slug, name: row.name, payoutAddress: row.payout_address, role: row.is_payout ? 'payout' : 'operator' }));
}
