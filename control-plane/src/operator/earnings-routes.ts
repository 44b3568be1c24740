import { Readable } from 'node:stream';
import { ApiError } from '@gpufarm/shared';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { intParam, parseParams, parseQuery } from '../http/parse.js';
import { jobIdSchema } from '../ids.js';
import { withdrawalsOf } from '../jobs/deferred-payments.js';
import { waitingForFarms } from '../jobs/deferred-payments-store.js';
import { earningOfJob, earningsCsv, earningsPage, type LedgerScope } from './earnings.js';
import { farmQuery, farmSlug, farmsOf, ids, scope, type OperatorRouteDeps } from './request.js';
import { ledgerJob, ledgerTotals, operatorJobRuns } from './store.js';
import { iso } from './views.js';

const jobParams = z.object({ id: jobIdSchema });
const isoTime = z.iso.datetime({ offset: true, message: 'must be an ISO time such as 2026-11-01T00:00:00Z' });
const earningsQuery = z.strictObject({
  farm: farmSlug.optional(),
  from: isoTime.optional(),
  to: isoTime.optional(),
  groupBy: z.enum(['job', 'machine', 'day']).default('job'),
  limit: intParam(1, 500, 50),
  cursor: z.string().max(200).optional(),
});
const earningsCsvQuery = earningsQuery.omit({ limit: true, cursor: true });

/** What the farms earned: one job's runs and earning, the ledger (a page, or CSV), and the payouts waiting in the escrow. */
export function earningsRoutes(app: FastifyInstance, { db, base, session }: OperatorRouteDeps): void {
  // A customer job that ran on the farms' machines: its runs there, result and earning.
  app.get(`${base}/jobs/:id`, session, async (request) => {
    const { id } = parseParams(jobParams, request.params);
    const farmIds = ids(farmsOf(request));
    const [runs, ledger] = await Promise.all([operatorJobRuns(db, farmIds, id), ledgerJob(db, farmIds, id)]);
    const job = runs[0];
    if (!job) throw new ApiError('not_found', `No job ${id} ran on your farms' machines.`);
    return {
      jobId: id,
      status: job.status,
      verificationLevel: job.verificationLevel,
      resultHash: job.resultHash,
      completionTxHash: job.completionTxHash,
      billableGpuSeconds: job.billableGpuSeconds,
      runs: runs.map((r) => ({
        attempt: r.attempt,
        machineId: r.machineId,
        gpuModel: r.gpuModel,
        gpuCount: r.gpuCount,
        pricePerGpuHourMicroUsd: Number(r.price),
        startedAt: iso(r.startedAt),
        finishedAt: iso(r.finishedAt),
        exitCode: r.exitCode,
        failureCode: r.failureCode,
        failureMessage: r.failureMessage,
        result: r.assignmentId === r.resultAssignmentId,
      })),
      earning: ledger ? earningOfJob(ledger) : null,
    };
  });

  const ledgerScope = (request: FastifyRequest, query: { farm?: string | undefined; from?: string | undefined; to?: string | undefined }): LedgerScope => ({
    farmIds: ids(scope(request, query.farm)),
    from: query.from ? new Date(query.from) : null,
    to: query.to ? new Date(query.to) : null,
  });

  app.get(`${base}/earnings`, session, async (request) => {
    const query = parseQuery(earningsQuery, request.query, 'GET /operator/api/earnings');
    const ledger = ledgerScope(request, query);
    const [page, totals] = await Promise.all([earningsPage(db, ledger, { groupBy: query.groupBy, cursor: query.cursor, limit: query.limit }), ledgerTotals(db, ledger)]);
    return { object: 'list', data: page.data, nextCursor: page.nextCursor, totals };
  });

  // Streamed a page at a time: a ledger of any length is never held whole.
  app.get(`${base}/earnings.csv`, session, async (request, reply) => {
    const query = parseQuery(earningsCsvQuery, request.query, 'GET /operator/api/earnings.csv');
    const ledger = ledgerScope(request, query);
    return reply
      .header('content-type', 'text/csv; charset=utf-8; header=present')
      .header('content-disposition', `attachment; filename="earnings-${query.groupBy}.csv"`)
      .send(Readable.from(earningsCsv(db, ledger, query.groupBy)));
  });

  // Payouts the escrow holds for the farms' payout wallets: each wallet takes its own with withdraw(token).
  app.get(`${base}/withdrawals`, session, async (request) => {
    const query = parseQuery(farmQuery, request.query, 'GET /operator/api/withdrawals');
    return { data: withdrawalsOf(await waitingForFarms(db, ids(scope(request, query.farm)))) };
  });
}
