import { z } from 'zod';
import { tokenAmountSchema } from '../money.js';
import { addressSchema, hexDataSchema, TX_HASH, txHashSchema } from './common.js';
import { jobSchema } from './job.js';

/** One transaction the customer's wallet sends: `value` is wei (a decimal string), `data` the calldata. */
export const fundingCallSchema = z.strictObject({
  title: z.string().min(1),
  to: addressSchema,
  data: hexDataSchema,
  value: tokenAmountSchema,
});
export type FundingCall = z.infer<typeof fundingCallSchema>;

/**
 * `GET /v1/jobs/:id/funding` (and `funding` of the creation response): the calls `signer` must
 * send in order. Stablecoin: approve (skipped when the allowance covers it) then createJob;
 * ETH: one createJob carrying `value`.
 */
export const fundingSchema = z.strictObject({
  object: z.literal('funding'),
  signer: addressSchema,
  calls: z.array(fundingCallSchema).min(1),
});
export type Funding = z.infer<typeof fundingSchema>;

/** Body of `POST /v1/jobs/:id/fund-confirm`: the hash of the mined createJob transaction. */
export const fundConfirmRequestSchema = z.strictObject(
  {
    // The pipe renders its input side in the OpenAPI document: the meta names the hash's pattern there.
    txHash: z
      .string({ error: (issue) => (issue.input === undefined ? 'is required' : 'must be a transaction hash: 0x followed by 64 hex digits') })
      .pipe(txHashSchema)
      .meta({ pattern: TX_HASH.source }),
  },
  { error: 'must be a JSON object' },
);
export type FundConfirmRequest = z.infer<typeof fundConfirmRequestSchema>;

/** Success of `POST /v1/jobs/:id/fund-confirm`; `job.status` is `QUEUED`. */
export const fundConfirmResponseSchema = z.strictObject({
  object: z.literal('funding.confirmation'),
  status: z.literal('confirmed'),
  message: z.string().min(1),
  job: jobSchema,
});
export type FundConfirmResponse = z.infer<typeof fundConfirmResponseSchema>;

/**
 * 202 answer of `POST /v1/jobs/:id/fund-confirm` while the transaction is unknown, pending or
 * short of the required confirmations (with header `Retry-After`); `job.status` is unchanged.
 */
export const fundConfirmPendingSchema = z.strictObject({
  object: z.literal('funding.confirmation'),
  status: z.literal('pending'),
  message: z.string().min(1),
  confirmations: z.int().min(0),
  requiredConfirmations: z.int().min(1),
  job: jobSchema,
});
export type FundConfirmPending = z.infer<typeof fundConfirmPendingSchema>;
