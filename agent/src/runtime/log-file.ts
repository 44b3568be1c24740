import { createWriteStream, type WriteStream } from 'node:fs';
import { open, truncate } from 'node:fs/promises';
import { parseCursor, type LogCursor, type RuntimeLogLine } from './log-lines.js';

/**
 * The job's log artifact, `log.jsonl`: one JSON object per line, `{"ts","stream","line","cursor"}`
 * in the order the sink got them. Appends only; reopened after a restart, it drops a torn last
 * line and reports the cursor of its last container line so the follower resumes after it.
 */
export class LogFile {
  private constructor(private readonly out: WriteStream) {}

  /** Opens for appending; returns the last container line's cursor already in the file. */
  static async open(path: string): Promise<{ file: LogFile; last: LogCursor | null }> {
    const last = await repairTail(path);
    return { file: new LogFile(createWriteStream(path, { flags: 'a', mode: 0o600 })), last };
  }

  append(line: RuntimeLogLine): void {
    this.out.write(`${JSON.stringify({ ts: line.ts, stream: line.stream, line: line.line, cursor: line.cursor })}\n`);
  }

  async close(): Promise<void> {
    await new Promise<void>((resolve, reject) => this.out.end((err?: Error | null) => (err ? reject(err) : resolve())));
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
