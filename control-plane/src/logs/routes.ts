import { ApiError, fieldDetail, logCursorSchema, logStreamSchema, type LogLine, type LogList } from '@gpufarm/shared';
import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import type { Database } from '../db/database.js';
import { intParam, parseParams, parseQuery } from '../http/parse.js';
import { findJob } from '../jobs/store.js';
import { listLogLines, type LogLineRow } from './store.js';

export interface LogRoutesOptions {
  db: Database;
}

const jobParams = z.object({ id: z.string().regex(/^job_[0-9a-z]{26}$/, 'is not a job id (job_…)') });
const logsQuery = z.strictObject({
  cursor: logCursorSchema.default('0'),
  limit: intParam(1, 1000, 500),
  stream: z.enum(logStreamSchema.options, { error: `must be one of ${logStreamSchema.options.join(', ')}` }).optional(),
});

export function toLogLine(row: LogLineRow): LogLine {
  return { id: Number(row.id), assignmentId: row.assignment_id, seq: row.seq, stream: row.stream, line: row.line, at: row.at.toISOString() };
}

/**
 * `GET /v1/jobs/:id/logs` [jobs:read]: the job's lines after `cursor` (start at `0`), at most
 * `limit` (1-1000, default 500), optionally of one `stream`. `nextCursor` is the id of the last
 * line returned, or the given cursor when there is none yet: a client tails the log by calling
 * again with it.
 */
export const logRoutes: FastifyPluginAsync<LogRoutesOptions> = async (app, { db }) => {
  app.get('/v1/jobs/:id/logs', { config: { auth: 'jobs:read' } }, async (request): Promise<LogList> => {
    const { id } = parseParams(jobParams, request.params);
    const query = parseQuery(logsQuery, request.query, 'GET /v1/jobs/:id/logs');
    const job = await findJob(db, request.principal!.accountId, id);
    if (!job) throw new ApiError('not_found', `No job ${id} on this account.`);
    const afterId = Number(query.cursor);
    if (!Number.isSafeInteger(afterId)) throw new ApiError('invalid_request', 'cursor is too large.', { details: [fieldDetail('cursor', 'is too large', { subject: true })] });
    const rows = await listLogLines(db, { jobId: job.id, afterId, limit: query.limit, stream: query.stream ?? null });
    const last = rows.at(-1);
    return { object: 'list', jobStatus: job.status, nextCursor: last ? String(last.id) : query.cursor, data: rows.map(toLogLine) };
  });
};
