import { closeSync, openSync, readdirSync, readFileSync, rmSync, statSync, writeSync } from 'node:fs';
import { appendFile, copyFile, open, rename, truncate } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { parseCursor, type LogCursor, type RuntimeLogLine } from '../docker/log-lines.js';

/** Bytes of a job's log kept at each end of its log artifact: the first and the last (`job_log_keep_bytes`). */
export const LOG_KEEP_BYTES = 32 * 1024 * 1024;

/** Room in the server's `LOG_ARTIFACT_MAX_BYTES` beyond both kept ends, for the `system` line about the cut. */
export const LOG_ARTIFACT_MARGIN_BYTES = 1024 * 1024;

/** Each tail segment holds about this share of `keepBytes`: the tail's disk use is at most `keepBytes` plus one segment. */
const SEGMENTS_PER_TAIL = 4;

/** A tail segment on disk: `<log>.<seq of its first line>.<its first byte in the whole log>`. */
interface Segment {
  path: string;
  firstSeq: number;
  offset: number;
  bytes: number;
  lines: number;
}

/**
 * The job's log artifact, `log.jsonl`: one JSON object per line, `{"ts","stream","line","cursor"}`
 * in the order the sink got them. Each line is written (write(2), no buffering in the process)
 * before the sink sees it, so after the agent process dies the files hold at least every line
 * the link's spool holds, in the same order: line k is the line the sink numbered k. Reopened
 * after a restart, it drops a torn last line and reports the cursor of its last container line
 * so the follower resumes after it.
 *
 * A job's log is capped at `keepBytes` at each end, so the artifact always fits the server's
 * `LOG_ARTIFACT_MAX_BYTES` and the disk holds a bounded amount: `log.jsonl` takes the first
 * `keepBytes`, later lines go to tail segments (`log.jsonl.<seq>.<offset>`), and the oldest
 * segment is deleted once the newer ones hold the last `keepBytes`. `writeLogArtifact` joins the
 * head, one `system` line saying what was dropped, and the last `keepBytes` of the tail.
 */
export class LogFile {
  private fd: number | null;

  private constructor(
    private readonly path: string,
    private readonly keepBytes: number,
    private headBytes: number,
    /** The next line's seq and its first byte in the whole log. */
    private seq: number,
    private offset: number,
    private readonly segments: Segment[],
    private current: { fd: number; segment: Segment } | null,
  ) {
    this.fd = segments.length === 0 ? openSync(path, 'a', 0o600) : null;
  }

  /** Opens for appending; returns the last container line's cursor already written. */
  static async open(path: string, keepBytes = LOG_KEEP_BYTES): Promise<{ file: LogFile; last: LogCursor | null }> {
    const segments = tailSegments(path);
    const newest = segments.at(-1);
    // The newest file may hold no container line yet (a segment just begun): look further back.
    let last: LogCursor | null = null;
    for (const file of [...segments.map((seg) => seg.path).reverse(), path]) {
      last = await repairTail(file);
      if (last) break;
    }
    const headBytes = fileBytes(path);
    const headLines = countLinesSync(path);
    for (const s of segments) {
      s.bytes = fileBytes(s.path);
      s.lines = countLinesSync(s.path);
    }
    const seq = newest ? newest.firstSeq + newest.lines : headLines;
    const offset = newest ? newest.offset + newest.bytes : headBytes;
    const current = newest ? { fd: openSync(newest.path, 'a', 0o600), segment: newest } : null;
    return { file: new LogFile(path, keepBytes, headBytes, seq, offset, segments, current), last };
  }

  append(line: RuntimeLogLine): void {
    if (this.fd === null && this.current === null) return;
    const text = `${JSON.stringify({ ts: line.ts, stream: line.stream, line: line.line, cursor: line.cursor })}\n`;
    const bytes = Buffer.byteLength(text);
    // Once a line did not fit, the head is closed for good: the file keeps the lines' order.
    if (this.segments.length === 0 && this.fd !== null && this.headBytes + bytes <= this.keepBytes) {
      writeSync(this.fd, text);
      this.headBytes += bytes;
    } else {
      if (this.fd !== null) {
        closeSync(this.fd);
        this.fd = null;
      }
      const segmentBytes = Math.ceil(this.keepBytes / SEGMENTS_PER_TAIL);
      if (!this.current || (this.current.segment.bytes > 0 && this.current.segment.bytes + bytes > segmentBytes)) this.startSegment();
      const { fd, segment } = this.current!;
      writeSync(fd, text);
      segment.bytes += bytes;
      segment.lines += 1;
      this.dropOldSegments();
    }
    this.seq += 1;
    this.offset += bytes;
  }

  private startSegment(): void {
    if (this.current) closeSync(this.current.fd);
    const segment: Segment = { path: `${this.path}.${this.seq}.${this.offset}`, firstSeq: this.seq, offset: this.offset, bytes: 0, lines: 0 };
    this.segments.push(segment);
    this.current = { fd: openSync(segment.path, 'a', 0o600), segment };
  }

  /** Deletes the oldest segments while the newer ones alone hold the last `keepBytes`. */
  private dropOldSegments(): void {
    let newer = this.segments.reduce((n, s) => n + s.bytes, 0);
    while (this.segments.length > 1 && newer - this.segments[0]!.bytes >= this.keepBytes) {
      const oldest = this.segments.shift()!;
      newer -= oldest.bytes;
      rmSync(oldest.path, { force: true });
    }
  }

  async close(): Promise<void> {
    if (this.fd !== null) closeSync(this.fd);
    if (this.current) closeSync(this.current.fd);
    this.fd = null;
    this.current = null;
  }
}

/** The tail segments of a log file, oldest first (sizes and line counts not read yet). */
function tailSegments(path: string): Segment[] {
  const dir = dirname(path);
  const prefix = `${basename(path)}.`;
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  const segments: Segment[] = [];
  for (const name of names) {
    const m = name.startsWith(prefix) ? /^(\d+)\.(\d+)$/.exec(name.slice(prefix.length)) : null;
    if (m) segments.push({ path: join(dir, name), firstSeq: Number(m[1]), offset: Number(m[2]), bytes: 0, lines: 0 });
  }
  return segments.sort((a, b) => a.firstSeq - b.firstSeq);
}

/**
 * The files of a job's log to replay into a sink after a restart, each with the seq of its
 * first line, in order: the head and every segment while nothing was dropped (from seq 0);
 * once the middle was dropped, the kept segments only, from the first one's seq (the head's
 * lines were sent long before).
 */
export function replayFiles(path: string): Array<{ path: string; firstSeq: number }> {
  const segments = tailSegments(path);
  const headLines = countLinesSync(path);
  if (segments.length > 0 && segments[0]!.firstSeq > headLines) return segments.map((s) => ({ path: s.path, firstSeq: s.firstSeq }));
  return [{ path, firstSeq: 0 }, ...segments.map((s) => ({ path: s.path, firstSeq: s.firstSeq }))];
}

/**
 * Writes the log artifact of a finished job and returns its path: `log.jsonl` itself when
 * nothing went past its head; otherwise `log-artifact.jsonl`: the head, one `system` line saying
 * how many lines and bytes were dropped there (when any were), and the last `keepBytes` of the
 * tail (whole lines). The same files give the same bytes (the line's time is the first kept tail line's),
 * so an upload after a restart sends what the first one sent.
 */
export async function writeLogArtifact(path: string, keepBytes = LOG_KEEP_BYTES): Promise<string> {
  const segments = tailSegments(path);
  if (segments.length === 0) return path;
  const headBytes = fileBytes(path);
  const headLines = countLinesSync(path);
  const texts = segments.map((s) => readFileSync(s.path));
  let tailBytes = texts.reduce((n, b) => n + b.length, 0);
  // Whole lines leave the front of the tail until the rest fits in `keepBytes`.
  let first = 0;
  let start = 0;
  let trimmedLines = 0;
  while (tailBytes > keepBytes && first < texts.length) {
    const text = texts[first]!;
    const nl = text.indexOf(0x0a, start);
    const end = nl < 0 ? text.length : nl + 1;
    tailBytes -= end - start;
    trimmedLines += 1;
    start = end;
    if (start >= text.length) {
      first += 1;
      start = 0;
      trimmedLines = 0;
    }
  }
  const kept = [texts[first]?.subarray(start) ?? Buffer.alloc(0), ...texts.slice(first + 1)];
  const last = segments.at(-1)!;
  // Where the first kept line sits in the whole log: its seq and its first byte.
  const firstKept = segments[first];
  const keptSeq = firstKept ? firstKept.firstSeq + trimmedLines : last.firstSeq + countLinesIn(texts.at(-1)!);
  const keptOffset = firstKept ? firstKept.offset + start : last.offset + texts.at(-1)!.length;
  const droppedLines = keptSeq - headLines;
  const droppedBytes = keptOffset - headBytes;
  const firstLine = kept.find((b) => b.length > 0);
  const ts = firstLine ? (JSON.parse(firstLine.subarray(0, firstLine.indexOf(0x0a)).toString('utf8')) as { ts: number }).ts : 0;
  const note: RuntimeLogLine = {
    stream: 'system',
    line: `log cut: ${droppedLines} lines (${droppedBytes} bytes) were dropped here; the log artifact keeps the first ${headBytes} bytes and the last ${tailBytes} bytes of the job's log (at most ${keepBytes} at each end)`,
    ts,
    cursor: null,
  };
  const out = join(dirname(path), 'log-artifact.jsonl');
  await copyFile(path, `${out}.tmp`);
  // Nothing dropped (the tail still fits): the whole log, line for line, without a note.
  await appendFile(`${out}.tmp`, Buffer.concat([...(droppedLines > 0 ? [Buffer.from(`${JSON.stringify(note)}\n`)] : []), ...kept]));
  await rename(`${out}.tmp`, out);
  return out;
}

const TAIL_BYTES = 256 * 1024;

async function repairTail(path: string): Promise<LogCursor | null> {
  let handle;
  try {
    handle = await open(path, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  try {
    const { size } = await handle.stat();
    const start = Math.max(0, size - TAIL_BYTES);
    const buf = Buffer.alloc(size - start);
    await handle.read(buf, 0, buf.length, start);
    const end = buf.lastIndexOf(0x0a) + 1;
    if (end < buf.length) await truncate(path, start + end);
    const lines = buf.subarray(0, end).toString('utf8').split('\n');
    for (let i = lines.length - 1; i >= 0; i--) {
      const text = lines[i]!;
      if (text === '') continue;
      try {
        const parsed = JSON.parse(text) as { cursor?: string | null };
        if (parsed.cursor) return parseCursor(parsed.cursor);
      } catch {
        // The first line of the window may be cut; older lines do not matter.
      }
    }
    return null;
  } finally {
    await handle.close();
  }
}

function fileBytes(path: string): number {
  try {
    return statSync(path).size;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
}

function countLinesIn(buf: Buffer): number {
  let n = 0;
  for (let i = buf.indexOf(0x0a); i >= 0; i = buf.indexOf(0x0a, i + 1)) n++;
  return n;
}

function countLinesSync(path: string): number {
  try {
    return countLinesIn(readFileSync(path));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
}
