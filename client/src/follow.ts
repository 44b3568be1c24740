import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { errorText, issuesToDetails, isTerminalStatus, type JobStatus, jobStatusSchema, logCursorSchema, type LogLine, logLineSchema, type LogList, type LogStream } from '@gpufarm/shared';
import { z } from 'zod';
import { parseAnswer } from './answer.js';
import { GfError } from './errors.js';
import { backoffMs, failureOf, sleep, type Query } from './transport.js';

export interface FollowLogsOptions {
  /** Only the lines of this stream. */
  stream?: LogStream;
  /** Starts after this cursor (a line id, as `nextCursor` answers it); `0`, the start, by default. */
  cursor?: string;
  /** Stops following (the job keeps running); the generator rejects with the signal's reason. */
  signal?: AbortSignal;
  /** The pause between polls when the live stream is unavailable and no new line came; 1 s by default. */
  pollIntervalMs?: number;
}

/** What a follow ended with: the job's final status and the cursor after its last line (to resume from). */
export interface FollowLogsEnd {
  jobStatus: JobStatus;
  nextCursor: string;
}

interface FollowDeps {
  openStream: (call: { path: string; query?: Query; headers?: Record<string, string>; signal?: AbortSignal }, attempt?: number) => Promise<Response>;
  logs: (jobId: string, query: { cursor?: string; limit?: number; stream?: LogStream }, signal?: AbortSignal) => Promise<LogList>;
}

/** Connections (or polls) in a row that brought nothing before the follow gives up with the last error. */
const MAX_FAILURES_IN_A_ROW = 8;
/** Twice the server's 15 s keep-alive and a margin: a stream silent this long is dead, though its socket looks open. */
const STREAM_IDLE_MS = 45_000;
const POLL_PAGE = 1000;
/** Answers of the stream route meaning "no live stream here": follow by polling instead. */
const STREAM_UNAVAILABLE = new Set([404, 405, 429, 501]);

const statusEventSchema = z.object({ jobStatus: jobStatusSchema });
const endEventSchema = z.object({ jobStatus: jobStatusSchema, nextCursor: logCursorSchema });

type Outcome = { kind: 'end'; end: FollowLogsEnd } | { kind: 'dropped'; error: GfError; received: boolean } | { kind: 'unavailable'; reason: string };

/**
 * Every log line of a job from `cursor` on until the job has ended and its last line was
 * yielded; the generator's return value is `{ jobStatus, nextCursor }`. Reads the live stream
 * (`GET /v1/jobs/:id/logs/stream`); a dropped connection is reopened with `Last-Event-ID` set to
 * the last line yielded, after a jittered backoff, so no line is lost or repeated. When the
 * stream is not served (404, 405, 501, the per-key cap's 429, or an answer that is not an event
 * stream) it polls `GET /v1/jobs/:id/logs` instead. Every line is checked against the `shared`
 * schema; anything else is `invalid_response`.
 */
export async function* followLogs(deps: FollowDeps, jobId: string, options: FollowLogsOptions = {}): AsyncGenerator<LogLine, FollowLogsEnd, undefined> {
  const position = { cursor: options.cursor ?? '0' };
  const parsedCursor = logCursorSchema.safeParse(position.cursor);
  if (!parsedCursor.success) throw new GfError('invalid_request', `cursor must be a line id such as "0", got ${JSON.stringify(position.cursor)}.`, { details: [{ field: 'cursor', message: 'is not a cursor' }] });
  const { signal } = options;
  let failures = 0;
  for (let attempt = 0; ; attempt++) {
    if (signal?.aborted) throw signal.reason;
    const outcome: Outcome = yield* streamOnce(deps, jobId, position, options, attempt);
    if (outcome.kind === 'end') return outcome.end;
    if (outcome.kind === 'unavailable') return yield* poll(deps, jobId, position, options);
    failures = outcome.received ? 1 : failures + 1;
    if (failures >= MAX_FAILURES_IN_A_ROW) throw outcome.error;
    await sleep(outcome.error.retryAfterMs ?? backoffMs(failures - 1), signal);
  }
}

/** One connection of the live stream, yielding its lines; answers how it ended. */
async function* streamOnce(deps: FollowDeps, jobId: string, position: { cursor: string }, options: FollowLogsOptions, attempt: number): AsyncGenerator<LogLine, Outcome, undefined> {
  const path = `/v1/jobs/${encodeURIComponent(jobId)}/logs/stream`;
  const what = `GET ${path}`;
  const connection = new AbortController();
  const signal = options.signal ? AbortSignal.any([options.signal, connection.signal]) : connection.signal;
  let res: Response;
  try {
    res = await deps.openStream({ path, query: { stream: options.stream }, headers: { 'last-event-id': position.cursor }, signal }, attempt);
  } catch (err) {
    if (options.signal?.aborted) throw options.signal.reason;
    if (err instanceof GfError) return { kind: 'dropped', error: err, received: false };
    throw err;
  }
  const contentType = res.headers.get('content-type') ?? '';
  if (STREAM_UNAVAILABLE.has(res.status) || (res.status === 200 && !contentType.startsWith('text/event-stream'))) {
    await res.body?.cancel().catch(() => undefined);
    return { kind: 'unavailable', reason: `HTTP ${res.status} ${contentType}` };
  }
  if (res.status !== 200 || !res.body) {
    const error = await failureOf(res, what);
    if (error.retryable) return { kind: 'dropped', error, received: false };
    throw error;
  }
  const requestId = res.headers.get('x-request-id');
  const invalid = (message: string, details: { field: string; message: string }[] = []) =>
    new GfError('invalid_response', `${what} sent ${message}. Check that the client and the server versions match.`, { status: res.status, requestId, details });
  const events: EventSourceMessage[] = [];
  const parser = createParser({ onEvent: (event) => events.push(event) });
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let received = false;
  let idle: NodeJS.Timeout | undefined;
  const armIdle = () => {
    clearTimeout(idle);
    idle = setTimeout(() => connection.abort(new GfError('timeout', `${what} was silent for ${STREAM_IDLE_MS} ms.`, { retryable: true })), STREAM_IDLE_MS);
  };
  try {
    armIdle();
    for (;;) {
      let chunk: Awaited<ReturnType<typeof reader.read>>;
      try {
        chunk = await reader.read();
      } catch (err) {
        if (options.signal?.aborted) throw options.signal.reason;
        const reason: unknown = connection.signal.reason;
        const error = reason instanceof GfError ? reason : new GfError('network_error', `${what} broke off: ${errorText(err)}.`, { retryable: true, cause: err });
        return { kind: 'dropped', error, received };
      }
      if (chunk.done) return { kind: 'dropped', error: new GfError('network_error', `${what} closed before its end event.`, { retryable: true }), received };
      armIdle();
      parser.feed(chunk.value);
      for (const event of events.splice(0)) {
        received = true;
        const data = parseJson(event.data);
        if (event.event === 'log') {
          const line = parseAnswer(logLineSchema, data);
          if (!line.success) throw invalid('a log line that does not match its schema', issuesToDetails(line.error.issues));
          // A line at or before the cursor was already yielded (a replayed event after a resume).
          if (line.data.id <= Number(position.cursor)) continue;
          position.cursor = String(line.data.id);
          yield line.data;
        } else if (event.event === 'end') {
          const end = parseAnswer(endEventSchema, data);
          if (!end.success) throw invalid('an end event that does not match its schema', issuesToDetails(end.error.issues));
          return { kind: 'end', end: { jobStatus: end.data.jobStatus, nextCursor: Number(end.data.nextCursor) > Number(position.cursor) ? end.data.nextCursor : position.cursor } };
        } else if (event.event === 'status') {
          if (!parseAnswer(statusEventSchema, data).success) throw invalid('a status event that does not match its schema');
        }
      }
    }
  } finally {
    clearTimeout(idle);
    connection.abort();
    await reader.cancel().catch(() => undefined);
  }
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** Follows by `GET /v1/jobs/:id/logs` until the job is final and a page came back short (drained). */
async function* poll(deps: FollowDeps, jobId: string, position: { cursor: string }, options: FollowLogsOptions): AsyncGenerator<LogLine, FollowLogsEnd, undefined> {
  const { signal } = options;
  const interval = options.pollIntervalMs ?? 1_000;
  let failures = 0;
  for (;;) {
    let page: LogList;
    try {
      page = await deps.logs(jobId, { cursor: position.cursor, limit: POLL_PAGE, stream: options.stream }, signal);
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      // The call's own retries are spent; a passing outage does not end a follow of hours.
      if (!(err instanceof GfError && err.retryable) || ++failures >= MAX_FAILURES_IN_A_ROW) throw err;
      await sleep(err.retryAfterMs ?? backoffMs(failures - 1), signal);
      continue;
    }
    failures = 0;
    for (const line of page.data) {
      if (line.id <= Number(position.cursor)) continue;
      position.cursor = String(line.id);
      yield line;
    }
    // The route reads the status before the lines: a final status and a short page leave nothing unread.
    if (isTerminalStatus(page.jobStatus) && page.data.length < POLL_PAGE) return { jobStatus: page.jobStatus, nextCursor: position.cursor };
    if (page.data.length < POLL_PAGE) await sleep(interval, signal);
  }
}
