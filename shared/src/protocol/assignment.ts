import { z } from 'zod';
import { httpUrlSchema, sha256HexSchema } from '../schemas/common.js';

/**
 * What the control plane hands an agent to run: one job on one machine. It is the job's
 * creation spec resolved to concrete values: defaults applied, GPUs chosen by index, inputs
 * turned into downloadable artifacts with their hashes. The agent's runtime needs nothing else,
 * so it can be tested without a control plane.
 */

const idSchema = z.string().min(1).max(64).regex(/^[A-Za-z0-9_-]+$/, { error: 'must be an id of letters, digits, _ and -' });

export const assignmentNetworkPolicySchema = z.discriminatedUnion('mode', [
  z.strictObject({ mode: z.literal('none') }),
  z.strictObject({ mode: z.literal('allowlist'), allow: z.array(z.string().min(1).max(253)).min(1).max(32) }),
]);

export const assignmentInputSchema = z.strictObject({
  mountName: z.string().regex(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/),
  artifactId: idSchema,
  /** Where the agent downloads the bytes (a signed URL of the control plane). */
  url: httpUrlSchema,
  sha256: sha256HexSchema,
  sizeBytes: z.int().min(0),
});

export const assignmentOutputRuleSchema = z.strictObject({
  /** Absolute path under /output. */
  path: z.string().regex(/^\/output(?:\/[^/\0]+)*$/),
  maxBytes: z.int().min(1),
});

export const assignmentSpecSchema = z.strictObject({
  assignmentId: idSchema,
  jobId: idSchema,
  /** The reference to pull; pinned when `imageDigest` is set (`sha256:<64 hex>`). */
  image: z.string().min(1).max(512),
  imageDigest: z.string().regex(/^sha256:[a-f0-9]{64}$/).nullable(),
  /** argv; empty keeps the image's own entrypoint and command. */
  command: z.array(z.string()).max(128),
  env: z.record(z.string(), z.string()),
  /** GPUs reserved for this job on this machine, by index and UUID (same order). */
  gpus: z.array(z.strictObject({ index: z.int().min(0), uuid: z.string().min(1) })).max(16),
  cpuCores: z.int().min(1).nullable(),
  ramBytes: z.int().min(1).nullable(),
  maxRuntimeSeconds: z.int().min(1),
  networkPolicy: assignmentNetworkPolicySchema,
  inputs: z.array(assignmentInputSchema).max(32),
  outputRules: z.array(assignmentOutputRuleSchema).min(1).max(8),
  /**
   * The job declared `deterministic: true`: its outputs depend only on its spec, inputs and job
   * id. The container gets `GF_DETERMINISTIC=1`. Protocol 3; absent (protocols 1 and 2): false.
   */
  deterministic: z.boolean().optional(),
});

export type AssignmentNetworkPolicy = z.infer<typeof assignmentNetworkPolicySchema>;
export type AssignmentInput = z.infer<typeof assignmentInputSchema>;
export type AssignmentOutputRule = z.infer<typeof assignmentOutputRuleSchema>;
export type AssignmentSpec = z.infer<typeof assignmentSpecSchema>;
