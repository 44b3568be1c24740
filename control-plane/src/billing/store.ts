import type { Queryable } from '../db/database.js';
import { newId } from '../ids.js';

export interface BillingEntryRow {
  id: string;
  seq: number;
  type: string;
  job_id: string | null;
  amount_micro_usd: number;
  token: string | null;
  amount: string | null;
  tx_hash: string | null;
  created_at: Date;
}

/** One page of an account's billing entries (of one job when `jobId` is given), newest first, below insertion position `beforeSeq`. */
export async function listBillingEntries(
  db: Queryable,
  params: { accountId: string; limit: number; beforeSeq: number | null; jobId?: string | null },
): Promise<BillingEntryRow[]> {
  return db.query<BillingEntryRow>(
    `SELECT id, seq, type, job_id, amount_micro_usd, token, amount::text AS amount, tx_hash, created_at
       FROM billing_entries
      WHERE account_id = $1
        AND ($2::bigint IS NULL OR seq < $2::bigint)
        AND ($4::text IS NULL OR job_id = $4::text)
      ORDER BY seq DESC
      LIMIT $3`,
    [params.accountId, params.beforeSeq, params.limit, params.jobId ?? null],
  );
}

/** Records a billing entry (funded, charge, credit, release, refund): the escrow's effects and its event scan write these. */
export async function insertBillingEntry(
  db: Queryable,
  entry: { accountId: string; type: string; jobId?: string | null; amountMicroUsd: number; token?: string | null; amount?: string | null; txHash?: string | null },
): Promise<string> {
  const id = newId('bil');
  await db.query(
    'INSERT INTO billing_entries (id, account_id, type, job_id, amount_micro_usd, token, amount, tx_hash) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)',
    [id, entry.accountId, entry.type, entry.jobId ?? null, entry.amountMicroUsd, entry.token ?? null, entry.amount ?? null, entry.txHash ?? null],
  );
  return id;
}

/** The `charge` entry of a job (its first: a job is charged once), amounts as recorded; null before completion. */
export async function findJobCharge(db: Queryable, jobId: string): Promise<{ microUsd: number; units: string | null } | null> {
  const [row] = await db.query<{ amount_micro_usd: number; amount: string | null }>(
    `SELECT amount_micro_usd, amount::text AS amount FROM billing_entries WHERE job_id = $1 AND type = 'charge' ORDER BY seq LIMIT 1`,
    [jobId],
  );
  return row ? { microUsd: Number(row.amount_micro_usd), units: row.amount } : null;
}
