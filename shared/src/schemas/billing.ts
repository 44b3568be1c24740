import { z } from 'zod';
import { tokenAmountSchema } from '../money.js';
import { addressSchema, isoTimeSchema, listEnvelopeSchema, nonNegativeIntSchema, txHashSchema } from './common.js';

/**
 * Billing entry types, each an event of a job's escrow:
 * `funded` (the customer locked `maxPayment`), `charge` (the final cost recorded at completion),
 * `release` (the escrow paid out after the challenge window), `refund` (money returned to the customer).
 */
export const BILLING_ENTRY_TYPES = ['funded', 'charge', 'refund', 'release'] as const;
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
