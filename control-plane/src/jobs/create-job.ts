import { createHash } from 'node:crypto';
import {
  ethMaxPayment,
  fieldDetail,
  imageCacheKey,
  isDerivedClassId,
  JOB_SPEC_DEFAULTS,
  maxPriceMicroUsdOf,
  parseJobCreateRequest,
  requestedVramBytes,
  stableMaxPayment,
  type AppliedDefault,
  type JobCreated,
  type JobCreateRequest,
} from '@gpufarm/shared';
import { stringify } from 'safe-stable-stringify';
import { getAddress } from 'viem';
import { checkJobInputs } from '../artifacts/inputs.js';
import type { OfferIndex } from '../capacity/offer-index.js';
import type { Config } from '../config.js';
import type { Database } from '../db/database.js';
import { randomId } from '../ids.js';
import { evaluatePolicy } from '../policy/policy.js';
import { escrowJobKey } from './escrow-key.js';
import { fundingFor, termsHash, type EscrowDeps } from './funding.js';
import type { ImageHolderCount } from './image-holders.js';
import { JobConflictError, JobPolicyRejectedError, JobValidationError } from './job-errors.js';
import { priceJob } from './pricing.js';
import { toJob } from './serialize.js';
import { claimIdempotencyKey, findIdempotencyKey, insertJobs, type IdempotencyRecord, type JobRow, type NewJob } from './store.js';

export interface CreateJobDeps {
  db: Database;
  offerIndex: Pick<OfferIndex, 'summarizeFit' | 'gpuClass'>;
  config: Pick<Config, 'bannedImages' | 'stableToken' | 'platformFeeBps' | 'weiPerUsd' | 'publicUrl'>;
  /** The escrow deployment; null when funding is not configured (the answer says `escrow_not_deployed`). */
  escrow: EscrowDeps | null;
  /** Inserts a job without an Idempotency-Key (the route batches them, `db/batcher.ts`); one INSERT when absent. */
  insertJob?: (job: NewJob) => Promise<JobRow>;
  /** How many online machines hold the job's image, for the estimate's assumptions; absent: not said. */
  imageHolders?: ImageHolderCount;
}

export interface CreateJobParams {
  /** Who creates it: the account, the API key it acts through (null: a dashboard session), and the wallet that funds it. */
  principal: { accountId: string; apiKeyId: string | null; walletAddress: string };
  /** The request body as received; validated here. */
  body: unknown;
  /** A key the client chose so a retry creates the job once; the same key with another body is a conflict. */
  idempotencyKey?: string;
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

/** Thrown inside the creating transaction when the idempotency key was taken meanwhile. */
class KeyTaken extends Error {
  constructor(readonly record: IdempotencyRecord) {
    super('idempotency key taken');
  }
}

/** The spec as accepted: every default the server applied is written in, and listed. */
function applyDefaults(spec: JobCreateRequest, paymentToken: 'eth' | 'stable'): { spec: Record<string, unknown>; defaults: AppliedDefault[] } {
  const defaults: AppliedDefault[] = [];
  const out: Record<string, unknown> = { ...spec };
  const fill = (field: string, value: AppliedDefault['value']) => {
    if (out[field] === undefined) {
      out[field] = value;
      defaults.push({ field, value });
    }
  };
  fill('workloadType', JOB_SPEC_DEFAULTS.workloadType);
  fill('maxRuntimeSeconds', JOB_SPEC_DEFAULTS.maxRuntimeSeconds);
  fill('networkPolicy', JOB_SPEC_DEFAULTS.networkPolicy);
  fill('outputRules', JOB_SPEC_DEFAULTS.outputRules.map((r) => ({ ...r })));
  fill('paymentToken', paymentToken);
  return { spec: out, defaults };
}

/** The first answer again for the same key and body; a conflict for another body. */
function replayOrConflict(record: IdempotencyRecord, requestHash: string): JobCreated {
  if (record.request_hash !== requestHash) {
    throw new JobConflictError('This Idempotency-Key was used with a different request body; use a new key for a new job.', [
      { field: 'Idempotency-Key', message: 'Idempotency-Key was already used with a different body' },
    ]);
  }
  return { ...(JSON.parse(record.response) as JobCreated), idempotentReplay: true };
}

/**
 * Creates a job: validates the body, replays an earlier creation with
 * the same Idempotency-Key, applies the workload policy, checks inputs and the payment token
 * against this deployment, prices it against live capacity, fixes the payment and escrow terms,
 * and stores it CREATED (with the key claimed in the same transaction). Returns the answer;
 * `idempotentReplay` tells a replay from a new job.
 * Throws JobValidationError, JobPolicyRejectedError, or JobConflictError (the key was used with another body).
 *
 * @example
 *   const created = await createJob({ db, offerIndex, config, escrow }, { principal, body: { image, gpu: { count: 1 } } });
 */
export async function createJob(deps: CreateJobDeps, params: CreateJobParams): Promise<JobCreated> {
  const { db, config, escrow } = deps;
  const { principal, idempotencyKey } = params;
  const parsed = parseJobCreateRequest(params.body);
  if (!parsed.ok) throw new JobValidationError(parsed.details);
  const spec = parsed.value;
  // Hashed only once valid: a valid body is shallow, and an invalid one is never remembered.
  const requestHash = sha256(stringify(params.body) ?? '');
  if (idempotencyKey) {
    const used = await findIdempotencyKey(db, principal.accountId, idempotencyKey);
    if (used) return replayOrConflict(used, requestHash);
  }

  const policy = evaluatePolicy(spec, { bannedImages: config.bannedImages });
  if (policy.verdict !== 'allowed') {
    throw new JobPolicyRejectedError(
      `The workload policy refused the job: ${policy.findings.map((f) => f.message).join('; ')}`,
      policy.findings.map((f) => ({ field: f.field ?? 'body', message: `${f.rule}: ${f.message}` })),
    );
  }

  // Checks that need this deployment's state, each reported on its field.
  const paymentToken = spec.paymentToken ?? (config.stableToken ? 'stable' : 'eth');
  const details = spec.inputs?.length ? await checkJobInputs(db, principal.accountId, spec.inputs) : [];
  // A derived class exists once a machine reported one; the request schema checked only its shape.
  const unknownClasses = (spec.gpu.modelAllowlist ?? []).flatMap((classId, i) =>
    isDerivedClassId(classId) && deps.offerIndex.gpuClass(classId) === undefined
      ? [fieldDetail(`gpu.modelAllowlist[${i}]`, `names no GPU class: ${classId} is a derived class id no machine has reported (GET /v1/pricing lists the classes on offer)`)]
      : [],
  );
  // Nothing to price against a class that does not exist: the allowlist is the one thing to fix.
  if (unknownClasses.length > 0) throw new JobValidationError([...details, ...unknownClasses]);
  if (paymentToken === 'stable' && !config.stableToken) details.push(fieldDetail('paymentToken', 'this deployment has no stablecoin configured; use eth'));
  const maxRuntimeSeconds = spec.maxRuntimeSeconds ?? JOB_SPEC_DEFAULTS.maxRuntimeSeconds;
  const workloadType = spec.workloadType ?? JOB_SPEC_DEFAULTS.workloadType;
  const requestedCapMicroUsd = maxPriceMicroUsdOf(spec);
  const imageKey = imageCacheKey(spec.image, spec.imageDigest ?? null);
  // An estimate's remark: a failed count leaves it out rather than failing the creation.
  const imageHolders = deps.imageHolders && imageKey !== null ? await deps.imageHolders(imageKey).catch(() => null) : null;
  const priced = priceJob({
    gpuCount: spec.gpu.count,
    maxRuntimeSeconds,
    estRuntime: spec.estRuntime ?? null,
    requestedCapMicroUsd,
    fit: deps.offerIndex.summarizeFit({
      gpuCount: spec.gpu.count,
      minVramBytes: requestedVramBytes(spec.gpu),
      classIds: spec.gpu.modelAllowlist ?? null,
      workloadType,
      capMicroUsd: requestedCapMicroUsd,
      provenOnly: spec.gpu.proven === true,
    }),
    platformFeeBps: config.platformFeeBps,
    imageHolders,
  });
  if (!priced.ok) details.push(...priced.details);
  if (details.length > 0 || !priced.ok) throw new JobValidationError(details);
  const terms = priced.terms;

  const accepted = applyDefaults(spec, paymentToken);
  if (terms.capDefaulted) {
    accepted.spec.maxPricePerGpuHourMicroUsd = terms.maxPricePerGpuHourMicroUsd;
    accepted.defaults.push({ field: 'maxPricePerGpuHourMicroUsd', value: terms.maxPricePerGpuHourMicroUsd });
  }
  const jobId = randomId('job');
  const stable = config.stableToken;
  const payment =
    paymentToken === 'stable' && stable
      ? { kind: 'stable' as const, token: stable.address, symbol: stable.symbol, decimals: stable.decimals, maxPayment: (stableMaxPayment(terms.maxCostMicroUsd) * 10n ** BigInt(stable.decimals - 6)).toString(), weiPerUsd: null }
      : { kind: 'eth' as const, token: '0x0000000000000000000000000000000000000000', symbol: 'ETH', decimals: 18, maxPayment: ethMaxPayment(terms.maxCostMicroUsd, config.weiPerUsd).toString(), weiPerUsd: config.weiPerUsd.toString() };

  const newJob: NewJob = {
    id: jobId,
    account_id: principal.accountId,
    api_key_id: principal.apiKeyId,
    spec: accepted.spec,
    spec_hash: sha256(stringify(accepted.spec) ?? ''),
    title: spec.title ?? null,
    gpu_count: spec.gpu.count,
    workload_type: workloadType,
    max_runtime_seconds: maxRuntimeSeconds,
    max_price_per_gpu_hour_micro_usd: terms.maxPricePerGpuHourMicroUsd,
    min_billing_seconds: terms.minBillingSeconds,
    platform_fee_bps: terms.platformFeeBps,
    estimate_low_micro_usd: terms.estimate.lowMicroUsd,
    estimate_high_micro_usd: terms.estimate.highMicroUsd,
    max_cost_micro_usd: terms.maxCostMicroUsd,
    matched_classes: terms.estimate.matchedClasses,
    payment_kind: payment.kind,
    payment_token: payment.token,
    payment_symbol: payment.symbol,
    payment_decimals: payment.decimals,
    max_payment: payment.maxPayment,
    wei_per_usd: payment.weiPerUsd,
    escrow_job_key: escrowJobKey(principal.walletAddress, jobId),
    escrow_address: escrow ? escrow.chain.escrowAddress : null,
    job_hash: null,
  };
  if (escrow) newJob.job_hash = termsHash(escrow.chain, newJob);
  // Built before the insert: only a stablecoin job reads the chain (its allowance), with a short timeout.
  const funding = await fundingFor(escrow, newJob, getAddress(principal.walletAddress));
  const createdFor = (row: JobRow): JobCreated => ({
    object: 'job.created',
    job: toJob(row, config.publicUrl),
    estimate: terms.estimate,
    policy: { verdict: 'allowed', findings: [] },
    ...funding,
    defaults: accepted.defaults,
    idempotentReplay: false,
  });
  try {
    // Without a key, one autocommitted INSERT; with one, the key is claimed in the same transaction.
    if (!idempotencyKey) return createdFor(deps.insertJob ? await deps.insertJob(newJob) : (await insertJobs(db, [newJob]))[0]!);
    return await db.transaction(async (tx) => {
      const [row] = await insertJobs(tx, [newJob]);
      const created = createdFor(row!);
      const taken = await claimIdempotencyKey(tx, { accountId: principal.accountId, key: idempotencyKey, requestHash, jobId, response: JSON.stringify(created) });
      if (taken) throw new KeyTaken(taken);
      return created;
    });
  } catch (err) {
    // A concurrent request with the same key won: this one's job was rolled back.
    if (err instanceof KeyTaken) return replayOrConflict(err.record, requestHash);
    throw err;
  }
}
