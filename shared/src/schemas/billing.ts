import { z } from 'zod';
import { tokenAmountSchema } from '../money.js';
import { addressSchema, isoTimeSchema, listEnvelopeSchema, nonNegativeIntSchema, txHashSchema } from './common.js';

/**
 * Billing entry types, each an event of a job's escrow, amounts in micro-USD and token units:
 * `funded` (the deposit, `maxPayment`, moved from the wallet into the escrow), `charge` (the cost
 * recorded at completion, held for the provider), `credit` (the part of a charge a dispute's
 * outcome cancelled), `release` (the escrow paid out: what went back to the wallet, the deposit
 * less the final charge), `refund` (the whole deposit back, for a job that was never charged).
 */
export const BILLING_ENTRY_TYPES = ['funded', 'charge', 'credit', 'release', 'refund'] as const;
export const billingEntryTypeSchema = z.enum(BILLING_ENTRY_TYPES);
export type BillingEntryType = z.infer<typeof billingEntryTypeSchema>;

/**
 * One entry of `GET /v1/billing`. `amountMicroUsd` is never negative; `type` gives the direction.
 * `token`, `amount` (base units) and `txHash` are null when the entry has no on-chain counterpart
 * (yet); `jobId` is null for an entry not tied to a job.
 */
export const billingEntrySchema = z.strictObject({
  object: z.literal('billing_entry'),
  id: z.string().min(1),
  type: billingEntryTypeSchema,
  jobId: z.string().min(1).nullable(),
  amountMicroUsd: nonNegativeIntSchema,
  token: addressSchema.nullable(),
  amount: tokenAmountSchema.nullable(),
  txHash: txHashSchema.nullable(),
  createdAt: isoTimeSchema,
});
export type BillingEntry = z.infer<typeof billingEntrySchema>;

export const billingListSchema = listEnvelopeSchema(billingEntrySchema);
export type BillingList = z.infer<typeof billingListSchema>;

/** Sums of billing entries in micro-USD, as bigint: never a float. */
export interface BillingSums {
  /** Deposits moved into the escrow. */
  funded: bigint;
  /** Charges less their credits: what the jobs cost. */
  charged: bigint;
  /** What came back to the wallet: releases' unspent parts and whole refunds. */
  returned: bigint;
  /** funded − charged − returned: still in the escrow (jobs not settled yet), for entries of whole jobs. */
  held: bigint;
}

/** Adds up entries the way the billing page, the job page and `gf billing` show them. */
export function billingSums(entries: Iterable<Pick<BillingEntry, 'type' | 'amountMicroUsd'>>): BillingSums {
  const by: Record<BillingEntryType, bigint> = { funded: 0n, charge: 0n, credit: 0n, release: 0n, refund: 0n };
  for (const entry of entries) by[entry.type] += BigInt(entry.amountMicroUsd);
  const charged = by.charge - by.credit;
  const returned = by.release + by.refund;
  return { funded: by.funded, charged, returned, held: by.funded - charged - returned };
}
