import t from 'tap';
import { formatJsonLogLine, jsonLogLines, LOG_LEVELS, parseJsonLogLine } from '../src/process/json-log.js';

t.test('default: a pino line parses with its fields; anything else is no log line', async (t) => {
  const line = '{"level":40,"time":1764400000123,"machineId":"m_1","jobId":"job_1","msg":"link down"}';
  t.same(parseJsonLogLine(line), { level: 40, time: 1764400000123, machineId: 'm_1', jobId: 'job_1', msg: 'link down' });
  for (const other of ['', '2026-11-29T09:00:00.000Z link up: machine m_1', '{"level":30', '{"msg":"no level"}', '[1,2]']) {
    t.equal(parseJsonLogLine(other), null, JSON.stringify(other));
  }
});

t.test('behavior: a process\'s output gives its pino lines in order, without the others', async (t) => {
  const output = '{"level":30,"time":1,"msg":"a"}\r\n(node:1) ExperimentalWarning: something\n{"level":50,"time":2,"msg":"b"}\n{"level":30,"time":3';
  t.same(jsonLogLines(output).map((l) => [l.level, l.msg]), [[LOG_LEVELS.info, 'a'], [LOG_LEVELS.error, 'b']]);
});

t.test('behavior: a line for a person shows the time, a level above info, the message and the fields', async (t) => {
  t.equal(formatJsonLogLine({ level: 30, time: 0, msg: 'link up: machine m_1', machineId: 'm_1', pid: 7 }), '1970-01-01T00:00:00.000Z link up: machine m_1 (machineId=m_1)');
  t.equal(formatJsonLogLine({ level: 40, time: 0, msg: 'cancel', jobId: 'job_1', n: 2 }), '1970-01-01T00:00:00.000Z WARN cancel (jobId=job_1, n=2)');
  t.equal(formatJsonLogLine({ level: 35, time: 0, msg: 'odd' }), '1970-01-01T00:00:00.000Z LEVEL35 odd');
});
