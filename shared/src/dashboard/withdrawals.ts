import { z } from 'zod';
import { tokenAmountSchema } from '../money.js';
import { addressSchema, isoTimeSchema, txHashSchema } from '../schemas/common.js';

/**
 * `GET /dashboard/api/withdrawals` (the customer's) and `GET /operator/api/withdrawals` (the
 * farms'): payouts the escrow could not send at a release (`PaymentDeferred`), waiting in its
 * `withdrawable(wallet, token)`, summed per wallet and token. One `withdraw(token)` sent by that
 * wallet takes the sum; `jobs` lists the releases it came from. Web areas only, not /v1.
 */
export const withdrawalSchema = z.strictObject({
  wallet: addressSchema,
  token: addressSchema,
  symbol: z.string().min(1),
  decimals: z.int().min(0).max(77),
  amount: tokenAmountSchema,
  jobs: z.array(z.strictObject({ jobId: z.string().min(1), amount: tokenAmountSchema, txHash: txHashSchema, deferredAt: isoTimeSchema })),
});
export type Withdrawal = z.infer<typeof withdrawalSchema>;

export const withdrawalListSchema = z.strictObject({ data: z.array(withdrawalSchema) });
export type WithdrawalList = z.infer<typeof withdrawalListSchema>;
