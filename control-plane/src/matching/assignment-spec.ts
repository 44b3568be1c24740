import {
  assignmentSpecSchema,
  effectiveImageDigest,
  findGpuClass,
  formatUsdCents,
  JOB_SPEC_DEFAULTS,
  requestedVramBytes,
  type AssignmentInput,
  type AssignmentSpec,
  type JobCreateRequest,
} from '@gpufarm/shared';

/**
 * The job's stored spec as the matcher reads it: the creation request with the server's
 * defaults written in (jobs/routes.ts `applyDefaults`).
 */
export type StoredJobSpec = JobCreateRequest & { maxPricePerGpuHourMicroUsd?: number };

/** A job input with its download URL and hash, as the agent receives it. */
export type ResolvedInput = AssignmentInput;

/**
 * The assignment an agent receives for `spec` on the reserved GPUs (index and UUID, same
 * order), validated with `assignmentSpecSchema`; throws a ZodError when the spec cannot be
 * expressed (it was accepted at creation, so that is a bug, not a user error).
 */
export function buildAssignmentSpec(params: {
  assignmentId: string;
  jobId: string;
  spec: StoredJobSpec;
  /** Used when the stored spec has none (it always has: defaults are written in). */
  maxRuntimeSeconds: number;
  gpus: ReadonlyArray<{ index: number; uuid: string }>;
  inputs: readonly ResolvedInput[];
}): AssignmentSpec {
  const { spec } = params;
  const draft: AssignmentSpec = {
    assignmentId: params.assignmentId,
    jobId: params.jobId,
    image: spec.image,
    imageDigest: effectiveImageDigest(spec),
    command: spec.command ?? [],
    env: spec.env ?? {},
    gpus: params.gpus.map((g) => ({ index: g.index, uuid: g.uuid })),
    cpuCores: spec.cpuCores ?? null,
    ramBytes: spec.ramBytes ?? null,
    maxRuntimeSeconds: spec.maxRuntimeSeconds ?? params.maxRuntimeSeconds,
    networkPolicy: spec.networkPolicy ?? JOB_SPEC_DEFAULTS.networkPolicy,
    inputs: [...params.inputs],
    outputRules: spec.outputRules ?? JOB_SPEC_DEFAULTS.outputRules.map((r) => ({ ...r })),
    // Absent means false, so an assignment of an ordinary job reads as it does on protocol 1 and 2.
    ...(spec.deterministic === true ? { deterministic: true } : {}),
  };
  return assignmentSpecSchema.parse(draft);
}

/** The minimum VRAM per GPU a stored spec asks for, in bytes, or null. */
export function minVramOf(spec: StoredJobSpec): number | null {
  return requestedVramBytes(spec.gpu);
}

/**
 * The job's `system` log line for a match. Names the farm and the coarse region only, never a
 * machine's id or host name.
 *
 * @example matchedLine({ gpuCount: 2, classId: 'a100-80gb', farmName: 'Acme', regionKey: 'us-east', priceMicroUsd: 1_500_000, attempt: 1 })
 * // 'matched: 2x A100 80GB on farm Acme (us-east) at $1.50/GPU-hour, attempt 1'
 */
export function matchedLine(params: { gpuCount: number; classId: string; farmName: string; regionKey: string; priceMicroUsd: number; attempt: number }): string {
  const label = findGpuClass(params.classId)?.label ?? params.classId;
  return `matched: ${params.gpuCount}x ${label} on farm ${params.farmName} (${params.regionKey}) at $${formatUsdCents(params.priceMicroUsd)}/GPU-hour, attempt ${params.attempt}`;
}
