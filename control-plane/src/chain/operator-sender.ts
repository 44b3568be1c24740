import { keccak256, TransactionReceiptNotFoundError, type Hex, type TransactionReceipt } from 'viem';
import { withAdvisoryLock } from '../db/advisory-lock.js';
import type { Database } from '../db/database.js';
import type { EscrowChain } from './client.js';
import { ChainError } from './errors.js';
import { findOperatorTx, recordSignedOperatorTx, setOperatorTxState, type OperatorAction, type OperatorTxKey, type OperatorTxRow } from './operator-store.js';

/** How long one call waits for a receipt; an unmined transaction stays `sent` and the next call looks again. */
const RECEIPT_WAIT_MS = 30_000;

/** The transaction's receipt, or null when the node has none; a node that does not answer throws (never read as "none"). */
async function receiptOf(chain: EscrowChain, hash: Hex): Promise<TransactionReceipt | null> {
  try {
    return await chain.publicClient.getTransactionReceipt({ hash });
  } catch (err) {
    if (err instanceof TransactionReceiptNotFoundError) return null;
    throw err;
  }
}

/** The recorded transaction's fate on chain: its receipt, or dropped when its nonce went to another transaction. */
async function resolveRecorded(chain: EscrowChain, row: OperatorTxRow): Promise<TransactionReceipt | 'dropped' | null> {
  const hash = row.tx_hash as Hex;
  const receipt = await receiptOf(chain, hash);
  if (receipt) return receipt;
  const mined = await chain.publicClient.getTransactionCount({ address: row.sender as Hex, blockTag: 'latest' });
  if (BigInt(mined) > BigInt(row.nonce)) {
    // A receipt may land between the two reads: look once more before calling it dropped.
    const late = await receiptOf(chain, hash);
    return late ?? 'dropped';
  }
  return null;
}

async function broadcastAndWait(chain: EscrowChain, row: Pick<OperatorTxRow, 'tx_hash' | 'raw_tx'>): Promise<TransactionReceipt> {
  // A node that already has it answers "already known" or "nonce too low": the receipt decides.
  await chain.publicClient.sendRawTransaction({ serializedTransaction: row.raw_tx as Hex }).catch(() => undefined);
  try {
    return await chain.publicClient.waitForTransactionReceipt({ hash: row.tx_hash as Hex, timeout: RECEIPT_WAIT_MS });
  } catch (err) {
    throw new ChainError('chain_unavailable', `no receipt for ${row.tx_hash} yet; the next try resolves it before anything is signed again`, { cause: err });
  }
}

/**
 * Sends the operator transaction for one job action at most once across replicas and crashes,
 * and answers its receipt (reverted ones included; the caller reads the status). Every send of
 * the operator key holds one database lock per key, so replicas never race for a nonce. Under
 * it, a transaction recorded for the action earlier is resolved first: its receipt is the
 * answer; while its nonce is still free it is broadcast again (the same bytes, the same hash).
 * Only when none was recorded, or the recorded one reverted or can never be mined (its nonce
 * went to another transaction), is the call signed anew; its nonce, hash and bytes are
 * recorded before the broadcast. `prepare` builds and signs it (gas estimation refuses a call
 * the contract would revert, before anything is recorded or sent).
 */
export async function sendOperatorTxOnce(
  chain: EscrowChain,
  db: Database,
  action: { jobKey: Hex; action: OperatorAction },
  sender: Hex,
  prepare: (nonce: number) => Promise<Hex>,
): Promise<TransactionReceipt> {
  const key: OperatorTxKey = { chainId: chain.chainId, escrowAddress: chain.escrowAddress, jobKey: action.jobKey, action: action.action };
  const locked = await withAdvisoryLock(db, `operator:${chain.chainId}:${sender.toLowerCase()}`, async () => {
    const recorded = await findOperatorTx(db, key);
    if (recorded && (recorded.state === 'sent' || recorded.state === 'mined')) {
      const fate = await resolveRecorded(chain, recorded);
      if (fate === null) return settle(db, key, await broadcastAndWait(chain, recorded));
      if (fate !== 'dropped') return settle(db, key, fate);
      await setOperatorTxState(db, key, recorded.tx_hash, 'dropped');
    }
    const nonce = await chain.publicClient.getTransactionCount({ address: sender, blockTag: 'pending' });
    const rawTx = await prepare(nonce);
    const signed = { tx_hash: keccak256(rawTx), raw_tx: rawTx };
    await recordSignedOperatorTx(db, key, { sender, nonce, txHash: signed.tx_hash, rawTx });
    return settle(db, key, await broadcastAndWait(chain, signed));
  });
  if (!locked.ran) throw new Error('unreachable: a waiting lock always runs');
  return locked.value;
}

async function settle(db: Database, key: OperatorTxKey, receipt: TransactionReceipt): Promise<TransactionReceipt> {
  await setOperatorTxState(db, key, receipt.transactionHash, receipt.status === 'success' ? 'mined' : 'reverted');
  return receipt;
}
