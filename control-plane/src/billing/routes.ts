import type { FastifyPluginAsync } from 'fastify';
import type { Queryable } from '../db/database.js';
import { z } from 'zod';
import { decodeCursor, encodeCursor } from '../http/cursor.js';
import { intParam, parseQuery } from '../http/parse.js';
import { jobIdSchema } from '../ids.js';
import { listBillingEntries, type BillingEntryRow } from './store.js';

export const querySchema = z.strictObject({
  limit: intParam(1, 200, 50),
  cursor: z.string().min(1).optional(),
  /** One job's entries only (its job page's money card); a job of another account has none. */
  jobId: jobIdSchema.optional(),
});

const cursorSchema = z.strictObject({ seq: z.int().positive() });

function toEntry(row: BillingEntryRow) {
  return {
    object: 'billing_entry' as const,
    id: row.id,
    type: row.type,
    jobId: row.job_id,
    amountMicroUsd: row.amount_micro_usd,
    token: row.token,
    amount: row.amount,
    txHash: row.tx_hash,
    createdAt: row.created_at.toISOString(),
  };
}

/** `GET /v1/billing` [billing:read]: the account's billing entries, newest first. */
export const billingRoutes: FastifyPluginAsync<{ db: Queryable }> = async (app, { db }) => {
  app.get('/v1/billing', { config: { auth: 'billing:read' } }, async (request) => {
    const query = parseQuery(querySchema, request.query, 'GET /v1/billing');
    const beforeSeq = query.cursor ? decodeCursor(query.cursor, cursorSchema).seq : null;
    const principal = request.principal;
    if (!principal) throw new Error('billing route reached without a principal');
    // One row more than asked tells whether another page exists.
    const rows = await listBillingEntries(db, { accountId: principal.accountId, limit: query.limit + 1, beforeSeq, jobId: query.jobId ?? null });
    const page = rows.slice(0, query.limit);
    const last = page.at(-1);
    return {
      object: 'list',
      data: page.map(toEntry),
      nextCursor: rows.length > query.limit && last ? encodeCursor({ seq: last.seq }) : null,
    };
  });
};
