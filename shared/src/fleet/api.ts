import { z } from 'zod';
import { jobTimelineSchema } from '../dashboard/job-timeline.js';
import { jobSchema } from '../schemas/job.js';
import { logLineSchema } from '../schemas/logs.js';
import { earningVerdictSchema } from './earning.js';
import { GPU_HEALTH_VERDICTS } from './gpu-health.js';
import { MACHINE_STATES } from './machine-state.js';
import { GPU_PROBE_STATES } from './pre-offer.js';

/**
 * The fleet contract: the answers of `/admin/api/` and `/operator/api/` (issue 18), which the web
 * app parses at its edge and the control plane's route tests check its real answers against.
 * Money is micro-USD integers or token base units as decimal strings; times are ISO strings.
 */

export const ADMIN_API = '/admin/api';
export const OPERATOR_API = '/operator/api';

const micro = z.int().nonnegative();
const iso = z.string().min(1);
const details = z.record(z.string(), z.unknown());
const nextCursor = z.string().nullable();

export const healthVerdictSchema = z.enum(GPU_HEALTH_VERDICTS);

/** A machine's state as admins filter it (`MACHINE_STATE_RULES` in `machine-state.ts` derive it). */
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
export type FleetEventType = (typeof FLEET_EVENT_TYPES)[number];

const farmRef = z.object({ id: z.string(), slug: z.string() });

// ---- admin ----------------------------------------------------------------------------------

const percentiles = z.object({ p50: z.number().nullable(), p95: z.number().nullable() });

export const fleetOverviewSchema = z.object({
  machines: z.object({ online: z.int(), busy: z.int(), draining: z.int(), drained: z.int(), offline: z.int(), failed: z.int(), cordoned: z.int() }),
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
export type GpuHealthView = z.infer<typeof gpuHealthSchema>;

/** The window of a machine's start figures: its latest `START_FIGURES_RUNS` runs offered in the last `START_FIGURES_DAYS` days. */
export const START_FIGURES_DAYS = 30;
export const START_FIGURES_RUNS = 100;
const msPercentiles = z.object({ runs: z.int().nonnegative(), p50: z.number().nullable(), p95: z.number().nullable() });
/**
 * How fast a machine starts the jobs it is offered (issue 34), on the control plane's clock: from
 * the offer to the container running (`toRunningMs`) and to the job's first own line
 * (`toFirstLogMs`, runs that wrote one), p50 and p95 in milliseconds over its recent runs that
 * reached running; null without a run.
 */
export const machineStartTimesSchema = z.object({ sinceDays: z.int().positive(), maxRuns: z.int().positive(), toRunningMs: msPercentiles, toFirstLogMs: msPercentiles });
export type MachineStartTimes = z.infer<typeof machineStartTimesSchema>;

export const recentJobSchema = z.object({ jobId: z.string(), status: z.string(), startedAt: iso.nullable(), finishedAt: iso.nullable(), failureCode: z.string().nullable() });
export type RecentJob = z.infer<typeof recentJobSchema>;

export const VERIFICATION_STATES = ['unverified', 'verifying', 'verified', 'failed'] as const;
export type VerificationState = (typeof VERIFICATION_STATES)[number];

/** Whether a machine's GPUs passed a GPU challenge, and when (null `provenAt`: never on real GPUs). */
const gpuProofSchema = z.object({
  verification: z.enum(VERIFICATION_STATES),
  reason: z.string().nullable(),
  simulated: z.boolean(),
  provenAt: iso.nullable(),
});
export type GpuProof = z.infer<typeof gpuProofSchema>;

/** One GPU challenge as admins read it (docs/decisions.md "GPU proof"). */
export const gpuChallengeSchema = z.object({
  id: z.string(),
  cause: z.string(),
  state: z.string(),
  simulated: z.boolean(),
  classId: z.string().nullable(),
  shape: z.object({ m: z.int(), n: z.int(), k: z.int(), rounds: z.int() }),
  gpus: z.array(z.object({ index: z.int(), uuid: z.string() })),
  preSeed: z.string(),
  goSeed: z.string().nullable(),
  expectedSeconds: z.number().nullable(),
  deadlineSeconds: z.number().nullable(),
  elapsedSeconds: z.number().nullable(),
  gpuSeconds: z.record(z.string(), z.number()).nullable(),
  rowsChecked: z.array(z.object({ uuid: z.string(), round: z.int(), row: z.int() })),
  checkMs: z.number().nullable(),
  reason: z.string().nullable(),
  createdAt: iso,
  goAt: iso.nullable(),
  committedAt: iso.nullable(),
  finishedAt: iso.nullable(),
});
export type GpuChallenge = z.infer<typeof gpuChallengeSchema>;

export const adminMachineDetailSchema = z.object({
  machine: adminMachineRowSchema.extend({
    cudaVersion: z.string().nullable(),
    benchmarkTier: z.string().nullable(),
    pricePerGpuHourMicroUsd: micro.nullable(),
    healthReason: z.string().nullable(),
  }),
  gpus: z.array(gpuHealthSchema),
  recentJobs: z.array(recentJobSchema),
  gpuProof: gpuProofSchema.extend({ challengeId: z.string().nullable(), verifiedAt: iso.nullable(), nextChallengeAt: iso.nullable() }).nullable(),
  challenges: z.array(gpuChallengeSchema),
  startTimes: machineStartTimesSchema,
});
export type AdminMachineDetail = z.infer<typeof adminMachineDetailSchema>;

export const fleetEventSchema = z.object({
  id: z.string(),
  at: iso,
  type: z.enum(FLEET_EVENT_TYPES),
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
      /** The customer's words from the dashboard (null: disputed without them, e.g. from a wallet directly). */
      reason: z.string().nullable(),
      evidence: z.string().nullable(),
    }),
  ),
});
export type Dispute = z.infer<typeof disputeListSchema>['data'][number];
export const resolvedDisputeSchema = z.object({ jobId: z.string(), outcome: z.enum(['release', 'refund']), txHash: z.string() });

/** How many of a job's last log lines the admin's job page shows (the whole log is its log artifact). */
export const ADMIN_JOB_LOG_LINES = 200;

/**
 * `GET /admin/api/jobs/:id`: what an admin reads before deciding a dispute. The job as its
 * customer sees it (status, result hashes, verification level, cost, receipt, artifacts), its
 * timeline, the customer's words, where it ran, and the last lines of its log.
 */
export const adminJobSchema = z.object({
  job: jobSchema,
  timeline: jobTimelineSchema,
  customer: z.object({ accountId: z.string(), wallet: z.string() }),
  /** The machine of the job's assignment (the admin machine page), null before one. */
  machineId: z.string().nullable(),
  dispute: z.object({ reason: z.string().nullable(), evidence: z.string().nullable(), disputedAt: iso.nullable(), disputeEndsAt: iso.nullable() }).nullable(),
  log: z.object({ lines: z.array(logLineSchema), total: z.int().nonnegative() }),
});
export type AdminJob = z.infer<typeof adminJobSchema>;

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

// ---- operator -------------------------------------------------------------------------------

export const operatorMachineRowSchema = z.object({
  id: z.string(),
  farm: farmRef,
  regionKey: z.string(),
  state: machineStateSchema,
  earning: earningVerdictSchema,
  gpus: z.array(z.object({ index: z.int(), classId: z.string(), label: z.string().optional(), verdict: healthVerdictSchema, reasons: z.array(z.string()) })),
  /** GPUs the agent detected but does not offer, with why (an old generation, say). */
  notOfferedGpus: z.array(z.object({ index: z.int(), name: z.string(), reason: z.string() })).default([]),
  pricePerGpuHourMicroUsd: micro.nullable(),
  agentVersion: z.string().nullable(),
  driverVersion: z.string().nullable(),
  cudaVersion: z.string().nullable(),
  benchmarkTier: z.string().nullable(),
  gpuProof: gpuProofSchema,
  lastHeartbeatAt: iso.nullable(),
  drainRequested: z.boolean(),
  currentJobId: z.string().nullable(),
});
export type OperatorMachineRow = z.infer<typeof operatorMachineRowSchema>;
export const operatorMachineListSchema = z.object({ data: z.array(operatorMachineRowSchema), nextCursor: nextCursor.optional() });

export const operatorMachineDetailSchema = z.object({
  machine: operatorMachineRowSchema,
  /** The agent's last GPU probe; `state` null when the machine never reported an inventory. */
  probe: z.object({ state: z.enum(GPU_PROBE_STATES).nullable(), output: z.string().nullable() }),
  recentJobs: z.array(recentJobSchema),
  startTimes: machineStartTimesSchema,
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

/**
 * `GET /operator/api/requested-images`: the images customers' jobs asked for most over the last
 * `days` on the whole market (jobs that were funded), each named as matching compares images
 * (`imageCacheKey`: `repo:tag` or `repo@sha256:…`), with how many online machines hold it and how
 * many of the session's farms' machines do: what an operator adds to an agent's `prepull_images`
 * so that jobs start there without a pull.
 */
export const requestedImagesSchema = z.object({
  days: z.int().positive(),
  data: z.array(
    z.object({
      image: z.string(),
      jobs: z.int().positive(),
      lastRequestedAt: iso,
      machinesHolding: z.int().nonnegative(),
      yourMachinesHolding: z.int().nonnegative(),
    }),
  ),
});
export type RequestedImages = z.infer<typeof requestedImagesSchema>;

export const enrollmentTokenRecordSchema = z.object({
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
export type EnrollmentTokenRecord = z.infer<typeof enrollmentTokenRecordSchema>;
export const enrollmentTokenListSchema = z.object({ data: z.array(enrollmentTokenRecordSchema), nextCursor: nextCursor.optional() });

export const farmOperatorListSchema = z.object({ data: z.array(z.object({ wallet: z.string(), addedAt: iso.nullable() })) });
export const enrollmentTokenCreatedSchema = z.object({ token: z.string().startsWith('gfe_'), enrollmentToken: enrollmentTokenRecordSchema, command: z.string() });
export type EnrollmentTokenCreated = z.infer<typeof enrollmentTokenCreatedSchema>;

export const priceSetSchema = z.object({ farm: z.string(), classId: z.string(), machines: z.int(), pricePerGpuHourMicroUsd: micro.nullable() });

export const EARNING_STATES = ['pending', 'released', 'disputed', 'refunded', 'waiting_withdrawal'] as const;
export type EarningState = (typeof EARNING_STATES)[number];
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
export type EarningRow = Earnings['data'][number];

/**
 * `GET /operator/api/jobs/:id`: a customer job as its farm sees it: each run of it on the farm's
 * machines (attempts), the job's result and its completion on the escrow, and what the farm
 * earned from it (its row of the ledger; null until the result's run, on this farm, is settled).
 * Not the customer's log or output: those are the customer's.
 */
export const operatorJobSchema = z.object({
  jobId: z.string(),
  status: z.string(),
  verificationLevel: z.string().nullable(),
  resultHash: z.string().nullable(),
  completionTxHash: z.string().nullable(),
  billableGpuSeconds: z.int().nonnegative().nullable(),
  runs: z.array(
    z.object({
      attempt: z.int().positive(),
      machineId: z.string(),
      gpuModel: z.string(),
      gpuCount: z.int().nonnegative(),
      pricePerGpuHourMicroUsd: micro,
      startedAt: iso.nullable(),
      finishedAt: iso.nullable(),
      exitCode: z.int().nullable(),
      failureCode: z.string().nullable(),
      failureMessage: z.string().nullable(),
      /** Whether this run made the job's result (the one the escrow pays). */
      result: z.boolean(),
    }),
  ),
  earning: earningsSchema.shape.data.element.nullable(),
});
export type OperatorJob = z.infer<typeof operatorJobSchema>;
