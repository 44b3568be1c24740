import { z } from 'zod';
import { findRegion } from '../catalog/regions.js';
import { tokenAmountSchema } from '../money.js';
import { artifactSummarySchema } from './artifact.js';
import {
  addressSchema,
  bytes32Schema,
  httpUrlSchema,
  isoTimeSchema,
  listEnvelopeSchema,
  nonNegativeIntSchema,
  sha256HexSchema,
  txHashSchema,
} from './common.js';

/**
 * Job states, the complete list. The transition table lives in
 * the control plane; this is the vocabulary both sides share.
 */
export const JOB_STATUSES = [
  'CREATED',
  'FUNDED',
  'QUEUED',
  'MATCHING',
  'RUNNING',
  'COMPLETED',
  'FAILED',
  'TIMED_OUT',
  'CANCELED',
  'EXPIRED',
] as const;
export const jobStatusSchema = z.enum(JOB_STATUSES);
export type JobStatus = z.infer<typeof jobStatusSchema>;

/** States a job never leaves. */
export const TERMINAL_JOB_STATUSES = ['COMPLETED', 'FAILED', 'TIMED_OUT', 'CANCELED', 'EXPIRED'] as const satisfies readonly JobStatus[];
const terminal: ReadonlySet<string> = new Set(TERMINAL_JOB_STATUSES);

/** True for COMPLETED, FAILED, TIMED_OUT, CANCELED and EXPIRED. */
export function isTerminalStatus(status: JobStatus): boolean {
  return terminal.has(status);
}

/** Result verification levels, strongest first. */
export const VERIFICATION_LEVELS = ['RESULT_VERIFIED', 'EXECUTION_VERIFIED', 'HOST_REPORTED'] as const;
export const verificationLevelSchema = z.enum(VERIFICATION_LEVELS);
export type VerificationLevel = z.infer<typeof verificationLevelSchema>;

/**
 * What each level attests and what it does not, in the words customers read: the job page,
 * the OpenAPI description of `verificationLevel` and docs/verification.md (a test checks that
 * the document carries these sentences) all say exactly this. `control-plane/src/execution/
 * verification.ts` sets a level only when its evidence holds.
 */
export const VERIFICATION_LEVEL_TEXT: Readonly<Record<VerificationLevel, { label: string; attests: string; doesNotAttest: string }>> = {
  RESULT_VERIFIED: {
    label: 'Result verified',
    attests:
      'The server computed the expected result itself, and the output it stores (the artifact you download) holds exactly that result and nothing else. ' +
      "Today only the service's canary job (sha256-chain, created with deterministic: true) has such a verifier.",
    doesNotAttest: 'It does not say which machine or hardware produced the result, nor that GPUs were used: a correct answer is all it proves.',
  },
  EXECUTION_VERIFIED: {
    label: 'Execution verified',
    attests:
      'Every output the server stores has the hash the machine reported, and the machine signed, with the key it enrolled with, a record of this run ' +
      '(job, image digest, command, start, finish, exit code, output and log hashes) that agrees with everything it reported and names the image digest the job pinned. ' +
      'The machine is not simulated, and its GPUs had passed the service\'s verification before the job was assigned and still stood when the job was settled.',
    doesNotAttest:
      'A valid signature proves that the record came from the enrolled machine, not that the work was done honestly: whoever controls the machine holds its key and can sign any record. ' +
      'The output is not recomputed.',
  },
  HOST_REPORTED: {
    label: 'Host reported',
    attests:
      'The server stores the bytes the machine uploaded, with their SHA-256 (result.serverHash); result.hashesMatch says whether they are the bytes the machine hashed. ' +
      "The job's \"verified:\" log line names the evidence for a higher level that was missing.",
    doesNotAttest: 'Nothing independent checked the run or its result: they are as the machine reports them.',
  },
};

/** One paragraph per level, as the API reference describes `verificationLevel`. */
export function verificationLevelDescription(): string {
  return VERIFICATION_LEVELS.map((level) => `${level}: ${VERIFICATION_LEVEL_TEXT[level].attests} ${VERIFICATION_LEVEL_TEXT[level].doesNotAttest}`).join('\n\n');
}

/**
 * Escrow receipt states. The spec shows `completed`; ours follow the contract: `completed`
 * (completion recorded, challenge window open), `disputed`, `released` (paid out),
 * `refund_authorized` (after a cancel or failure) and `refunded` (claimed by the customer).
 */
export const RECEIPT_STATUSES = ['completed', 'disputed', 'released', 'refund_authorized', 'refunded'] as const;
export const receiptStatusSchema = z.enum(RECEIPT_STATUSES);
export type ReceiptStatus = z.infer<typeof receiptStatusSchema>;

const regionKeySchema = z.string().refine((key) => findRegion(key) !== undefined, { error: 'must be a known region key' });

export const jobPricingSchema = z.strictObject({
  maxPricePerGpuHourMicroUsd: nonNegativeIntSchema,
  minBillingSeconds: nonNegativeIntSchema,
  platformFeeBps: z.int().min(0).max(10_000),
  estimateLowMicroUsd: nonNegativeIntSchema,
  estimateHighMicroUsd: nonNegativeIntSchema,
  maxCostMicroUsd: nonNegativeIntSchema,
});
export type JobPricing = z.infer<typeof jobPricingSchema>;

/**
 * Escrow terms. `token` is the zero address for ETH; `maxPayment` is in the token's base units;
 * `escrowJobKey` is `keccak256(abi.encode(wallet, jobId))` for the key owner's primary wallet.
 */
export const jobPaymentSchema = z.strictObject({
  token: addressSchema,
  symbol: z.string().min(1),
  decimals: z.int().min(0).max(77),
  maxPayment: tokenAmountSchema,
  escrowJobKey: bytes32Schema,
});
export type JobPayment = z.infer<typeof jobPaymentSchema>;

export const jobLinksSchema = z.strictObject({
  dashboard: httpUrlSchema,
  logs: httpUrlSchema,
  funding: httpUrlSchema,
});
export type JobLinks = z.infer<typeof jobLinksSchema>;

/** Where the job runs; `startedAt`, `finishedAt` and `exitCode` are null until they happen. */
export const jobAssignmentSchema = z.strictObject({
  gpu: z.strictObject({
    model: z.string().min(1),
    modelClass: z.string().min(1),
    count: z.int().min(1),
  }),
  farm: z.strictObject({ slug: z.string().min(1), name: z.string().min(1) }),
  region: regionKeySchema,
  pricePerGpuHourMicroUsd: nonNegativeIntSchema,
  startedAt: isoTimeSchema.nullable(),
  finishedAt: isoTimeSchema.nullable(),
  exitCode: z.int().nullable(),
});
export type JobAssignment = z.infer<typeof jobAssignmentSchema>;

export const jobCostSchema = z.strictObject({
  billableGpuSeconds: nonNegativeIntSchema,
  computeMicroUsd: nonNegativeIntSchema,
  feeMicroUsd: nonNegativeIntSchema,
  totalMicroUsd: nonNegativeIntSchema,
  finalPayment: tokenAmountSchema,
});
export type JobCost = z.infer<typeof jobCostSchema>;

/**
 * The output's hashes. `hostHash` is what the machine reported (null when it reported none),
 * `serverHash` the server's re-hash of the stored bytes (null when no output was stored).
 */
export const jobResultSchema = z.strictObject({
  hostHash: sha256HexSchema.nullable(),
  serverHash: sha256HexSchema.nullable(),
  hashesMatch: z.boolean(),
  outputArtifactId: z.string().min(1).nullable(),
  logArtifactId: z.string().min(1).nullable(),
});
export type JobResult = z.infer<typeof jobResultSchema>;

/**
 * The customer's share of the release that the escrow could not send to their wallet (a wallet
 * that refuses ETH, a token that blocks it): it waits in the escrow until that wallet calls
 * `withdraw(token)`. `status` is `waiting_withdrawal` until the service sees the withdrawal.
 */
export const jobWithdrawalSchema = z.strictObject({
  status: z.enum(['waiting_withdrawal', 'withdrawn']),
  wallet: addressSchema,
  amount: tokenAmountSchema,
  withdrawTxHash: txHashSchema.nullable(),
  withdrawnAt: isoTimeSchema.nullable(),
});
export type JobWithdrawal = z.infer<typeof jobWithdrawalSchema>;

/** How a dispute ended: an admin resolved it, or its deadline passed and the whole deposit went back to the customer. */
export const DISPUTE_OUTCOMES = ['resolved', 'timed_out'] as const;

/**
 * The escrow's record of the job. `resultHash` (bytes32, on chain) and `challengeEndsAt` are
 * null for a refund receipt; a transaction hash is null until the transaction exists. Beyond the
 * spec's fields: `disputeEndsAt` (after a dispute: until when an admin may resolve it; past it the
 * customer's whole deposit comes back), `disputeOutcome` and `withdrawal` (null when the release
 * paid the customer's share, or there was none).
 */
export const jobReceiptSchema = z.strictObject({
  jobKey: bytes32Schema,
  status: receiptStatusSchema,
  amount: tokenAmountSchema,
  computeSeconds: nonNegativeIntSchema,
  resultHash: bytes32Schema.nullable(),
  challengeEndsAt: isoTimeSchema.nullable(),
  transactions: z.strictObject({
    fund: txHashSchema.nullable(),
    completion: txHashSchema.nullable(),
    release: txHashSchema.nullable(),
    refund: txHashSchema.nullable(),
  }),
  disputeEndsAt: isoTimeSchema.nullable(),
  disputeOutcome: z.enum(DISPUTE_OUTCOMES).nullable(),
  withdrawal: jobWithdrawalSchema.nullable(),
});
export type JobReceipt = z.infer<typeof jobReceiptSchema>;

/**
 * The phases of a job's start and run, in order (issue 34): `queued` (entered QUEUED → offered
 * to a machine), `dispatch` (offered → the machine began pulling, or, with the image already
 * there, began making the container), `pull` (the image pull; `skipped` when the machine held
 * the image), `container` (image ready → container running: inputs still downloading, /output,
 * network, create and start), `run` (running → the container ended), `upload` (ended → outputs
 * and log uploaded). `queued` through `container` add up to the time from queued to
 * `assignment.startedAt`. `firstLog` (running → the job's first own line, stdout or stderr) lies
 * within `run`.
 */
export const START_PHASES = ['queued', 'dispatch', 'pull', 'container', 'firstLog', 'run', 'upload'] as const;
export type StartPhaseName = (typeof START_PHASES)[number];

/**
 * `pending`: not begun yet; `in_progress`: begun, not ended; `done`; `skipped`: not needed
 * (no pull for an image the machine held, no first line from a job that wrote none);
 * `not_reached`: the run ended before this phase ended.
 */
export const START_PHASE_STATUSES = ['pending', 'in_progress', 'done', 'skipped', 'not_reached'] as const;
export const startPhaseStatusSchema = z.enum(START_PHASE_STATUSES).meta({
  description: 'pending: not begun; in_progress; done; skipped: not needed (no pull for an image the machine held, no first line from a job that wrote none); not_reached: the run ended before this phase ended.',
});
export type StartPhaseStatus = z.infer<typeof startPhaseStatusSchema>;

export const startPhaseSchema = z.strictObject({
  status: startPhaseStatusSchema,
  startedAt: isoTimeSchema.nullable(),
  endedAt: isoTimeSchema.nullable(),
  /** `endedAt − startedAt`; null until the phase is done. */
  durationMs: nonNegativeIntSchema.nullable(),
});
export type StartPhase = z.infer<typeof startPhaseSchema>;

/**
 * Beyond the spec's Job: how the job's start went, phase by phase, every time as the service
 * received the machine's reports (its own clock, never the machine's). It describes the job's
 * last run (a requeued job: its latest assignment), or, while the job waits in QUEUED, the
 * wait; null before the job was first queued, for a job that ended before any machine was
 * offered it, and for runs from before the service measured them.
 */
export const jobStartupSchema = z.strictObject({
  /** The run described (the log lines' `assignmentId`); null while the job waits to be matched. */
  assignmentId: z.string().min(1).nullable(),
  /** Which run of the job (1 for the first); null while the job waits to be matched. */
  attempt: z.int().min(1).nullable(),
  phases: z.strictObject({
    queued: startPhaseSchema,
    dispatch: startPhaseSchema,
    pull: startPhaseSchema,
    container: startPhaseSchema,
    firstLog: startPhaseSchema,
    run: startPhaseSchema,
    upload: startPhaseSchema,
  } satisfies Record<StartPhaseName, typeof startPhaseSchema>).meta({
    description:
      'queued: entered QUEUED → offered to a machine; dispatch: offer → the machine began pulling, or making the container when it held the image; pull: the image pull; ' +
      'container: image ready → running (inputs, /output, network, create, start); firstLog: running → the job\'s first own line; run: running → the end reported; upload: end → outputs and log uploaded. ' +
      'queued through container add up to the time from queued to assignment.startedAt; firstLog lies within run.',
  }),
});
export type JobStartup = z.infer<typeof jobStartupSchema>;

/**
 * The job resource (`object: 'job'`). `assignment`, `cost`, `result` and `receipt` are null
 * until they exist; `verificationLevel` is null before a result exists. `startup` is beyond
 * the spec (`jobStartupSchema`) and present only when asked for (`include=startup`).
 */
export const jobSchema = z.strictObject({
  object: z.literal('job'),
  id: z.string().min(1),
  status: jobStatusSchema,
  verificationLevel: verificationLevelSchema.nullable().meta({ description: `Null before a result exists; never assumed.\n\n${verificationLevelDescription()}` }),
  pricing: jobPricingSchema,
  payment: jobPaymentSchema,
  links: jobLinksSchema,
  assignment: jobAssignmentSchema.nullable(),
  cost: jobCostSchema.nullable(),
  result: jobResultSchema.nullable(),
  receipt: jobReceiptSchema.nullable(),
  artifacts: z.array(artifactSummarySchema),
  // Only when asked for (`GET /v1/jobs/:id?include=startup`): a client whose job schema is strict
  // (every released gf) is never sent a field it does not know.
  startup: jobStartupSchema.nullable().optional().meta({
    description:
      'Beyond the spec, and present only on `GET /v1/jobs/{id}?include=startup`: the phases of the job\'s start and run (queued, dispatch, pull, container, firstLog, run, upload), each with its status, start, end and duration in milliseconds, ' +
      "as the service received the machine's reports (the service's clock). The latest run's; while the job waits in QUEUED, the wait. Null before the job was first queued and for a job that ended before any machine was offered it.",
  }),
});
export type Job = z.infer<typeof jobSchema>;

/** `GET /v1/jobs`: a list of job objects. */
export const jobListSchema = listEnvelopeSchema(jobSchema);
export type JobList = z.infer<typeof jobListSchema>;
