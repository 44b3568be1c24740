import type { ServerResponse } from 'node:http';
import { isTerminalStatus, type JobStatus, type LogLine, type LogStream } from '@gpufarm/shared';
import type { Queryable } from '../db/database.js';
import { findJob } from '../jobs/store.js';
import { listLogLines, type LogLineRow } from './store.js';

/** The live log stream's timing and its caps. */
export interface LogStreamOptions {
  /** A `: keep-alive` comment this often keeps proxies and clients from timing the stream out. */
  heartbeatMs: number;
  /** Streams one API key (or dashboard session) may keep open at once in this process. */
  maxPerKey: number;
  /** Streams one account may keep open at once in this process, over all its keys and sessions (`GF_LOG_STREAMS_PER_ACCOUNT`). */
  maxPerAccount: number;
}

export const DEFAULT_LOG_STREAM_OPTIONS: LogStreamOptions = { heartbeatMs: 15_000, maxPerKey: 5, maxPerAccount: 20 };

/** Open streams counted per key and per account: one per app, shared by `/v1` and `/dashboard/api`. */
export interface StreamSlots {
  /** Takes a slot for the caller: its release, or which cap is full (nothing taken). */
  take(caller: { keyId: string; accountId: string }): { release: () => void } | { full: 'key' | 'account' };
}

export function createStreamSlots(caps: Pick<LogStreamOptions, 'maxPerKey' | 'maxPerAccount'>): StreamSlots {
  const perKey = new Map<string, number>();
  const perAccount = new Map<string, number>();
  const add = (map: Map<string, number>, id: string, by: number) => {
    const count = (map.get(id) ?? 0) + by;
    if (count > 0) map.set(id, count);
    else map.delete(id);
  };
  return {
    take({ keyId, accountId }) {
      if ((perKey.get(keyId) ?? 0) >= caps.maxPerKey) return { full: 'key' };
      if ((perAccount.get(accountId) ?? 0) >= caps.maxPerAccount) return { full: 'account' };
      add(perKey, keyId, 1);
      add(perAccount, accountId, 1);
      let released = false;
      return {
        release: () => {
          if (released) return;
          released = true;
          add(perKey, keyId, -1);
          add(perAccount, accountId, -1);
        },
      };
    },
  };
}

/** Lines read per statement while catching up. */
const PAGE_LINES = 500;

export function toLogLine(row: LogLineRow): LogLine {
  return { id: Number(row.id), assignmentId: row.assignment_id, seq: row.seq, stream: row.stream, line: row.line, at: row.at.toISOString() };
}

const sseEvent = (event: string, data: unknown, id?: number) => `${id === undefined ? '' : `id: ${id}\n`}event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

/**
 * One open `GET /v1/jobs/:id/logs/stream` response: sends the job's status, then its lines after
 * the cursor in id order, each with its id as the event id; on each `wake()` (a NOTIFY for the
 * job) it reads again from the last line sent. Once the job is terminal and every line read, it
 * sends `end` and closes. A slow reader holds the reads back (the socket's buffer, not memory).
 */
export class LogStreamSession {
  private cursor: number;
  private sentStatus: JobStatus | null = null;
  private dirty = false;
  private running = false;
  private ended = false;
  private heartbeat: NodeJS.Timeout | undefined;
  private resolveDone!: () => void;
  /** Resolves once the stream is closed, whoever closed it. */
  readonly done = new Promise<void>((resolve) => {
    this.resolveDone = resolve;
  });

  constructor(
    private readonly res: ServerResponse,
    private readonly deps: { db: Queryable; heartbeatMs: number; onError: (err: unknown) => void },
    private readonly params: { accountId: string; jobId: string; afterId: number; stream: LogStream | null },
  ) {
    this.cursor = params.afterId;
  }

  /** Starts sending on a response whose head is written. */
  start(): void {
    this.res.on('close', () => this.close());
    // A client gone while the stream was being set up closed the socket before anyone listened.
    if (this.res.destroyed || !this.res.socket || this.res.socket.destroyed) return this.close();
    this.heartbeat = setInterval(() => {
      if (!this.ended) this.res.write(': keep-alive\n\n');
    }, this.deps.heartbeatMs);
    this.wake();
  }

  /** Lines or the status of the job may have changed: read again. */
  wake(): void {
    this.dirty = true;
    if (!this.running) void this.pump();
  }

  close(): void {
    if (this.ended) return;
    this.ended = true;
    clearInterval(this.heartbeat);
    if (!this.res.writableEnded) this.res.end();
    this.resolveDone();
  }

  private async pump(): Promise<void> {
    this.running = true;
    try {
      while (this.dirty && !this.ended) {
        this.dirty = false;
        // The status is read before the lines: every line stored before a terminal status is then read too.
        const job = await findJob(this.deps.db, this.params.accountId, this.params.jobId);
        if (!job) return this.close();
        if (job.status !== this.sentStatus) {
          this.sentStatus = job.status;
          await this.send(sseEvent('status', { jobStatus: job.status }));
        }
        for (;;) {
          const rows = await listLogLines(this.deps.db, { jobId: this.params.jobId, afterId: this.cursor, limit: PAGE_LINES, stream: this.params.stream });
          if (this.ended) return;
          if (rows.length > 0) {
            await this.send(rows.map((row) => sseEvent('log', toLogLine(row), Number(row.id))).join(''));
            this.cursor = Number(rows.at(-1)!.id);
          }
          if (rows.length < PAGE_LINES) break;
        }
        if (isTerminalStatus(job.status)) {
          await this.send(sseEvent('end', { jobStatus: job.status, nextCursor: String(this.cursor) }));
          return this.close();
        }
      }
    } catch (err) {
      // The client resumes from the last id it got (Last-Event-ID), on this replica or another.
      this.deps.onError(err);
      this.close();
    } finally {
      this.running = false;
    }
  }

  private async send(text: string): Promise<void> {
    if (this.ended || this.res.write(text)) return;
    await new Promise<void>((resolve) => {
      const go = () => {
        this.res.off('drain', go);
        this.res.off('close', go);
        resolve();
      };
      this.res.on('drain', go);
      this.res.on('close', go);
    });
  }
}
