import { pino, type Logger as PinoLogger } from 'pino';

/** One JSON line of the control plane's log, parsed: pino's `level`, `msg`, and the fields. */
export type LogLine = { level: number; msg: string; err?: { type?: string; message?: string; code?: string } } & Record<string, unknown>;

/** pino's numeric levels. */
export const LEVEL = { debug: 20, info: 30, warn: 40, error: 50, fatal: 60 } as const;

/**
 * A real pino logger writing its lines, parsed, into `lines` (synchronously, as they are
 * written): inject it where the server would pass its logger, then assert the lines' fields.
 */
export function captureLog(level = 'debug'): { log: PinoLogger; lines: LogLine[] } {
  const lines: LogLine[] = [];
  const log = pino({ level, base: null }, { write: (line: string) => void lines.push(JSON.parse(line) as LogLine) });
  return { log, lines };
}
