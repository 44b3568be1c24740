import { pino, type DestinationStream, type Logger as PinoLogger } from 'pino';

/**
 * What a control-plane log line may carry besides its message: who it is about. A request's
 * lines carry `requestId` (fastify binds it to the request's child logger), a background loop's
 * its `loop`, a line about a job its `jobId` (and `assignmentId`, `machineId` when known), a
 * failure its error as `err` (pino's error serializer: type, message, stack, cause).
 */
export interface LogFields {
  requestId?: string;
  loop?: string;
  component?: string;
  jobId?: string;
  machineId?: string;
  assignmentId?: string;
  err?: unknown;
  [field: string]: unknown;
}

/** One level: a message, or fields and a message. */
export interface LogMethod {
  (msg: string): void;
  (fields: LogFields, msg: string): void;
}

/**
 * The control plane's logger port: pino's methods, and children that add fields to every line
 * (fastify's `request.log` is such a child). The server's pino logger, `app.log` and
 * `request.log` all fit it; every part gets one passed in (`log.child({ loop: 'matcher' })`).
 */
export interface Logger {
  debug: LogMethod;
  info: LogMethod;
  warn: LogMethod;
  error: LogMethod;
  fatal: LogMethod;
  child(fields: LogFields): Logger;
}

/**
 * The server's root logger: one JSON object a line on stdout (pino's shape: `level` as a
 * number, `time` in ms, `msg`), at `level`. Fastify is built on it (`loggerInstance`), so
 * request lines and loop lines are the same stream in the same shape.
 */
export function createLogger(options: { level: string; destination?: DestinationStream }): PinoLogger {
  return options.destination ? pino({ level: options.level }, options.destination) : pino({ level: options.level });
}

/** A logger that writes nothing: a part built without one (tests, one-shot commands). */
export const silentLogger: Logger = pino({ enabled: false });
