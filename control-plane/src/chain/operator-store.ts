import type { Queryable } from '../db/database.js';

export type OperatorAction = 'authorizeRefund' | 'completeJob' | 'release' | 'resolveDispute' | 'claimDisputeTimeout';
export type OperatorTxState = 'sent' | 'mined' | 'reverted' | 'dropped';

/** One job action's operator transaction (its latest signing). */
export interface OperatorTxRow {
  chain_id: number;
  escrow_address: string;
  job_key: string;
  action: OperatorAction;
  sender: string;
  nonce: number | bigint;
  tx_hash: string;
  raw_tx: string;
  state: OperatorTxState;
  attempts: number;
}

export interface OperatorTxKey {
  chainId: number;
  escrowAddress: string;
  jobKey: string;
  action: OperatorAction;
}

const keyParams = (key: OperatorTxKey) => [key.chainId, key.escrowAddress.toLowerCase(), key.jobKey.toLowerCase(), key.action];

export async function findOperatorTx(db: Queryable, key: OperatorTxKey): Promise<OperatorTxRow | null> {
  const [row] = await db.query<OperatorTxRow>(
    'SELECT * FROM operator_transactions WHERE chain_id = $1 AND escrow_address = $2 AND job_key = $3 AND action = $4',
    keyParams(key),
  );
  return row ?? null;
}

/** Records a signed transaction for the action before it is broadcast (a new signing replaces a reverted or dropped one). */
export async function recordSignedOperatorTx(db: Queryable, key: OperatorTxKey, tx: { sender: string; nonce: number; txHash: string; rawTx: string }): Promise<void> {
  await db.query(
    `INSERT INTO operator_transactions (chain_id, escrow_address, job_key, action, sender, nonce, tx_hash, raw_tx, state)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'sent')
     ON CONFLICT (chain_id, escrow_address, job_key, action) DO UPDATE
       SET sender = EXCLUDED.sender, nonce = EXCLUDED.nonce, tx_hash = EXCLUDED.tx_hash, raw_tx = EXCLUDED.raw_tx,
           state = 'sent', attempts = operator_transactions.attempts + 1, updated_at = now()`,
    [...keyParams(key), tx.sender.toLowerCase(), tx.nonce, tx.txHash.toLowerCase(), tx.rawTx],
  );
}

/** Records what became of the action's transaction `txHash`. */
export async function setOperatorTxState(db: Queryable, key: OperatorTxKey, txHash: string, state: OperatorTxState): Promise<void> {
  await db.query(
    'UPDATE operator_transactions SET state = $6, updated_at = now() WHERE chain_id = $1 AND escrow_address = $2 AND job_key = $3 AND action = $4 AND tx_hash = $5',
    [...keyParams(key), txHash.toLowerCase(), state],
  );
}
