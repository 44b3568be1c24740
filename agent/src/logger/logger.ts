import { pino, type DestinationStream } from 'pino';

/**
 * What a daemon log line may carry besides its message: who it is about. A line about a job
 * carries `jobId` and `assignmentId`, every line of `gf-agent run` its `machineId` (bound once
 * at start, as fastify binds `reqId` to a request's child logger).
 */
export interface LogFields {
  machineId?: string;
  jobId?: string;
  assignmentId?: string;
  challengeId?: string;
  [field: string]: unknown;
}

/** The daemon's logger: a message at a level, with fields, and children that add fields to every line. */
export interface AgentLog {
  info(msg: string): void;
  info(fields: LogFields, msg: string): void;
  warn(msg: string): void;
  warn(fields: LogFields, msg: string): void;
  error(msg: string): void;
  error(fields: LogFields, msg: string): void;
  /** The daemon cannot go on: the last line before it exits. */
  fatal(msg: string): void;
  fatal(fields: LogFields, msg: string): void;
  child(fields: LogFields): AgentLog;
}

/**
 * The logger of `gf-agent run`: one JSON object a line (pino's, the control plane's shape:
 * `level` as a number, `time` in ms, `msg`), written synchronously to `destination` (default
 * stdout), which journald keeps as one entry a line. `journalctl -u gf-agent -o cat | jq` reads it.
 */
export function agentLogger(options: { destination?: DestinationStream; level?: string } = {}): AgentLog {
  return pino(
    {
      level: options.level ?? 'info',
      // journald records the pid and the host of every entry; the lines need not repeat them.
      base: null,
    },
    options.destination ?? pino.destination({ dest: 1, sync: true }),
  );
}

/** A logger that writes nothing (a part built without one: tests, one-shot commands). */
export const silentLog: AgentLog = pino({ enabled: false });

/** The fields of a job's lines, for `log.child(jobFields(spec))`. */
export function jobFields(spec: { jobId: string; assignmentId: string }): LogFields {
  return { jobId: spec.jobId, assignmentId: spec.assignmentId };
}
