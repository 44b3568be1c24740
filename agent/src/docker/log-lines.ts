import { MAX_LOG_LINE_CHARS } from '@gpufarm/shared';

/** The stream a log line came from; `system` lines are the agent's own (pull progress, limits). */
export type RuntimeLogStream = 'stdout' | 'stderr' | 'system';

/**
 * One line for the link. `ts` is milliseconds since the epoch (Docker's read time for container
 * lines, the agent's clock for system lines). `cursor` is the resume point of a container line
 * (see `LogCursor`); system lines carry null.
 */
export interface RuntimeLogLine {
  stream: RuntimeLogStream;
  line: string;
  ts: number;
  cursor: string | null;
}

/** Where the runtime delivers lines, in order. The link numbers, spools and ships them. */
export type LogSink = (line: RuntimeLogLine) => void;

/**
 * The position of a container line in Docker's log: its timestamp as Docker writes it
 * (RFC 3339 with nine fixed decimals, UTC) and how many lines came right before it with the
 * same timestamp. Written `2026-11-22T15:37:22.123456789Z#0`.
 * A cursor names a line; it is not a point in time: Docker stamps stdout and stderr lines in
 * one goroutine per stream and stores them under one lock, so across the two streams the
 * stored order (the order every read returns) can differ from the stamps' order. A follower
 * resumed after a cursor asks Docker for lines `since` a second before it (`sinceSeconds`) and
 * drops every line up to the cursor's own (`linesAfter`), so no line is delivered twice and
 * none is skipped.
 */
export interface LogCursor {
  ts: string;
  index: number;
}

export function formatCursor(cursor: LogCursor): string {
  return `${cursor.ts}#${cursor.index}`;
}

export function parseCursor(text: string): LogCursor {
  const m = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z)#(\d+)$/.exec(text);
  if (!m) throw new Error(`not a log cursor: ${JSON.stringify(text)}`);
  return { ts: m[1]!, index: Number(m[2]) };
}

/** Compares positions; negative when a is before b. */
export function compareCursors(a: LogCursor, b: LogCursor): number {
  return a.ts < b.ts ? -1 : a.ts > b.ts ? 1 : a.index - b.index;
}

/**
 * How much earlier than a line stored after it a line of the other stream can be stamped, at
 * most (a thread preempted between stamping and storing; milliseconds are seen, a second is
 * ample): `since` reaches back this far and `linesAfter` relies on it.
 */
export const STREAM_SKEW_SECONDS = 1;

/**
 * Seconds since the epoch to pass as Docker's `since` for lines after `cursor`: whole seconds,
 * `STREAM_SKEW_SECONDS` before it, so lines stored after it with an earlier stamp come too.
 */
export function sinceSeconds(cursor: LogCursor): number {
  return Math.floor(Date.parse(cursor.ts.replace(/\.\d+Z$/, 'Z')) / 1000) - STREAM_SKEW_SECONDS;
}

/**
 * A filter, called with each line's cursor in the order Docker returns lines (every piece of a
 * split line, each with the line's cursor), that admits the lines after `after`'s line: it
 * drops everything up to and including that line, whatever the stamps, then admits the rest.
 * Comparing stamps would not do: across the streams a line stored before the cursor's can be
 * stamped after it (and would come twice) and one stored after it stamped before (and be lost).
 * Lines that cannot have been stored before it end the skipping too, should the cursor's line
 * never come (rotated away, or a last line read before its last pieces were stored): one with
 * its stamp and a higher index (a later piece of the same line) or stamped more than
 * `STREAM_SKEW_SECONDS` after it. `null` admits every line.
 */
export function linesAfter(after: LogCursor | null): (cursor: LogCursor) => boolean {
  let state: 'before' | 'at' | 'past' = after ? 'before' : 'past';
  return (cursor) => {
    if (state === 'past' || !after) return true;
    if (compareCursors(cursor, after) === 0) {
      state = 'at';
      return false;
    }
    const storedAfter = cursor.ts === after.ts ? cursor.index > after.index : timestampMs(cursor.ts) - timestampMs(after.ts) > STREAM_SKEW_SECONDS * 1000;
    if (state === 'at' || storedAfter) {
      state = 'past';
      return true;
    }
    return false;
  };
}

/** Milliseconds since the epoch of a Docker timestamp. */
export function timestampMs(ts: string): number {
  return Date.parse(`${ts.slice(0, 23)}Z`);
}

/** Splits text longer than the protocol allows into pieces. */
export function splitLong(line: string): string[] {
  if (line.length <= MAX_LOG_LINE_CHARS) return [line];
  const pieces: string[] = [];
  for (let i = 0; i < line.length; i += MAX_LOG_LINE_CHARS) pieces.push(line.slice(i, i + MAX_LOG_LINE_CHARS));
  return pieces;
}

/**
 * Parses Docker's multiplexed log stream (`logs` with `timestamps: true`, no TTY): frames of an
 * 8-byte header (stream 1 or 2, three zero bytes, big-endian length) and a payload. Each frame
 * is one log message, `<timestamp> <text>`; a message without a trailing newline is a piece of
 * a line longer than Docker's 16 KiB buffer and is joined with the following pieces.
 *
 * Emits complete lines with their stream and cursor, skipping those up to `after`'s line (see
 * `linesAfter`).
 * Call `push` with each chunk and `end` once; text is decoded as UTF-8 per complete line.
 */
export class DockerLogParser {
  private pending: Buffer = Buffer.alloc(0);
  private partial: Record<'stdout' | 'stderr', { pieces: Buffer[]; cursor: LogCursor | null }> = {
    stdout: { pieces: [], cursor: null },
    stderr: { pieces: [], cursor: null },
  };
  private last: LogCursor | null = null;
  private readonly admits: (cursor: LogCursor) => boolean;

  constructor(
    private readonly emit: (stream: 'stdout' | 'stderr', text: string, cursor: LogCursor) => void,
    after: LogCursor | null = null,
  ) {
    this.admits = linesAfter(after);
  }

  push(chunk: Buffer): void {
    this.pending = this.pending.length === 0 ? chunk : Buffer.concat([this.pending, chunk]);
    let offset = 0;
    while (this.pending.length - offset >= 8) {
      const kind = this.pending[offset]!;
      const size = this.pending.readUInt32BE(offset + 4);
      if (this.pending.length - offset - 8 < size) break;
      const payload = this.pending.subarray(offset + 8, offset + 8 + size);
      offset += 8 + size;
      if (kind === 1 || kind === 2) this.frame(kind === 1 ? 'stdout' : 'stderr', payload);
    }
    this.pending = offset === this.pending.length ? Buffer.alloc(0) : Buffer.from(this.pending.subarray(offset));
  }

  /** Flushes a last line without its newline (a container that exits mid-line). */
  end(): void {
    for (const stream of ['stdout', 'stderr'] as const) {
      const { pieces, cursor } = this.partial[stream];
      if (pieces.length > 0 && cursor) this.line(stream, Buffer.concat(pieces), cursor);
      this.partial[stream] = { pieces: [], cursor: null };
    }
  }

  private frame(stream: 'stdout' | 'stderr', payload: Buffer): void {
    const space = payload.indexOf(0x20);
    if (space < 0) return;
    const ts = payload.subarray(0, space).toString('latin1');
    const body = payload.subarray(space + 1);
    const cursor: LogCursor = this.last && this.last.ts === ts ? { ts, index: this.last.index + 1 } : { ts, index: 0 };
    this.last = cursor;
    if (body.length > 0 && body[body.length - 1] === 0x0a) {
      const parts = this.partial[stream].pieces;
      this.partial[stream] = { pieces: [], cursor: null };
      const whole = parts.length > 0 ? Buffer.concat([...parts, body.subarray(0, -1)]) : body.subarray(0, -1);
      this.line(stream, whole, cursor);
    } else {
      this.partial[stream].pieces.push(Buffer.from(body));
      this.partial[stream].cursor = cursor;
    }
  }

  private line(stream: 'stdout' | 'stderr', bytes: Buffer, cursor: LogCursor): void {
    if (!this.admits(cursor)) return;
    let text = bytes.toString('utf8');
    if (text.endsWith('\r')) text = text.slice(0, -1);
    this.emit(stream, text, cursor);
  }
}
