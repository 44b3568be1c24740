import type { LogLine } from '@gpufarm/shared';

/**
 * Prints a log line where the job wrote it: stdout lines to stdout, stderr lines to stderr,
 * the platform's own (system) lines to stderr marked `[system]`. With `json`, one JSON object
 * per line on stdout (NDJSON), so a followed stream stays parseable line by line.
 */
export function printLogLine(line: LogLine, json: boolean): void {
  if (json) process.stdout.write(`${JSON.stringify(line)}\n`);
  else if (line.stream === 'stdout') process.stdout.write(`${line.line}\n`);
  else process.stderr.write(`${line.stream === 'system' ? '[system] ' : ''}${line.line}\n`);
}
