import { closeSync, openSync, writeSync } from 'node:fs';
import { open, readFile, truncate } from 'node:fs/promises';
import { parseCursor, type LogCursor, type RuntimeLogLine } from './log-lines.js';

/**
 * The job's log artifact, `log.jsonl`: one JSON object per line, `{"ts","stream","line","cursor"}`
 * in the order the sink got them. Each line is written (write(2), no buffering in the process)
 * before the sink sees it, so after the agent process dies the file holds at least every line
 * the link's spool holds, in the same order: line k of the file is the line the sink numbered
 * k (see `cursorAfterLines`). Reopened after a restart, it drops a torn last line and reports
 * the cursor of its last container line so the follower resumes after it.
 */
export class LogFile {
  private fd: number | null;

  private constructor(fd: number) {
    this.fd = fd;
  }

  /** Opens for appending; returns the last container line's cursor already in the file. */
  static async open(path: string): Promise<{ file: LogFile; last: LogCursor | null }> {
    const last = await repairTail(path);
    return { file: new LogFile(openSync(path, 'a', 0o600)), last };
  }

  append(line: RuntimeLogLine): void {
    if (this.fd === null) return;
    writeSync(this.fd, `${JSON.stringify({ ts: line.ts, stream: line.stream, line: line.line, cursor: line.cursor })}\n`);
  }

  async close(): Promise<void> {
    if (this.fd !== null) closeSync(this.fd);
    this.fd = null;
  }
}

/**
 * The cursor of the last container line among the first `count` lines of a log file: where a
 * sink that holds `count` lines (numbered 0…count-1) resumes. Null when none of them is a
 * container line.
 */
export async function cursorAfterLines(path: string, count: number): Promise<string | null> {
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  const lines = text.split('\n');
  for (let i = Math.min(count, lines.length) - 1; i >= 0; i--) {
    try {
      const parsed = JSON.parse(lines[i]!) as { cursor?: string | null };
      if (parsed.cursor) return parsed.cursor;
    } catch {
      // A torn line is not a delivered one.
    }
  }
  return null;
}

/** How many complete lines a log file holds. */
export async function countLines(path: string): Promise<number> {
  try {
    const buf = await readFile(path);
    let n = 0;
    for (let i = buf.indexOf(0x0a); i >= 0; i = buf.indexOf(0x0a, i + 1)) n++;
    return n;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
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
