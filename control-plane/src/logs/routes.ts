import { ApiError, fieldDetail, logCursorSchema, logStreamSchema, type LogList } from '@gpufarm/shared';
import type { FastifyPluginAsync } from 'fastify';
import { z } from 'zod';
import type { Database } from '../db/database.js';
import { intParam, parseParams, parseQuery } from '../http/parse.js';
import { findJob } from '../jobs/store.js';
import { createJobLogFeed } from './feed.js';
import { listLogLines } from './store.js';
import { createStreamSlots, DEFAULT_LOG_STREAM_OPTIONS, LogStreamSession, toLogLine, type LogStreamOptions, type StreamSlots } from './stream.js';

export interface LogRoutesOptions {
  db: Database;
  stream?: LogStreamOptions;
  /** The open-stream counts, shared with the other registration (`/v1` and `/dashboard/api` count together). */
  slots?: StreamSlots;
}

const jobParams = z.object({ id: z.string().regex(/^job_[0-9a-z]{26}$/, 'is not a job id (job_…)') });
const streamFilter = z.enum(logStreamSchema.options, { error: `must be one of ${logStreamSchema.options.join(', ')}` }).optional();
export const logsQuery = z.strictObject({
  cursor: logCursorSchema.default('0'),
  limit: intParam(1, 1000, 500),
  stream: streamFilter,
});
export const logStreamQuery = z.strictObject({
  cursor: logCursorSchema.default('0'),
  stream: streamFilter,
});

/** A validated cursor as the line id to read after; `field` names it in the 400. */
function cursorToId(cursor: string, field: string): number {
  const parsed = logCursorSchema.safeParse(cursor);
  const afterId = parsed.success ? Number(cursor) : Number.NaN;
  if (!Number.isSafeInteger(afterId)) {
    const problem = parsed.success ? 'is too large' : 'must be a non-negative integer cursor such as "0"';
    throw new ApiError('invalid_request', `${field} ${problem}.`, { details: [fieldDetail(field, problem, { subject: true })] });
  }
  return afterId;
}

/** Seconds a client told the stream cap is reached waits before it tries again. */
const STREAM_CAP_RETRY_SECONDS = 10;

/**
 * `GET /v1/jobs/:id/logs` [jobs:read]: the job's lines after `cursor` (start at `0`), at most
 * `limit` (1-1000, default 500), optionally of one `stream`. `nextCursor` is the id of the last
 * line returned, or the given cursor when there is none yet: a client tails the log by calling
 * again with it.
 *
 * `GET /v1/jobs/:id/logs/stream` [jobs:read] (beyond the spec): the same lines as Server-Sent
 * Events, live until the job ends (`stream.ts`); `Last-Event-ID` takes precedence over `cursor`.
 */
export const logRoutes: FastifyPluginAsync<LogRoutesOptions> = async (app, { db, stream: streamOptions = DEFAULT_LOG_STREAM_OPTIONS, slots = createStreamSlots(streamOptions) }) => {
  app.get('/v1/jobs/:id/logs', { config: { auth: 'jobs:read' } }, async (request): Promise<LogList> => {
    const { id } = parseParams(jobParams, request.params);
    const query = parseQuery(logsQuery, request.query, 'GET /v1/jobs/:id/logs');
    const job = await findJob(db, request.principal!.accountId, id);
    if (!job) throw new ApiError('not_found', `No job ${id} on this account.`);
    const afterId = cursorToId(query.cursor, 'cursor');
    const rows = await listLogLines(db, { jobId: job.id, afterId, limit: query.limit, stream: query.stream ?? null });
    const last = rows.at(-1);
    return { object: 'list', jobStatus: job.status, nextCursor: last ? String(last.id) : query.cursor, data: rows.map(toLogLine) };
  });

  const feed = createJobLogFeed(db);
  const sessions = new Set<LogStreamSession>();
  // Before the server stops and waits for its connections: an open stream would hold it up.
  app.addHook('preClose', async () => {
    for (const session of sessions) session.close();
    await feed.close();
  });

  // A HEAD would hold a stream open with nothing to send.
  app.get('/v1/jobs/:id/logs/stream', { exposeHeadRoute: false, config: { auth: 'jobs:read' } }, async (request, reply) => {
    const { id } = parseParams(jobParams, request.params);
    const query = parseQuery(logStreamQuery, request.query, 'GET /v1/jobs/:id/logs/stream');
    const lastEventId = request.headers['last-event-id'];
    const afterId = lastEventId === undefined ? cursorToId(query.cursor, 'cursor') : cursorToId(String(lastEventId), 'Last-Event-ID');
    const { accountId, keyId } = request.principal!;
    const job = await findJob(db, accountId, id);
    if (!job) throw new ApiError('not_found', `No job ${id} on this account.`);
    const slot = slots.take({ keyId, accountId });
    if ('full' in slot) {
      const cap = slot.full === 'key' ? `an API key (or dashboard session) may keep at most ${streamOptions.maxPerKey}` : `an account may keep at most ${streamOptions.maxPerAccount} over all its keys and sessions`;
      throw new ApiError('rate_limited', `Too many open log streams: ${cap} open at once. Close one, or retry after ${STREAM_CAP_RETRY_SECONDS} s.`, {
        headers: { 'Retry-After': String(STREAM_CAP_RETRY_SECONDS) },
      });
    }
    const { release } = slot;

    const session = new LogStreamSession(
      reply.raw,
      { db, heartbeatMs: streamOptions.heartbeatMs, onError: (err) => request.log.warn({ err }, 'log stream stopped') },
      { accountId, jobId: job.id, afterId, stream: query.stream ?? null },
    );
    let unsubscribe: () => void;
    try {
      // Listening before the first read: a line stored in between still wakes the stream.
      unsubscribe = await feed.subscribe(job.id, () => session.wake());
    } catch (err) {
      release();
      throw err;
    }
    sessions.add(session);
    void session.done.then(() => {
      sessions.delete(session);
      unsubscribe();
      release();
    });

    reply.hijack();
    // The hooks' headers (X-Request-Id, Service-Version, rate limits, CORS) are on the reply, not yet on the socket.
    for (const [name, value] of Object.entries(reply.getHeaders())) if (value !== undefined) reply.raw.setHeader(name, value);
    reply.raw.writeHead(200, {
      'Content-Type': 'text/event-stream; charset=utf-8',
      'Cache-Control': 'no-store',
      'X-Accel-Buffering': 'no',
    });
    session.start();
  });
};
