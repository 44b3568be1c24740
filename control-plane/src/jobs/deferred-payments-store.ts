import type { DeferredPaymentLog } from '../chain/escrow.js';
import type { Queryable } from '../db/database.js';

/**
 * The SQL of deferred payouts (`escrow_deferred_payments`, see `deferred-payments.ts`): recorded
 * once per PaymentDeferred log, settled by the recipient's next Withdrawn log for the token.
 */

/** Whose share of a release a deferral was: the farm's payout, the platform's fee, the customer's rest. */
export type DeferredParty = 'provider' | 'treasury' | 'customer';

export interface DeferredPaymentRow {
  jobId: string;
  party: DeferredParty;
  recipient: string;
  token: string;
  symbol: string;
  decimals: number;
  amount: string;
  txHash: string;
  deferredAt: Date;
  withdrawTxHash: string | null;
  withdrawnAt: Date | null;
}

/** Records a job's deferred payouts once per log (a release and the event scan both report them). */
export async function insertDeferredPayments(
  db: Queryable,
  params: { chainId: number; escrowAddress: string; jobId: string; payments: ReadonlyArray<DeferredPaymentLog & { party: DeferredParty }> },
): Promise<void> {
  for (const log of params.payments) {
    await db.query(
      `INSERT INTO escrow_deferred_payments (chain_id, escrow_address, tx_hash, log_index, block_number, job_id, party, recipient, token, amount)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT DO NOTHING`,
      [
        params.chainId,
        params.escrowAddress.toLowerCase(),
        log.txHash.toLowerCase(),
        log.logIndex,
        log.blockNumber.toString(),
        params.jobId,
        log.party,
        log.to.toLowerCase(),
        log.token.toLowerCase(),
        log.amount.toString(),
      ],
    );
  }
}

/**
 * A Withdrawn log: `account` took its whole credit in `token`, so every deferral to it in that
 * token logged before this one (block, then log index) is paid. Returns how many were settled.
 */
export async function markWithdrawn(
  db: Queryable,
  params: { chainId: number; escrowAddress: string; account: string; token: string; txHash: string; blockNumber: bigint; logIndex: number; at: Date },
): Promise<number> {
  const rows = await db.query(
    `UPDATE escrow_deferred_payments SET withdraw_tx_hash = $5, withdrawn_at = $8
      WHERE chain_id = $1 AND escrow_address = $2 AND recipient = $3 AND token = $4 AND withdraw_tx_hash IS NULL
        AND (block_number < $6 OR (block_number = $6 AND log_index < $7))
      RETURNING tx_hash`,
    [params.chainId, params.escrowAddress.toLowerCase(), params.account.toLowerCase(), params.token.toLowerCase(), params.txHash.toLowerCase(), params.blockNumber.toString(), params.logIndex, params.at],
  );
  return rows.length;
}

const ROW = `d.job_id AS "jobId", d.party, d.recipient, d.token, j.payment_symbol AS symbol, j.payment_decimals AS decimals, d.amount::text AS amount, d.tx_hash AS "txHash",
  d.deferred_at AS "deferredAt", d.withdraw_tx_hash AS "withdrawTxHash", d.withdrawn_at AS "withdrawnAt"`;

/** The deferrals of these jobs, oldest first. */
export function deferredPaymentsOfJobs(db: Queryable, jobIds: readonly string[]): Promise<DeferredPaymentRow[]> {
  return db.query<DeferredPaymentRow>(`SELECT ${ROW} FROM escrow_deferred_payments d JOIN jobs j ON j.id = d.job_id WHERE d.job_id = ANY($1::text[]) ORDER BY d.block_number, d.log_index`, [jobIds]);
}

/** An account's own shares (as the customer) of its jobs' releases that wait for a withdrawal, oldest first. */
export function waitingForCustomer(db: Queryable, accountId: string): Promise<DeferredPaymentRow[]> {
  return db.query<DeferredPaymentRow>(
    `SELECT ${ROW} FROM escrow_deferred_payments d JOIN jobs j ON j.id = d.job_id
      WHERE j.account_id = $1 AND d.party = 'customer' AND d.withdraw_tx_hash IS NULL
      ORDER BY d.block_number, d.log_index`,
    [accountId],
  );
}

/** The farms' payouts (jobs that ran on their machines) that wait for a withdrawal, oldest first. */
export function waitingForFarms(db: Queryable, farmIds: readonly string[]): Promise<DeferredPaymentRow[]> {
  return db.query<DeferredPaymentRow>(
    `SELECT ${ROW} FROM escrow_deferred_payments d JOIN jobs j ON j.id = d.job_id
       JOIN assignments a ON a.id = j.assignment_id JOIN machines m ON m.id = a.machine_id
      WHERE m.farm_id = ANY($1::text[]) AND d.party = 'provider' AND d.withdraw_tx_hash IS NULL
      ORDER BY d.block_number, d.log_index`,
    [farmIds],
  );
}

