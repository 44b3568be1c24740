import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { AgentLink } from '@gpufarm/agent';
import type { HelloMessage, ServerMessage, WelcomeMessage } from '@gpufarm/shared';
import t, { type Test } from 'tap';
import { notifyAgent } from '../src/dispatch/store.js';
import type { Database } from '../src/db/database.js';
import { DatabaseUnavailableError } from '../src/db/errors.js';
import { createPostgresTestDatabase } from './helpers/database.js';
import { enrollMachine, gfAgent, heartbeat, newEnrollmentToken, hello, insertAssignment, insertJob, startGatewayApp, testInventory } from './helpers/agent-client.js';

/** The real agent's link of `machineToken` to `url`, recording what it gets; stopped at teardown. */
function recordingLink(t: Test, url: string, machineToken: string, running: () => HelloMessage['running']) {
  const welcomes: WelcomeMessage[] = [];
  const messages: ServerMessage[] = [];
  const refused: string[] = [];
  const downs: string[] = [];
  const link = new AgentLink({
    server: url,
    machineToken,
    hello: async () => hello(testInventory(), running()),
    onWelcome: (w) => welcomes.push(w),
    onMessage: (m) => messages.push(m),
    onRefused: (reason) => refused.push(reason),
    onDown: (reason) => downs.push(reason),
    reconnect: { initialMs: 50, maxMs: 200 },
  });
  t.teardown(() => link.stop());
  const acked = () => messages.filter((m) => m.type === 'logs.ack').map((m) => (m as { seq: number }).seq);
  return { link, welcomes, messages, refused, downs, acked };
}

async function until(check: () => boolean, label: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${label}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The real agent's link (agent/src/link/agent-link.ts) against the real gateway. */
t.test('behavior: the agent link of an enrolled machine is welcomed, gets its assignment and its logs acked across a reconnect', async (t) => {
  const { app, db, url } = await startGatewayApp(t);
  const { machineId, machineToken } = await enrollMachine(app, db);
  const jobId = await insertJob(db, 'RUNNING');
  const assignmentId = await insertAssignment(db, { jobId, machineId, state: 'running' });
  let nextSeq = 0;
  const { link, welcomes, messages, refused, acked } = recordingLink(t, url, machineToken, () => [{ assignmentId, jobId, state: 'running', nextLogSeq: nextSeq }]);
  const sendLines = (count: number) => {
    const lines = Array.from({ length: count }, (_, i) => ({ seq: nextSeq + i, stream: 'stdout' as const, atMs: Date.now(), line: `line ${nextSeq + i}` }));
    nextSeq += count;
    return link.send({ type: 'logs', assignmentId, lines });
  };

  link.start();
  await until(() => link.ready, 'welcome');
  t.same(welcomes[0]?.machineId, machineId);
  t.same(welcomes[0]?.acked, [{ assignmentId, seq: null }]);
  t.ok(link.send(heartbeat()), 'heartbeat sent');
  t.ok(sendLines(3));
  await until(() => acked().includes(2), 'ack of seq 2');

  const offered = await insertAssignment(db, { jobId: await insertJob(db), machineId });
  await notifyAgent(db, { machineId, assignmentId: offered, kind: 'assign' });
  await until(() => messages.some((m) => m.type === 'assign' && m.assignment.assignmentId === offered), 'assign');

  link.drop();
  await until(() => link.connections === 2 && link.ready, 'reconnect');
  t.same(welcomes[1]?.acked, [{ assignmentId, seq: 2 }], 'after a reconnect, welcome names the last stored line');
  t.ok(sendLines(2));
  await until(() => acked().includes(4), 'ack of seq 4');
  const stored = await db.query<{ seq: number }>('SELECT seq FROM log_lines WHERE assignment_id = $1 ORDER BY seq', [assignmentId]);
  t.same(stored.map((r) => r.seq), [0, 1, 2, 3, 4]);
  t.same(refused, []);
});

t.test('behavior: a logs batch the database could not store is not acked: the link is closed (4503) and the reconnect welcome names the last stored line, so the agent resends from it', async (t) => {
  const { db: real } = await createPostgresTestDatabase(t);
  // The real database, with the next insert of log lines failing as a dropped connection does.
  let failNextLogInsert = false;
  const db: Database = {
    kind: real.kind,
    query: (sql, params) => {
      if (failNextLogInsert && sql.includes('INSERT INTO log_lines')) {
        failNextLogInsert = false;
        return Promise.reject(new DatabaseUnavailableError(new Error('Connection terminated unexpectedly')));
      }
      return real.query(sql, params);
    },
    exec: (sql) => real.exec(sql),
    transaction: (fn) => real.transaction(fn),
    listen: (channel, onNotify) => real.listen(channel, onNotify),
    close: () => real.close(),
  };
  const { app, url } = await startGatewayApp(t, { db });
  const { machineId, machineToken } = await enrollMachine(app, db);
  const jobId = await insertJob(db, 'RUNNING');
  const assignmentId = await insertAssignment(db, { jobId, machineId, state: 'running' });
  const { link, welcomes, downs, acked } = recordingLink(t, url, machineToken, () => [{ assignmentId, jobId, state: 'running', nextLogSeq: 7 }]);
  const send = (from: number, count: number) =>
    link.send({ type: 'logs', assignmentId, lines: Array.from({ length: count }, (_, i) => ({ seq: from + i, stream: 'stdout' as const, atMs: Date.now(), line: `line ${from + i}` })) });

  link.start();
  await until(() => link.ready, 'welcome');
  t.ok(send(0, 3));
  await until(() => acked().includes(2), 'ack of seq 2');
  failNextLogInsert = true;
  t.ok(send(3, 2), 'lines 3-4: their insert fails');
  t.ok(send(5, 2), 'lines 5-6 right behind them');
  await until(() => link.connections === 2 && link.ready, 'the reconnect');
  t.match(downs[0], /^closed 4503: /, `the control plane closed the link as unavailable: ${downs[0]}`);
  t.same(acked(), [2], 'nothing past the lost batch was acked');
  t.same(welcomes[1]?.acked, [{ assignmentId, seq: 2 }], 'the welcome names the last stored line');
  const stored = await db.query<{ seq: number }>('SELECT seq FROM log_lines WHERE assignment_id = $1 ORDER BY seq', [assignmentId]);
  t.same(stored.map((r) => r.seq), [0, 1, 2], 'no line stored past the gap');
});

t.test('error: the agent link is refused for good with an unknown machine token', async (t) => {
  const { url } = await startGatewayApp(t);
  const refused: string[] = [];
  const link = new AgentLink({
    server: url,
    machineToken: `gfa_${'z'.repeat(43)}`,
    hello: async () => hello(),
    onWelcome: () => {},
    onMessage: () => {},
    onRefused: (reason) => refused.push(reason),
    reconnect: { initialMs: 50, maxMs: 200 },
  });
  t.teardown(() => link.stop());
  link.start();
  const deadline = Date.now() + 10_000;
  while (link.state !== 'refused' && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  t.equal(link.state, 'refused');
  t.match(refused[0], /HTTP 401/);
});


t.test('behavior: gf-agent enroll registers the machine with its simulated GPUs; the spent token is refused', async (t) => {
  const { db, url } = await startGatewayApp(t);
  const stateDir = join(mkdtempSync(join(tmpdir(), 'gf-gateway-enroll-')), 'state');
  t.teardown(() => rmSync(join(stateDir, '..'), { recursive: true, force: true }));
  const env = { GF_AGENT_STATE_DIR: stateDir, GF_AGENT_SIMULATE_GPUS: '2x rtx-4090-24gb' };
  const token = await newEnrollmentToken(db, { farmSlug: 'cli-farm' });
  const res = await gfAgent(['enroll', '--server', url, '--token', token], env);
  t.equal(res.code, 0, res.stderr);
  const saved = JSON.parse(readFileSync(join(stateDir, 'machine.json'), 'utf8')) as { machineId: string; machineToken: string; publicKeyPem: string };
  const [machine] = await db.query<{ simulated: boolean; public_key_pem: string; gpus: number; slug: string }>(
    `SELECT m.simulated, m.public_key_pem, (SELECT count(*)::int FROM machine_gpus g WHERE g.machine_id = m.id) AS gpus, f.slug
       FROM machines m JOIN farms f ON f.id = m.farm_id WHERE m.id = $1`,
    [saved.machineId],
  );
  t.same(machine, { simulated: true, public_key_pem: saved.publicKeyPem, gpus: 2, slug: 'cli-farm' });
  const again = await gfAgent(['enroll', '--server', url, '--token', token, '--force'], env);
  t.equal(again.code, 1);
  t.match(again.stderr, /HTTP 401.*enrollment token is unknown, was already used, or expired/);
});
