import { earningVerdictSchema, type EarningVerdict } from '@gpufarm/shared';
import { z } from 'zod';

/**
 * The answers of `/admin/api/` and `/operator/api/` (the fleet contract of issue 18), checked at
 * the edge like every other answer the app reads. Money is micro-USD integers or token base units
 * as decimal strings; times are ISO strings.
 */

export const ADMIN_API = '/admin/api';
export const OPERATOR_API = '/operator/api';

const micro = z.int().nonnegative();
const iso = z.string().min(1);
const details = z.record(z.string(), z.unknown());
const nextCursor = z.string().nullable();

export const HEALTH_VERDICTS = ['healthy', 'warning', 'failed'] as const;
export const healthVerdictSchema = z.enum(HEALTH_VERDICTS);
export type HealthVerdict = z.infer<typeof healthVerdictSchema>;

export const MACHINE_STATES = ['online', 'busy', 'draining', 'offline', 'failed', 'cordoned'] as const;
export const machineStateSchema = z.enum(MACHINE_STATES);
export type MachineState = z.infer<typeof machineStateSchema>;

export const FLEET_EVENT_TYPES = [
  'machine.enrolled',
  'link.up',
  'link.down',
  'machine.unhealthy',
  'machine.healthy',
  'gpu.failed',
  'machine.drained',
  'machine.undrained',
  'machine.cordoned',
  'machine.uncordoned',
  'machine.partitioned',
  'machine.unenrolled',
  'farm.quarantined',
  'farm.unquarantined',
  'job.failed',
  'price.changed',
] as const;

const farmRef = z.object({ id: z.string(), slug: z.string() });

// ---- admin ----------------------------------------------------------------------------------

const percentiles = z.object({ p50: z.number().nullable(), p95: z.number().nullable() });

export const fleetOverviewSchema = z.object({
  machines: z.object({ online: z.int(), busy: z.int(), draining: z.int(), offline: z.int(), failed: z.int(), cordoned: z.int() }),
  gpus: z.array(z.object({ classId: z.string(), regionKey: z.string(), free: z.int(), busy: z.int() })),
  jobs: z.object({ queued: z.int(), running: z.int() }),
  queueWaitSeconds: percentiles,
  matchingMs: percentiles,
  outcomesByFarm: z.array(
    z.object({ farmId: z.string(), farmSlug: z.string(), completed: z.int(), failed: z.int(), timedOut: z.int(), canceled: z.int(), failureRateBps: z.int() }),
  ),
  series: z.object({
    resolutionSeconds: z.number().positive(),
    t: z.array(z.number()),
    machinesOnline: z.array(z.number()),
    gpusBusy: z.array(z.number()),
    jobsQueued: z.array(z.number()),
    jobsRunning: z.array(z.number()),
  }),
});
export type FleetOverview = z.infer<typeof fleetOverviewSchema>;

export const adminMachineRowSchema = z.object({
  id: z.string(),
  farm: farmRef,
  regionKey: z.string(),
  state: machineStateSchema,
  verdict: healthVerdictSchema,
  verdictReasons: z.array(z.string()),
  gpuCount: z.int(),
  classIds: z.array(z.string()),
  agentVersion: z.string().nullable(),
  driverVersion: z.string().nullable(),
  lastHeartbeatAt: iso.nullable(),
  heartbeatAgeSeconds: z.number().nullable(),
  utilizationPercent: z.number().nullable(),
  failures7d: z.int(),
  cordoned: z.boolean(),
  drainRequested: z.boolean(),
  drainDeadline: iso.nullable(),
});
export type AdminMachineRow = z.infer<typeof adminMachineRowSchema>;
export const adminMachineListSchema = z.object({ data: z.array(adminMachineRowSchema), nextCursor, total: z.int().nullable().optional() });

const gpuHealthSchema = z.object({ index: z.int(), uuid: z.string().nullable().optional(), classId: z.string(), verdict: healthVerdictSchema, reasons: z.array(z.string()) });
export type GpuHealth = z.infer<typeof gpuHealthSchema>;

export const recentJobSchema = z.object({ jobId: z.string(), status: z.string(), startedAt: iso.nullable(), finishedAt: iso.nullable(), failureCode: z.string().nullable() });
export type RecentJob = z.infer<typeof recentJobSchema>;

export const adminMachineDetailSchema = z.object({
  machine: adminMachineRowSchema.extend({
    cudaVersion: z.string().nullable(),
    benchmarkTier: z.string().nullable(),
    pricePerGpuHourMicroUsd: micro.nullable(),
    healthReason: z.string().nullable(),
  }),
  gpus: z.array(gpuHealthSchema),
  recentJobs: z.array(recentJobSchema),
});
export type AdminMachineDetail = z.infer<typeof adminMachineDetailSchema>;

export const fleetEventSchema = z.object({
  id: z.string(),
  at: iso,
  type: z.string(),
  machineId: z.string().nullable(),
  farmId: z.string().nullable(),
  jobId: z.string().nullable(),
  message: z.string(),
  details: details.nullable(),
});
export type FleetEvent = z.infer<typeof fleetEventSchema>;
export const fleetEventListSchema = z.object({ data: z.array(fleetEventSchema), nextCursor });

const samples = z.array(z.number().nullable());
export const machineHistorySchema = z.object({
  resolutionSeconds: z.number().positive(),
  gpus: z.array(z.object({ index: z.int(), t: z.array(z.number()), utilizationPercent: samples, temperatureC: samples, memoryUsedBytes: samples, powerWatts: samples })),
  healthEvents: z.array(fleetEventSchema),
});
export type MachineHistory = z.infer<typeof machineHistorySchema>;

export const auditListSchema = z.object({
  data: z.array(
    z.object({
      id: z.string(),
      at: iso,
      actor: z.object({ kind: z.string(), id: z.string() }),
      action: z.string(),
      targetType: z.string(),
      targetId: z.string(),
      details: details.nullable(),
    }),
  ),
  nextCursor,
});

export const adminFarmListSchema = z.object({
  data: z.array(z.object({ id: z.string(), slug: z.string(), name: z.string(), status: z.enum(['active', 'quarantined']), machines: z.int(), payoutAddress: z.string().nullable() })),
});
export type AdminFarm = z.infer<typeof adminFarmListSchema>['data'][number];

const tokenAmount = z.string().regex(/^\d+$/);
export const disputeListSchema = z.object({
  data: z.array(
    z.object({
      jobId: z.string(),
      jobKey: z.string(),
      customer: z.string(),
      provider: z.string(),
      token: z.string(),
      symbol: z.string(),
      decimals: z.int().nonnegative(),
      amount: tokenAmount,
      payout: tokenAmount,
      /** Null when the service has not recorded the fee apart (the chain holds it). */
      fee: tokenAmount.nullable(),
      disputedAt: iso.nullable(),
      /** Until when the dispute may be resolved; past it the escrow returns the whole deposit to the customer. Null: a dispute from before deadlines. */
      disputeEndsAt: iso.nullable(),
    }),
  ),
});
export type Dispute = z.infer<typeof disputeListSchema>['data'][number];
export const resolvedDisputeSchema = z.object({ jobId: z.string(), outcome: z.enum(['release', 'refund']), txHash: z.string() });

export const accountListSchema = z.object({
  data: z.array(
    z.object({
      id: z.string(),
      walletAddress: z.string().nullable(),
      status: z.string(),
      createdAt: iso,
      keys: z.array(z.object({ id: z.string(), prefix: z.string(), label: z.string().nullable(), revokedAt: iso.nullable() })),
    }),
  ),
});
export type AdminAccount = z.infer<typeof accountListSchema>['data'][number];

/** What a drain, undrain, cordon or uncordon answers; the pages refetch the machine after it. */
export const drainStateSchema = z.object({ machineId: z.string(), drainRequested: z.boolean(), drainDeadline: iso.nullable(), drainReason: z.string().nullable(), cordoned: z.boolean() });

/** An answer whose body the page does not read (it refetches what changed). */
export const anyAnswer = z.unknown();

// ---- operator -------------------------------------------------------------------------------

// The verdict's schema is the one the control plane and `gf-agent status` use.
export type { EarningVerdict };

export const operatorMachineRowSchema = z.object({
  id: z.string(),
  farm: farmRef,
  regionKey: z.string(),
  state: z.string(),
  earning: earningVerdictSchema,
  gpus: z.array(z.object({ index: z.int(), classId: z.string(), label: z.string().optional(), verdict: healthVerdictSchema, reasons: z.array(z.string()) })),
  /** GPUs the agent detected but does not offer, with why (an old generation, say). */
  notOfferedGpus: z.array(z.object({ index: z.int(), name: z.string(), reason: z.string() })).default([]),
  pricePerGpuHourMicroUsd: micro.nullable(),
  agentVersion: z.string().nullable(),
  driverVersion: z.string().nullable(),
  cudaVersion: z.string().nullable(),
  benchmarkTier: z.string().nullable(),
  lastHeartbeatAt: iso.nullable(),
  drainRequested: z.boolean(),
  currentJobId: z.string().nullable(),
});
export type OperatorMachineRow = z.infer<typeof operatorMachineRowSchema>;
export const operatorMachineListSchema = z.object({ data: z.array(operatorMachineRowSchema), nextCursor: nextCursor.optional() });

export const operatorMachineDetailSchema = z.object({
  machine: operatorMachineRowSchema,
  probe: z.object({ state: z.string(), output: z.string().nullable() }),
  recentJobs: z.array(recentJobSchema),
  history: machineHistorySchema.optional(),
});
export type OperatorMachineDetail = z.infer<typeof operatorMachineDetailSchema>;

export const marketSchema = z.object({
  data: z.array(
    z.object({
      classId: z.string(),
      label: z.string(),
      gpusOnline: z.int(),
      gpusBusy: z.int(),
      jobsQueued: z.int(),
      minPerGpuHourMicroUsd: micro.nullable(),
      medianPerGpuHourMicroUsd: micro.nullable(),
      maxPerGpuHourMicroUsd: micro.nullable(),
      yourPricePerGpuHourMicroUsd: micro.nullable(),
    }),
  ),
});
export type MarketRow = z.infer<typeof marketSchema>['data'][number];

export const enrollmentTokenSchema = z.object({
  id: z.string(),
  farmSlug: z.string(),
  regionKey: z.string(),
  pricePerGpuHourMicroUsd: micro.nullable(),
  label: z.string().nullable(),
  createdAt: iso,
  expiresAt: iso.nullable(),
  usedAt: iso.nullable(),
  machineId: z.string().nullable(),
  revokedAt: iso.nullable(),
});
export type EnrollmentToken = z.infer<typeof enrollmentTokenSchema>;
export const enrollmentTokenListSchema = z.object({ data: z.array(enrollmentTokenSchema), nextCursor: nextCursor.optional() });

export const farmOperatorListSchema = z.object({ data: z.array(z.object({ wallet: z.string(), addedAt: iso.nullable() })) });
export const enrollmentTokenCreatedSchema = z.object({ token: z.string().startsWith('gfe_'), enrollmentToken: enrollmentTokenSchema, command: z.string() });
export type EnrollmentTokenCreated = z.infer<typeof enrollmentTokenCreatedSchema>;

export const priceSetSchema = z.object({ farm: z.string(), classId: z.string(), machines: z.int(), pricePerGpuHourMicroUsd: micro.nullable() });

export const EARNING_STATES = ['pending', 'released', 'disputed', 'refunded', 'waiting_withdrawal'] as const;
export const earningsSchema = z.object({
  data: z.array(
    z.object({
      jobId: z.string().nullable(),
      machineId: z.string().nullable(),
      day: z.string().nullable(),
      token: z.string(),
      symbol: z.string(),
      decimals: z.int().nonnegative(),
      amount: tokenAmount,
      fee: tokenAmount.nullable().optional(),
      state: z.enum(EARNING_STATES).nullable().optional(),
      completedAt: iso.nullable().optional(),
      challengeEndsAt: iso.nullable().optional(),
      releasedAt: iso.nullable().optional(),
      releaseTxHash: z.string().nullable().optional(),
    }),
  ),
  nextCursor: nextCursor.optional(),
  totals: z.array(z.object({ token: z.string(), symbol: z.string(), decimals: z.int().nonnegative(), pending: tokenAmount, released: tokenAmount, waitingWithdrawal: tokenAmount })),
});
export type Earnings = z.infer<typeof earningsSchema>;
