import { z } from 'zod';

/**
 * One line of a pino log, the shape the control plane and `gf-agent run` write: `level` as pino's
 * number, `time` in ms since the epoch, `msg`, and any fields (`machineId`, `jobId`, `reqId`…).
 */
export const jsonLogLineSchema = z.looseObject({
  level: z.int(),
  time: z.number(),
  msg: z.string(),
});
export type JsonLogLine = z.infer<typeof jsonLogLineSchema>;

/** pino's level numbers by name. */
export const LOG_LEVELS = { trace: 10, debug: 20, info: 30, warn: 40, error: 50, fatal: 60 } as const;

/** The line as a pino log line, or null when it is not one (a runtime's warning, a blank line). */
export function parseJsonLogLine(line: string): JsonLogLine | null {
  if (!line.startsWith('{')) return null;
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return null;
  }
  const parsed = jsonLogLineSchema.safeParse(value);
  return parsed.success ? parsed.data : null;
}

/** The pino lines of a process's output, in order; other lines are left out. */
export function jsonLogLines(output: string): JsonLogLine[] {
  return output.split('\n').flatMap((line) => {
    const parsed = parseJsonLogLine(line.replace(/\r$/, ''));
    return parsed ? [parsed] : [];
  });
}

const LEVEL_NAMES = new Map<number, string>(Object.entries(LOG_LEVELS).map(([name, value]) => [value, name.toUpperCase()]));
const SHOWN_ELSEWHERE = new Set(['level', 'time', 'msg', 'pid', 'hostname']);

/**
 * A log line for a person (`npm start` shows its agents' lines so):
 *
 * @example formatJsonLogLine({ level: 40, time: 0, msg: 'link down', machineId: 'm_1' }) // '1970-01-01T00:00:00.000Z WARN link down (machineId=m_1)'
 */
export function formatJsonLogLine(line: JsonLogLine): string {
  const level = LEVEL_NAMES.get(line.level) ?? `LEVEL${line.level}`;
  const fields = Object.entries(line)
    .filter(([key]) => !SHOWN_ELSEWHERE.has(key))
    .map(([key, value]) => `${key}=${typeof value === 'string' ? value : JSON.stringify(value)}`);
  return `${new Date(line.time).toISOString()} ${level === 'INFO' ? '' : `${level} `}${line.msg}${fields.length > 0 ? ` (${fields.join(', ')})` : ''}`;
}
