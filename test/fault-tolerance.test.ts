import { openPostgres } from '@gpufarm/control-plane/db';
import t from 'tap';
import { Marketplace } from './helpers/marketplace.js';
import { until } from './helpers/wait.js';

/**
 * A control plane process whose database loses tables under it: the failing request answers
 * the envelope and is logged with its request id, every background loop logs its failures and
 * backs off, recovers once the tables are back, and the process never stops serving.
 */

interface LogLine {
  level: number;
  msg: string;
  requestId?: string;
  clientRequestId?: string;
  loop?: string;
  failures?: number;
  retryInMs?: number;
  err?: { message?: string };
}

function logLines(output: string): LogLine[] {
  return output.split('\n').flatMap((line) => {
    if (!line.startsWith('{')) return [];
    try {
      return [JSON.parse(line) as LogLine];
    } catch {
      return [];
    }
  });
}

/** The waits a loop announced after its first and second failure in a row (fields `loop`, `failures`, `retryInMs`, `err`). */
function backoffOf(lines: LogLine[], loop: string): number[] {
  const waits: number[] = [];
  for (const n of [1, 2]) {
    const line = lines.find((l) => l.loop === loop && l.failures === n && l.err !== undefined);
    if (line?.retryInMs !== undefined) waits.push(line.retryInMs);
  }
  return waits;
}

const LOOPS = ['matcher', 'execution worker', 'agent gateway liveness sweep', 'escrow worker'];

t.test('behavior: a failing request and failing loops are logged with their ids, loops back off and recover, the process stays up', async (t) => {
  const market = await Marketplace.start(t);
  const key = await market.createApiKey(market.wallet(1).account.address);
  const db = openPostgres(market.databaseUrl, { max: 1 });
  t.teardown(() => db.close());

  await db.query('ALTER TABLE billing_entries RENAME TO billing_entries_away');
  const failed = await fetch(`${market.url}/v1/billing`, { headers: { authorization: `Bearer ${key}`, 'x-request-id': 'client-trace-7' } });
  t.equal(failed.status, 500);
  const envelope = (await failed.json()) as { error: { code: string; message: string; requestId: string } };
  t.equal(envelope.error.code, 'internal');
  t.notMatch(envelope.error.message, /billing_entries|at \w+ \(/, 'no SQL or stack trace reaches the client');
  t.equal(failed.headers.get('x-request-id'), 'client-trace-7', "the client's id is echoed");
  const logged = await until(
    () => logLines(market.controlPlane.output()).find((l) => l.requestId === envelope.error.requestId && l.level >= 50),
    'the failed request in the log',
    { timeoutMs: 10_000 },
  );
  t.equal(logged.clientRequestId, 'client-trace-7', "the log line carries the server's id and the client's");
  t.match(logged.err?.message ?? '', /billing_entries/, 'with the cause');
  await db.query('ALTER TABLE billing_entries_away RENAME TO billing_entries');
  t.equal((await fetch(`${market.url}/v1/billing`, { headers: { authorization: `Bearer ${key}` } })).status, 200, 'the next request is served');

  await db.query('ALTER TABLE jobs RENAME TO jobs_away');
  await db.query('ALTER TABLE assignments RENAME TO assignments_away');
  await until(() => LOOPS.every((loop) => backoffOf(logLines(market.controlPlane.output()), loop).length === 2), 'every loop failing twice', {
    timeoutMs: 60_000,
    describe: () => market.controlPlane.tail(20),
  });
  const lines = logLines(market.controlPlane.output());
  for (const loop of LOOPS) {
    const [first, second] = backoffOf(lines, loop);
    t.equal(second, first! * 2, `${loop}: the wait doubles after a second failure (${first} ms, then ${second} ms)`);
  }
  t.equal((await fetch(`${market.url}/v1`)).status, 200, 'the process serves while its loops fail');

  await db.query('ALTER TABLE jobs_away RENAME TO jobs');
  await db.query('ALTER TABLE assignments_away RENAME TO assignments');
  await until(() => LOOPS.every((loop) => logLines(market.controlPlane.output()).some((l) => l.loop === loop && l.msg.startsWith(`${loop} recovered after `))), 'every loop recovering', {
    timeoutMs: 120_000,
    describe: () => market.controlPlane.tail(20),
  });
  t.ok(market.controlPlane.running(), 'the control plane never exited');
});
