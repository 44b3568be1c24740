import { z } from 'zod';
import { BENCHMARK_TIERS, WORKLOAD_TYPES } from '../constants.js';
import { capacityListEnvelopeSchema, isoTimeSchema, nonNegativeIntSchema } from './common.js';

/** Offer states. The spec shows `AVAILABLE`; `BUSY` is an offer whose GPUs are all in use. */
export const CAPACITY_STATUSES = ['AVAILABLE', 'BUSY'] as const;
export const GPU_FAMILIES = ['consumer', 'datacenter', 'workstation'] as const;

export const capacityGpuSchema = z.strictObject({
  classId: z.string().min(1),
  label: z.string().min(1),
  model: z.string().min(1),
  vendor: z.string().min(1),
  family: z.enum(GPU_FAMILIES),
  vramBytes: nonNegativeIntSchema,
  /** Null when the machine did not report it (for example in simulated mode). */
  cudaVersion: z.string().min(1).nullable(),
  driverVersion: z.string().min(1).nullable(),
});

export const capacityRegionSchema = z.strictObject({
  key: z.string().min(1),
  label: z.string().min(1),
  group: z.string().min(1),
});

export const capacityPriceSchema = z.strictObject({
  perGpuHourMicroUsd: nonNegativeIntSchema,
  maxPerGpuHourMicroUsd: nonNegativeIntSchema,
  minBillingSeconds: nonNegativeIntSchema,
});

/**
 * Whether the offer's machines proved their GPUs with a GPU challenge (beyond the spec):
 * `proven` when every machine of the offer has passed one on real GPUs, `provenAt` the oldest of
 * their last passes, null unless all are proven. Simulated machines are never proven.
 */
export const capacityProofSchema = z.strictObject({
  proven: z.boolean(),
  provenAt: isoTimeSchema.nullable(),
});

/**
 * One capacity offer of `GET /v1/capacity`: a farm's GPUs of one class in one region.
 * `workloads` lists the workload types the farm accepts, or null for any.
 */
export const capacityOfferSchema = z.strictObject({
  id: z.string().min(1),
  kind: z.literal('farm'),
  farm: z.strictObject({ slug: z.string().min(1), name: z.string().min(1) }),
  provider: z.string().min(1),
  gpu: capacityGpuSchema,
  count: nonNegativeIntSchema,
  available: nonNegativeIntSchema,
  busy: nonNegativeIntSchema,
  maxAvailablePerMachine: nonNegativeIntSchema,
  maxPerMachine: nonNegativeIntSchema,
  machines: nonNegativeIntSchema,
  combinedVramBytes: nonNegativeIntSchema,
  benchmarkTier: z.enum(BENCHMARK_TIERS),
  uptimePct: z.number().min(0).max(100),
  region: capacityRegionSchema,
  price: capacityPriceSchema,
  queue: nonNegativeIntSchema,
  status: z.enum(CAPACITY_STATUSES),
  workloads: z.array(z.enum(WORKLOAD_TYPES)).nullable(),
  simulated: z.boolean(),
  proof: capacityProofSchema,
});
export type CapacityOffer = z.infer<typeof capacityOfferSchema>;
export type CapacityProof = z.infer<typeof capacityProofSchema>;

/** `GET /v1/capacity`: `{ object: 'list', chainId, generatedAt, data, nextCursor }`. */
export const capacityListSchema = capacityListEnvelopeSchema(capacityOfferSchema);
export type CapacityList = z.infer<typeof capacityListSchema>;
