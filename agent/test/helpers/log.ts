import { jsonLogLineSchema, type JsonLogLine } from '@gpufarm/shared';
import { agentLogger, type AgentLog } from '../../src/logger/logger.js';

/** The daemon's real logger (pino), writing its JSON lines into `lines` instead of stdout. */
export function memoryLog(): { log: AgentLog; lines: JsonLogLine[]; messages: () => string[] } {
  const lines: JsonLogLine[] = [];
  const log = agentLogger({ destination: { write: (text: string) => void lines.push(jsonLogLineSchema.parse(JSON.parse(text))) } });
  return { log, lines, messages: () => lines.map((l) => l.msg) };
}
