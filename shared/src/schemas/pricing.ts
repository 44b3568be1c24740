import { z } from 'zod';
import { addressSchema, nonNegativeIntSchema } from './common.js';
import { GPU_FAMILIES } from './capacity.js';

/** A token the escrow accepts: `eth` (zero address, 18 decimals) or `stable` (a USD stablecoin, 6 decimals). */
export const paymentAssetSchema = z.strictObject({
  kind: z.enum(['eth', 'stable']),
  token: addressSchema,
  symbol: z.string().min(1),
  decimals: z.int().min(0).max(77),
});
export type PaymentAsset = z.infer<typeof paymentAssetSchema>;

/** Per GPU class: GPU counts and the price spread; the prices are null when no GPU of the class is priced. */
export const pricingClassSchema = z.strictObject({
  classId: z.string().min(1),
  label: z.string().min(1),
  family: z.enum(GPU_FAMILIES),
  vramBytes: nonNegativeIntSchema,
  gpusOnline: nonNegativeIntSchema,
  gpusBusy: nonNegativeIntSchema,
  gpusAvailable: nonNegativeIntSchema,
  gpusPriced: nonNegativeIntSchema,
  minPerGpuHourMicroUsd: nonNegativeIntSchema.nullable(),
  medianPerGpuHourMicroUsd: nonNegativeIntSchema.nullable(),
  maxPerGpuHourMicroUsd: nonNegativeIntSchema.nullable(),
});
export type PricingClass = z.infer<typeof pricingClassSchema>;

/** `GET /v1/pricing` (`object: 'pricing'`). */
export const pricingSchema = z.strictObject({
  object: z.literal('pricing'),
  chainId: z.int().positive(),
  currency: z.literal('USD'),
  unit: z.string().min(1),
  platformFeeBps: z.int().min(0).max(10_000),
  minBillingSeconds: z.strictObject({ min: nonNegativeIntSchema, max: nonNegativeIntSchema }),
  paymentAssets: z.array(paymentAssetSchema),
  classes: z.array(pricingClassSchema),
});
export type Pricing = z.infer<typeof pricingSchema>;
