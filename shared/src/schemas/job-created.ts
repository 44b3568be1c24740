import { z } from 'zod';
import { fundingSchema } from './funding.js';
import { jobSchema } from './job.js';

/** Verdicts of the workload policy. A created job always carries `allowed`; `rejected` ends in 422 `policy_rejected`. */
export const POLICY_VERDICTS = ['allowed', 'rejected'] as const;
export const policyVerdictSchema = z.enum(POLICY_VERDICTS);
export type PolicyVerdict = z.infer<typeof policyVerdictSchema>;

/**
 * One policy finding: the rule's id (e.g. `network.private_address`), the request field it is
 * about (a path like `networkPolicy.allow[0]`, null when it concerns the whole job) and a message.
 */
export const policyFindingSchema = z.strictObject({
  rule: z.string().min(1),
  field: z.string().nullable(),
  message: z.string().min(1),
});
export type PolicyFinding = z.infer<typeof policyFindingSchema>;

export const policyResultSchema = z.strictObject({
  verdict: policyVerdictSchema,
  findings: z.array(policyFindingSchema),
});
export type PolicyResult = z.infer<typeof policyResultSchema>;

/** Cost range of the job; `matchedClasses` are the GPU class ids of the offers that fit. */
export const jobEstimateSchema = z.strictObject({
  lowMicroUsd: z.int().min(0),
  highMicroUsd: z.int().min(0),
  assumptions: z.array(z.string()),
  matchedClasses: z.array(z.string().min(1)),
});
export type JobEstimate = z.infer<typeof jobEstimateSchema>;

/**
 * Why no funding calls could be built (e.g. the chain RPC or the escrow is unavailable):
 * a snake_case `code` and a message. The job exists; `GET /v1/jobs/:id/funding` can be retried.
 */
export const fundingUnavailableSchema = z.strictObject({
  code: z.string().regex(/^[a-z][a-z0-9_]*$/),
  message: z.string().min(1),
});
export type FundingUnavailable = z.infer<typeof fundingUnavailableSchema>;

/**
 * A default the server applied for an omitted field: the field path and the JSON value used,
 * e.g. `{ field: 'maxRuntimeSeconds', value: 3600 }` or `{ field: 'networkPolicy', value: { mode: 'none' } }`.
 */
export const appliedDefaultSchema = z.strictObject({
  field: z.string().min(1),
  value: z.json(),
});
export type AppliedDefault = z.infer<typeof appliedDefaultSchema>;

/** Response of `POST /v1/jobs` (`object: 'job.created'`). Exactly one of `funding` and `fundingUnavailable` is null. */
export const jobCreatedSchema = z
  .strictObject({
    object: z.literal('job.created'),
    job: jobSchema,
    estimate: jobEstimateSchema,
    policy: policyResultSchema,
    funding: fundingSchema.nullable(),
    fundingUnavailable: fundingUnavailableSchema.nullable(),
    defaults: z.array(appliedDefaultSchema),
    idempotentReplay: z.boolean(),
  })
  .refine((r) => (r.funding === null) !== (r.fundingUnavailable === null), {
    error: 'exactly one of funding and fundingUnavailable must be null',
    path: ['fundingUnavailable'],
  });
export type JobCreated = z.infer<typeof jobCreatedSchema>;
