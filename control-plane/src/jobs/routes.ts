import { ApiError, fieldDetail, fundConfirmRequestSchema, jobStatusSchema, type JobStatus } from '@gpufarm/shared';
import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import type { OfferIndex } from '../capacity/offer-index.js';
import type { Config } from '../config.js';
import type { Database } from '../db/database.js';
import { createBatcher } from '../db/batcher.js';
import { decodeCursor, encodeCursor } from '../http/cursor.js';
import { intParam, parseBody, parseParams, parseQuery } from '../http/parse.js';
import { getAddress, type Hash } from 'viem';
import { cancelJob } from './cancel-job.js';
import { createJob } from './create-job.js';
import { cachedImageHolderCount } from './image-holders.js';
import type { JobEffects } from './effects.js';
import { confirmFunding, RETRY_AFTER_SECONDS } from './fund-confirm.js';
import { ensureEscrowTerms, fundingFor, requireChain, type EscrowDeps } from './funding.js';
import { jobParams, requireAccountJob } from './account-job.js';
import { loadJobExtras, toJob } from './serialize.js';
import { insertJobs, listJobs, type JobRow, type NewJob } from './store.js';

export interface JobRoutesOptions {
  db: Database;
  offerIndex: OfferIndex;
  config: Config;
  /** The escrow deployment; null when funding is not configured (`escrow_not_deployed`). */
  escrow: EscrowDeps | null;
  /** The log and execution reactions to job changes (`app.ts` wires them). */
  effects: JobEffects;
}

export const IDEMPOTENCY_KEY = /^[\x21-\x7e]{1,255}$/;
/** `GET /v1/jobs/:id`: `include=startup` adds the job's start phases (beyond the spec; a strict older client never asks). */
export const jobQuery = z.strictObject({
  include: z.enum(['startup'], { error: 'must be startup (the only part a job object adds on request)' }).optional().meta({ description: 'Parts beyond the spec to add to the job object: `startup`, its start phases' }),
});
export const listQuery = z.strictObject({
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
    .meta({ pattern: `^\\s*(?:${jobStatusSchema.options.join('|')})\\s*(?:,\\s*(?:${jobStatusSchema.options.join('|')})\\s*)*$`, description: 'Job statuses, comma-separated' })
    .optional(),
  limit: intParam(1, 100, 20),
  cursor: z.string().optional(),
});
const listCursor = z.strictObject({ seq: z.int().positive() });
export const cancelBody = z.strictObject({ reason: z.string().max(500, 'must be at most 500 characters').nullable().optional() }).nullable().optional();

/** The wallet that must send the funding calls, checksummed as wallets show it. */
const signerOf = (wallet: string) => getAddress(wallet);

/**
 * Jobs: `POST /v1/jobs` (validate, policy, price against live capacity, fix the escrow terms;
 * idempotent with `Idempotency-Key`), `GET /v1/jobs`, `GET /v1/jobs/:id`, and cancel.
 */
export const jobRoutes: FastifyPluginAsync<JobRoutesOptions> = async (app, { db, offerIndex, config, escrow, effects }) => {
  // Creations without an Idempotency-Key that arrive together are inserted together.
  const insertJob = createBatcher((jobs: readonly NewJob[]) => insertJobs(db, jobs), { maxInFlight: 2, maxBatch: 64 });
  const imageHolders = cachedImageHolderCount(db);

  app.post('/v1/jobs', { config: { auth: 'jobs:create', rateBucket: 'jobs_create' } }, async (request, reply) => {
    const { accountId, apiKeyId, walletAddress } = request.principal!;
    const keyHeader = request.headers['idempotency-key'];
    if (keyHeader !== undefined && (typeof keyHeader !== 'string' || !IDEMPOTENCY_KEY.test(keyHeader))) {
      throw new ApiError('invalid_request', 'Idempotency-Key must be 1 to 255 visible ASCII characters.', {
        details: [fieldDetail('Idempotency-Key', 'must be 1 to 255 visible ASCII characters', { subject: true })],
      });
    }
    const created = await createJob(
      { db, offerIndex, config, escrow, insertJob, imageHolders },
      { principal: { accountId, apiKeyId, walletAddress }, body: request.body, ...(keyHeader === undefined ? {} : { idempotencyKey: keyHeader as string }) },
    );
    return reply.code(created.idempotentReplay ? 200 : 201).send(created);
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

  const loadJob = (accountId: string, params: unknown): Promise<JobRow> => requireAccountJob(db, accountId, params);

  /** Job objects with their assignment, artifacts, deferred payouts and, with `startup`, start phases (three or four statements for any number of jobs). */
  const toJobs = async (rows: readonly JobRow[], options: { startup?: boolean } = {}) => {
    const extras = await loadJobExtras(db, rows, options);
    return rows.map((row) => toJob(row, config.publicUrl, extras.get(row.id)));
  };

  app.get('/v1/jobs/:id', { config: { auth: 'jobs:read' } }, async (request) => {
    const query = parseQuery(jobQuery, request.query, 'GET /v1/jobs/:id');
    return (await toJobs([await loadJob(request.principal!.accountId, request.params)], { startup: query.include === 'startup' }))[0];
  });

  app.get('/v1/jobs/:id/funding', { config: { auth: 'jobs:create' } }, async (request) => {
    const principal = request.principal!;
    let row = await loadJob(principal.accountId, request.params);
    if (row.status !== 'CREATED') {
      throw new ApiError('conflict', `The job is ${row.status}; only a CREATED job waits for funding.`, { details: [fieldDetail('status', `is ${row.status}`, { subject: true })] });
    }
    requireChain(escrow);
    row = await ensureEscrowTerms(db, escrow, row);
    const answer = await fundingFor(escrow, row, signerOf(principal.walletAddress));
    if (!answer.funding) throw new ApiError('unavailable', answer.fundingUnavailable.message, { details: [fieldDetail('chain', answer.fundingUnavailable.code)] });
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
    const { id } = parseParams(jobParams, request.params);
    const warn = (fields: { err: unknown; jobId: string }, message: string) => app.log.warn(fields, message);
    const row = await cancelJob({ db, escrow, effects, warn }, { accountId: request.principal!.accountId, jobId: id, reason: body?.reason ?? null });
    return (await toJobs([row]))[0];
  });
};
