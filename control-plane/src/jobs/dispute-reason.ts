import { ApiError, isCleanText } from '@gpufarm/shared';
import { z } from 'zod';
import type { Queryable } from '../db/database.js';
import { setDisputeReason } from './store.js';

/**
 * Why a customer disputes a job's result, in their words: the dashboard sends it just before the
 * wallet's `dispute` call (the escrow's event carries no text), and the admin who resolves the
 * dispute reads it. Sent again, it replaces the earlier words while the dispute is open.
 */

export const DISPUTE_REASON_MAX_CHARS = 500;
export const DISPUTE_EVIDENCE_MAX_CHARS = 4000;

export const disputeReasonBodySchema = z.strictObject({
  reason: z
    .string()
    .trim()
    .min(1, 'must say why the result is disputed')
    .max(DISPUTE_REASON_MAX_CHARS, `must be at most ${DISPUTE_REASON_MAX_CHARS} characters`)
    .refine(isCleanText, 'must not contain NUL or unpaired surrogate characters'),
  evidence: z
    .string()
    .trim()
    .max(DISPUTE_EVIDENCE_MAX_CHARS, `must be at most ${DISPUTE_EVIDENCE_MAX_CHARS} characters`)
    .refine(isCleanText, 'must not contain NUL or unpaired surrogate characters')
    .optional(),
});
export type DisputeReasonBody = z.infer<typeof disputeReasonBodySchema>;

/**
 * Stores the reason on the account's job while it can be (or is) disputed: its result recorded
 * on the escrow with the challenge window still open, or a dispute not yet decided. 409
 * `conflict` otherwise, saying why.
 */
export async function recordDisputeReason(db: Queryable, params: { accountId: string; jobId: string } & DisputeReasonBody): Promise<{ jobId: string; reason: string; evidence: string | null; recordedAt: string }> {
  const evidence = params.evidence ? params.evidence : null;
  const recordedAt = await setDisputeReason(db, { accountId: params.accountId, jobId: params.jobId, reason: params.reason, evidence });
  if (!recordedAt) throw new ApiError('conflict', `Job ${params.jobId} has no result in its challenge window and no open dispute: there is nothing to dispute.`);
  return { jobId: params.jobId, reason: params.reason, evidence, recordedAt: recordedAt.toISOString() };
}
