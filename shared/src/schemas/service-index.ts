import { z } from 'zod';
import { ENVIRONMENTS } from '../constants.js';
import { addressSchema, httpUrlSchema } from './common.js';

/** The canary as a customer runs it: `<iterations>` in `command` is replaced by a count. */
export const serviceCanarySchema = z.strictObject({
  image: z.string().min(1),
  repository: z.string().min(1),
  digest: z.string().regex(/^sha256:[0-9a-f]{64}$/),
  command: z.array(z.string()),
});

/**
 * `GET /v1`: what this deployment is and where each resource lives. `canary` is null without a
 * canary image; `escrow` is null when the deployment has no escrow (funding is unavailable);
 * `simulatedMachines` says whether simulated machines are offered here.
 */
export const serviceIndexSchema = z.strictObject({
  object: z.literal('index'),
  service: z.literal('gpufarm'),
  serviceVersion: z.string().min(1),
  chainId: z.int().positive(),
  environment: z.enum(ENVIRONMENTS),
  apiKeyPrefix: z.enum(['gf_live_', 'gf_test_']),
  canary: serviceCanarySchema.nullable(),
  /**
   * Whether capacity may list, and jobs run on, machines in simulated mode (no GPU proven; each
   * such offer says `simulated: true`). Never on a deployment with live keys.
   */
  simulatedMachines: z.strictObject({ allowed: z.boolean() }),
  /** The escrow contract customers fund, approve, dispute and claim refunds on. */
  escrow: z.strictObject({ address: addressSchema }).nullable(),
  links: z.strictObject({
    self: httpUrlSchema,
    capacity: httpUrlSchema,
    pricing: httpUrlSchema,
    jobs: httpUrlSchema,
    job: z.string().min(1),
    jobLogs: z.string().min(1),
    jobFunding: z.string().min(1),
    jobFundConfirm: z.string().min(1),
    jobCancel: z.string().min(1),
    artifact: z.string().min(1),
    billing: httpUrlSchema,
    openapi: httpUrlSchema,
    docs: httpUrlSchema,
  }),
});
export type ServiceIndex = z.infer<typeof serviceIndexSchema>;
