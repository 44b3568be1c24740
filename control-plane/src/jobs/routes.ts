import { createHash } from 'node:crypto';
import {
  ApiError,
  ethMaxPayment,
  fundConfirmRequestSchema,
  JOB_SPEC_DEFAULTS,
  jobStatusSchema,
  maxPriceMicroUsdOf,
  parseJobCreateRequest,
  requestedVramBytes,
  stableMaxPayment,
  type AppliedDefault,
  type JobCreated,
  type JobCreateRequest,
  type JobStatus,
} from '@gpufarm/shared';
import type { FastifyPluginAsync } from 'fastify';
import { stringify } from 'safe-stable-stringify';
import { z } from 'zod';
import type { OfferIndex } from '../capacity/offer-index.js';
import type { Config } from '../config.js';
import type { Database } from '../db/database.js';
import { createBatcher } from '../db/batcher.js';
import { decodeCursor, encodeCursor } from '../http/cursor.js';
import { intParam, parseBody, parseParams, parseQuery } from '../http/parse.js';
import { randomId } from '../ids.js';
import { evaluatePolicy } from '../policy/policy.js';
import { getAddress, type Hash } from 'viem';
import { escrowJobKey } from './escrow-key.js';
import { confirmFunding, RETRY_AFTER_SECONDS } from './fund-confirm.js';
import type { JobEffects } from './effects.js';
import { ensureEscrowTerms, fundingFor, requireChain, termsHash, type EscrowDeps } from './funding.js';
import { authorizePendingRefund } from './settlement.js';
import { priceJob } from './pricing.js';
import { checkJobInputs } from '../artifacts/inputs.js';
import { loadJobExtras, toJob } from './serialize.js';
import { applyTransition, claimIdempotencyKey, findIdempotencyKey, findJob, insertJobs, listJobs, type IdempotencyRecord, type JobRow, type NewJob } from './store.js';
import { ForbiddenTransitionError, isTerminalStatus, transitionFor } from './transitions.js';

export interface JobRoutesOptions {
  db: Database;
  offerIndex: OfferIndex;
  config: Config;
  /** The escrow deployment; null when funding is not configured (`escrow_not_deployed`). */
  escrow: EscrowDeps | null;
  /** The log and execution reactions to job changes (`app.ts` wires them). */
  effects: JobEffects;
}

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
/** How long a cancel answer waits for the refund authorization's receipt. */
const REFUND_WAIT_MS = 2_000;
const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;
const JOB_ID = /^job_[0-9a-z]{26}$/;

const jobParams = z.object({ id: z.string().regex(JOB_ID, 'is not a job id (job_…)') });
const listQuery = z.strictObject({
  status: z
    .string()
    .transform((text, ctx) => {
      const statuses = text.split(',').map((s) => s.trim());
      for (const status of statuses) {
        if (!jobStatusSchema.safeParse(status).success) {
          ctx.addIssue({ code: 'custom', message: `${JSON.stringify(status)} is not a job status (${jobStatusSchema.options.join(', ')})` });
          return z.NEVER;
        }
      }
      return statuses as JobStatus[];
    })
    .optional(),
  limit: intParam(1, 100, 20),
  cursor: z.string().optional(),
});
const listCursor = z.strictObject({ seq: z.int().positive() });
const cancelBody = z.strictObject({ reason: z.string().max(500, 'must be at most 500 characters').nullable().optional() }).nullable().optional();

/** The wallet that must send the funding calls, checksummed as wallets show it. */
const signerOf = (wallet: string) => getAddress(wallet);

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

/**
 * Jobs: `POST /v1/jobs` (validate, policy, price against live capacity, fix the escrow terms;
 * idempotent with `Idempotency-Key`), `GET /v1/jobs`, `GET /v1/jobs/:id`, and cancel.
 */
export const jobRoutes: FastifyPluginAsync<JobRoutesOptions> = async (app, { db, offerIndex, config, escrow, effects }) => {
  // Creations without an Idempotency-Key that arrive together are inserted together.
  const insertJob = createBatcher((jobs: readonly NewJob[]) => insertJobs(db, jobs), { maxInFlight: 2, maxBatch: 64 });
  const replayOrConflict = (record: IdempotencyRecord, requestHash: string): JobCreated => {
    if (record.request_hash !== requestHash) {
      throw new ApiError('conflict', 'This Idempotency-Key was used with a different request body; use a new key for a new job.', {
        details: [{ field: 'Idempotency-Key', message: 'Idempotency-Key was already used with a different body' }],
      });
    }
    return { ...(JSON.parse(record.response) as JobCreated), idempotentReplay: true };
  };

  app.post('/v1/jobs', { config: { auth: 'jobs:create', rateBucket: 'jobs_create' } }, async (request, reply) => {
    const principal = request.principal!;
    const keyHeader = request.headers['idempotency-key'];
    if (keyHeader !== undefined && (typeof keyHeader !== 'string' || !IDEMPOTENCY_KEY.test(keyHeader))) {
      throw new ApiError('invalid_request', 'Idempotency-Key must be 1 to 255 visible ASCII characters.', {
        details: [{ field: 'Idempotency-Key', message: 'Idempotency-Key must be 1 to 255 visible ASCII characters' }],
      });
    }
    const idempotencyKey = keyHeader as string | undefined;

    const parsed = parseJobCreateRequest(request.body);
    if (!parsed.ok) throw new ApiError('validation_error', parsed.details.map((d) => d.message).join('; '), { details: parsed.details });
    const spec = parsed.value;
    // Hashed only once valid: a valid body is shallow, and an invalid one is never remembered.
    const requestHash = sha256(stringify(request.body) ?? '');
    if (idempotencyKey) {
      const used = await findIdempotencyKey(db, principal.accountId, idempotencyKey);
      if (used) return reply.code(200).send(replayOrConflict(used, requestHash));
    }

    const policy = evaluatePolicy(spec, { bannedImages: config.bannedImages });
    if (policy.verdict !== 'allowed') {
      throw new ApiError('policy_rejected', `The workload policy refused the job: ${policy.findings.map((f) => f.message).join('; ')}`, {
        details: policy.findings.map((f) => ({ field: f.field ?? 'body', message: `${f.rule}: ${f.message}` })),
      });
    }

    // Checks that need this deployment's state, each reported on its field.
    const paymentToken = spec.paymentToken ?? (config.stableToken ? 'stable' : 'eth');
    const details = spec.inputs?.length ? await checkJobInputs(db, principal.accountId, spec.inputs) : [];
    if (paymentToken === 'stable' && !config.stableToken) {
      details.push({ field: 'paymentToken', message: 'paymentToken: this deployment has no stablecoin configured; use eth' });
    }
    const maxRuntimeSeconds = spec.maxRuntimeSeconds ?? JOB_SPEC_DEFAULTS.maxRuntimeSeconds;
    const workloadType = spec.workloadType ?? JOB_SPEC_DEFAULTS.workloadType;
    const requestedCapMicroUsd = maxPriceMicroUsdOf(spec);
    const priced = priceJob({
      gpuCount: spec.gpu.count,
      maxRuntimeSeconds,
      estRuntime: spec.estRuntime ?? null,
      requestedCapMicroUsd,
      fit: offerIndex.summarizeFit({
        gpuCount: spec.gpu.count,
        minVramBytes: requestedVramBytes(spec.gpu),
        classIds: spec.gpu.modelAllowlist ?? null,
        workloadType,
        capMicroUsd: requestedCapMicroUsd,
      }),
      platformFeeBps: config.platformFeeBps,
    });
    if (!priced.ok) details.push(...priced.details);
    if (details.length > 0 || !priced.ok) throw new ApiError('validation_error', details.map((d) => d.message).join('; '), { details });
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
      api_key_id: principal.keyId,
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
    const funding = await fundingFor(escrow, newJob, signerOf(principal.walletAddress));
    const createdFor = (row: JobRow): JobCreated => ({
      object: 'job.created',
      job: toJob(row, config.publicUrl),
      estimate: terms.estimate,
      policy: { verdict: 'allowed', findings: [] },
      ...funding,
      defaults: accepted.defaults,
      idempotentReplay: false,
    });
    // Without a key, one autocommitted INSERT; with one, the key is claimed in the same transaction.
    const create = async (): Promise<JobCreated> => {
      if (!idempotencyKey) return createdFor(await insertJob(newJob));
      return db.transaction(async (tx) => {
        const [row] = await insertJobs(tx, [newJob]);
        const created = createdFor(row!);
        const taken = await claimIdempotencyKey(tx, { accountId: principal.accountId, key: idempotencyKey, requestHash, jobId, response: JSON.stringify(created) });
        if (taken) throw new KeyTaken(taken);
        return created;
      });
    };
    try {
      return reply.code(201).send(await create());
    } catch (err) {
      // A concurrent request with the same key won: this one's job was rolled back.
      if (err instanceof KeyTaken) return reply.code(200).send(replayOrConflict(err.record, requestHash));
      throw err;
    }
  });

  app.get('/v1/jobs', { config: { auth: 'jobs:read' } }, async (request) => {
    const query = parseQuery(listQuery, request.query, 'GET /v1/jobs');
    const beforeSeq = query.cursor ? decodeCursor(query.cursor, listCursor).seq : null;
    const rows = await listJobs(db, { accountId: request.principal!.accountId, statuses: query.status ?? null, limit: query.limit + 1, beforeSeq });
    const page = rows.slice(0, query.limit);
    const last = page.at(-1);
    return {
      object: 'list',
      data: await toJobs(page),
      nextCursor: rows.length > query.limit && last ? encodeCursor({ seq: last.seq }) : null,
    };
  });

  const loadJob = async (accountId: string, params: unknown): Promise<JobRow> => {
    const { id } = parseParams(jobParams, params);
    const row = await findJob(db, accountId, id);
    if (!row) throw new ApiError('not_found', `No job ${id} on this account.`);
    return row;
  };

  /** Job objects with their assignment and artifacts (two statements for any number of jobs). */
  const toJobs = async (rows: readonly JobRow[]) => {
    const extras = await loadJobExtras(db, rows);
    return rows.map((row) => toJob(row, config.publicUrl, extras.get(row.id)));
  };

  app.get('/v1/jobs/:id', { config: { auth: 'jobs:read' } }, async (request) => (await toJobs([await loadJob(request.principal!.accountId, request.params)]))[0]);

  /**
   * The `authorize_refund` effect, started at once when the chain answers. The answer waits for
   * it at most REFUND_WAIT_MS (a slow chain mines in seconds); it goes on in the background, and
   * when it fails the escrow worker retries it.
   */
  const tryAuthorizeRefund = async (row: JobRow): Promise<JobRow> => {
    if (!escrow || !escrow.health.current().ok) return row;
    const authorized = authorizePendingRefund({ db, escrow }, row).catch((err: unknown) => {
      app.log.warn({ err, jobId: row.id }, 'refund authorization failed; the escrow worker retries it');
      return row;
    });
    let timer: NodeJS.Timeout | undefined;
    const waited = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), REFUND_WAIT_MS)));
    const done = await Promise.race([authorized, waited]);
    clearTimeout(timer);
    return done ?? row;
  };

  app.get('/v1/jobs/:id/funding', { config: { auth: 'jobs:create' } }, async (request) => {
    const principal = request.principal!;
    let row = await loadJob(principal.accountId, request.params);
    if (row.status !== 'CREATED') {
      throw new ApiError('conflict', `The job is ${row.status}; only a CREATED job waits for funding.`, { details: [{ field: 'status', message: `status is ${row.status}` }] });
    }
    requireChain(escrow);
    row = await ensureEscrowTerms(db, escrow, row);
    const answer = await fundingFor(escrow, row, signerOf(principal.walletAddress));
    if (!answer.funding) throw new ApiError('unavailable', answer.fundingUnavailable.message, { details: [{ field: 'chain', message: `chain: ${answer.fundingUnavailable.code}` }] });
    return answer.funding;
  });

  app.post('/v1/jobs/:id/fund-confirm', { config: { auth: 'jobs:create', rateBucket: 'fund_confirm' } }, async (request, reply) => {
    const principal = request.principal!;
    const { txHash } = parseBody(fundConfirmRequestSchema, request.body);
    const row = await loadJob(principal.accountId, request.params);
    const outcome = await confirmFunding({ db, escrow, effects }, { job: row, wallet: principal.walletAddress, txHash: txHash as Hash });
    if (outcome.kind === 'pending') {
      reply.header('Retry-After', String(RETRY_AFTER_SECONDS));
      return reply.code(202).send({
        object: 'funding.confirmation',
        status: 'pending',
        message: outcome.message,
        confirmations: outcome.confirmations,
        requiredConfirmations: outcome.required,
        job: toJob(outcome.job, config.publicUrl),
      });
    }
    return {
      object: 'funding.confirmation',
      status: 'confirmed',
      message: `The escrow holds ${outcome.job.max_payment} base units of ${outcome.job.payment_symbol} for this job (transaction ${outcome.job.fund_tx_hash}); it is queued.`,
      job: toJob(outcome.job, config.publicUrl),
    };
  });

  app.post('/v1/jobs/:id/cancel', { config: { auth: 'jobs:create' } }, async (request) => {
    const body = parseBody(cancelBody, request.body);
    const reason = body?.reason ?? null;
    let row = await loadJob(request.principal!.accountId, request.params);
    // A lost race re-reads the job and decides again, so the answer is about its newest state.
    for (let attempt = 0; attempt < 3; attempt++) {
      if (row.status === 'CANCELED') return (await toJobs([row]))[0];
      let to: JobStatus;
      try {
        to = transitionFor(row.status, 'cancel').to;
      } catch (err) {
        if (!(err instanceof ForbiddenTransitionError)) throw err;
        throw new ApiError(
          'conflict',
          row.status === 'RUNNING'
            ? 'The job is running and cannot be canceled; it stops at maxRuntimeSeconds.'
            : `The job is ${row.status}${isTerminalStatus(row.status) ? ', which is final' : ''}; it cannot be canceled.`,
          { details: [{ field: 'status', message: `status is ${row.status}` }] },
        );
      }
      const transition = transitionFor(row.status, 'cancel');
      const refund = transition.effects.includes('authorize_refund');
      const moved = await applyTransition(db, { jobId: row.id, from: row.status, to, cancelReason: reason });
      if (moved) {
        // A MATCHING job has an assignment on a machine: drop it and tell the agent.
        if (row.status === 'MATCHING') await effects.canceledWhileMatching(row.id);
        return (await toJobs([refund ? await tryAuthorizeRefund(moved) : moved]))[0];
      }
      row = await loadJob(request.principal!.accountId, request.params);
    }
    throw new ApiError('conflict', 'The job changed while canceling it; retry.');
  });
};
