import type { Withdrawal } from '@gpufarm/shared';
import type { Address } from 'viem';
import { sameAddress, type DeferredPaymentLog, type EscrowJob } from '../chain/escrow.js';
import type { DeferredParty, DeferredPaymentRow } from './deferred-payments-store.js';

/**
 * Payouts the escrow could not send at a job's release (a wallet that refuses ETH, a token that
 * blocks an address): the escrow credits them to the recipient, who takes them with
 * `withdraw(token)` from that wallet. Recorded from the PaymentDeferred log (by the release that
 * made it, or the event scan), settled by the recipient's next Withdrawn log for that token,
 * which pays out every credit logged before it (`deferred-payments-store.ts`).
 */

/**
 * Whose share of the release a deferral was, from the escrow's record of the job: the provider's
 * payout, the customer's rest, else the treasury's fee (release pays no one else). A wallet that
 * is both provider and customer is counted as the provider.
 */
export function partyOf(escrowJob: Pick<EscrowJob, 'provider' | 'customer'>, to: Address): DeferredParty {
  if (sameAddress(to, escrowJob.provider)) return 'provider';
  if (sameAddress(to, escrowJob.customer)) return 'customer';
  return 'treasury';
}

/** The deferrals of a release with whose share each was. */
export function withParties(escrowJob: Pick<EscrowJob, 'provider' | 'customer'>, logs: readonly DeferredPaymentLog[]): Array<DeferredPaymentLog & { party: DeferredParty }> {
  return logs.map((log) => ({ ...log, party: partyOf(escrowJob, log.to) }));
}

/** Waiting deferrals summed per (wallet, token) (`Withdrawal` in shared/): one `withdraw(token)` from the wallet takes each sum. */
export function withdrawalsOf(rows: readonly DeferredPaymentRow[]): Withdrawal[] {
  const groups = new Map<string, { view: Withdrawal; amount: bigint }>();
  for (const row of rows) {
    const key = `${row.recipient}|${row.token}`;
    const group = groups.get(key) ?? { view: { wallet: row.recipient, token: row.token, symbol: row.symbol, decimals: row.decimals, amount: '0', jobs: [] }, amount: 0n };
    group.amount += BigInt(row.amount);
    group.view.jobs.push({ jobId: row.jobId, amount: row.amount, txHash: row.txHash, deferredAt: new Date(row.deferredAt).toISOString() });
    groups.set(key, group);
  }
  return [...groups.values()].map((g) => ({ ...g.view, amount: g.amount.toString() }));
}
