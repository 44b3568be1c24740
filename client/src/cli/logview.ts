import type { LogLine } from '@gpufarm/shared';
import { terminalSafe } from './terminal-text.js';

/**
 * Prints a log line where the job wrote it: stdout lines to stdout, stderr lines to stderr,
 * the platform's own (system) lines to stderr marked `[system]`. The text is the job's or the
 * machine's: printed as text (`terminalSafe`, whether or not the output is a terminal: a
 * file or a pipe is often shown on one later), one line per log line. With `json`, one JSON
 * object per line on stdout (NDJSON), the line exactly as stored, so a followed stream stays
 * parseable line by line.
 */
export function printLogLine(line: LogLine, json: boolean): void {
  if (json) process.stdout.write(`${JSON.stringify(line)}\n`);
  else if (line.stream === 'stdout') process.stdout.write(`${terminalSafe(line.line)}\n`);
  else process.stderr.write(`${line.stream === 'system' ? '[system] ' : ''}${terminalSafe(line.line)}\n`);
}
