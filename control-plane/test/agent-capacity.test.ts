import { connect as tcpConnect, type Socket } from 'node:net';
import { AGENT_CLOSE_CODES, AGENT_WS_PATH, errorEnvelopeSchema } from '@gpufarm/shared';
import pg from 'pg';
import t, { type Test } from 'tap';
import { AgentSocket, enrollMachine, hello, startGatewayApp } from './helpers/agent-client.js';
import { bearer, createOfferedJob, createTestKey } from './helpers/app.js';
import { createPostgresTestDatabase } from './helpers/database.js';
import { call, hold, type HeldResponse } from './helpers/sockets.js';

/**
 * Customers cannot take the agents' capacity: a reserved share of the connections, bounded
 * upgrades before the machine token is known, one hello per link, rate limits on the machine
 * token's routes. Real sockets against the real server and gateway.
 */

/** Waits until `check` holds, polling; fails after `ms` naming `what` (a bound, not a timing). */
async function until(check: () => boolean | Promise<boolean>, what: string, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Settles with `promise`, or rejects naming `what` when it did not within `ms`. */
function within<T>(promise: Promise<T>, what: string, ms = 15_000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise.finally(() => clearTimeout(timer)),
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
    }),
  ]);
}

/** A raw upgrade request to the agent path; resolves with the first line of the answer (and the socket). */
function rawUpgrade(url: string, token: string, options: { allowHalfOpen?: boolean } = {}): { socket: Socket; answer: Promise<string> } {
  const { hostname, port } = new URL(url);
  const socket = tcpConnect({ host: hostname, port: Number(port), allowHalfOpen: options.allowHalfOpen ?? false });
  socket.on('error', () => {});
  socket.on('connect', () => {
    socket.write(
      `GET ${AGENT_WS_PATH} HTTP/1.1\r\nHost: ${hostname}:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\nAuthorization: Bearer ${token}\r\n\r\n`,
    );
  });
  const answer = new Promise<string>((resolve) => {
    let text = '';
    socket.on('data', (chunk: Buffer) => {
      text += chunk.toString();
      resolve(text);
    });
    socket.on('close', () => resolve(text));
  });
  return { socket, answer };
}

const UNKNOWN_TOKEN = `gfa_${'x'.repeat(43)}`;

/** A second connection to the test database that takes `machines` for itself: machine token checks wait until it lets go. */
async function lockMachines(t: Test, url: string | null): Promise<{ release(): Promise<void>; waiting(): Promise<number> }> {
  if (!url) throw new Error('the lock needs a PostgreSQL test database');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  await client.query('BEGIN');
  await client.query('LOCK TABLE machines IN ACCESS EXCLUSIVE MODE');
  let released = false;
  const release = async () => {
    if (released) return;
    released = true;
    await client.query('ROLLBACK');
    await client.end();
  };
  t.teardown(release);
  return {
    release,
    // The server's machine token checks waiting on the lock (the offer index may wait on it too).
    // Inside a transaction the statistics are a snapshot taken once: cleared before each look.
    async waiting() {
      await client.query('SELECT pg_stat_clear_snapshot()');
      const { rows } = await client.query<{ n: string }>(
        "SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%token_hash%'",
      );
      return Number(rows[0]!.n);
    },
  };
}

t.test('behavior: with customer connections at their cap, an agent still connects, its link and its HTTP routes work', async (t) => {
  const s = await startGatewayApp(t, { env: { GF_MAX_CONNECTIONS: '8', GF_AGENT_RESERVED_CONNECTIONS: '3', GF_LOG_STREAMS_PER_ACCOUNT: '100' } });
  const { machineToken } = await enrollMachine(s.app, s.db);
  const wallet = `0x${'ab'.repeat(20)}`;
  const keys = await Promise.all([1, 2].map(() => createTestKey(s.db, { walletAddress: wallet })));
  const jobId = await createOfferedJob(s, keys[0]!.key);
  const streams: HeldResponse[] = [];
  t.teardown(() => streams.forEach((r) => r.drop()));

  // As many live log streams as the server takes connections in all (4 per key, under the per-key cap).
  for (let i = 0; i < 8; i++) streams.push(await hold(s.url, `/v1/jobs/${jobId}/logs/stream`, bearer(keys[i % 2]!.key)));
  const statuses = streams.map((r) => r.status);
  t.same(statuses, [200, 200, 200, 200, 200, 503, 503, 503], 'five streams (8 minus the 3 reserved), then 503');
  const refused = streams[5]!;
  t.equal(refused.res.headers['retry-after'], '5');
  t.equal(refused.res.headers.connection, 'close');
  await Promise.all(streams.slice(5).map((r) => within(r.closed, 'a refused connection closed')));
  const connections = () => new Promise<number>((resolve, reject) => s.app.server.getConnections((err, n) => (err ? reject(err) : resolve(n))));
  await until(async () => (await connections()) === 5, "the server's side of the refused connections closed");

  const agent = await AgentSocket.connect(s.url, machineToken);
  t.teardown(() => agent.close());
  agent.send(hello());
  const welcome = await agent.next('welcome');
  t.equal(welcome.type, 'welcome', 'the agent link is up while customers hold their whole share');
  await agent.barrier();
  const machine = await call(s.url, { path: '/agent/v1/machine', headers: { authorization: `Bearer ${machineToken}` } });
  t.equal(machine.status, 200, "the machine's own HTTP route is served from the agents' share");
  await until(() => s.app.connectionBudget.counts().agent === 1, "the machine's call closed");
  t.same(s.app.connectionBudget.counts(), { customer: 5, agent: 1 }, "the link counts in the agents' share");

  const customer = await call(s.url, { path: '/v1/pricing' });
  t.equal(customer.status, 503, 'a customer still finds the customers\' share full');
  t.equal(errorEnvelopeSchema.parse(customer.json()).error.code, 'unavailable');
  const bogus = await call(s.url, { path: '/agent/v1/machine', headers: { authorization: `Bearer ${UNKNOWN_TOKEN}` } });
  t.equal(bogus.status, 503, 'a machine route without a valid token is a customer call');

  streams[0]!.drop();
  await until(() => s.app.connectionBudget.counts().customer === 4, 'the dropped stream leaves the count');
  t.equal((await call(s.url, { path: '/v1/pricing' })).status, 200, 'a freed place serves a customer');
});

t.test('behavior: a second hello on a link closes it with 4400', async (t) => {
  const s = await startGatewayApp(t);
  const { machineToken } = await enrollMachine(s.app, s.db);
  const agent = await AgentSocket.connect(s.url, machineToken);
  t.teardown(() => agent.close());
  agent.send(hello());
  await agent.next('welcome');
  agent.send(hello());
  const closed = await within(agent.closed, 'the link closed');
  t.equal(closed.code, AGENT_CLOSE_CODES.invalidMessage);
  t.match(closed.reason, /^hello: sent twice on one link/);
  t.notOk(agent.received.some((m) => m.type === 'welcome'), 'no second welcome');
});

t.test('behavior: a link that sends no hello is closed at the handshake deadline', async (t) => {
  const s = await startGatewayApp(t, { env: { GF_AGENT_HANDSHAKE_MS: '300' } });
  const { machineToken } = await enrollMachine(s.app, s.db);
  const agent = await AgentSocket.connect(s.url, machineToken);
  const closed = await within(agent.closed, 'the silent link closed');
  t.equal(closed.code, AGENT_CLOSE_CODES.timeout);
  t.match(closed.reason, /no hello within the handshake time/);
});

t.test('limits: upgrades whose machine token is being checked are bounded; past GF_MAX_PENDING_UPGRADES they are refused 503', async (t) => {
  const { db, url: databaseUrl } = await createPostgresTestDatabase(t);
  const s = await startGatewayApp(t, { db, env: { GF_MAX_PENDING_UPGRADES: '2', GF_AGENT_HANDSHAKE_MS: '60000' } });
  const { machineToken } = await enrollMachine(s.app, s.db);
  const lock = await lockMachines(t, databaseUrl);
  const first = rawUpgrade(s.url, UNKNOWN_TOKEN);
  const second = rawUpgrade(s.url, machineToken);
  t.teardown(() => [first, second].forEach((u) => u.socket.destroy()));
  await until(async () => (await lock.waiting()) === 2, 'two token checks waiting on the database');

  const third = rawUpgrade(s.url, machineToken);
  t.teardown(() => third.socket.destroy());
  const answer = await within(third.answer, 'an answer to the third upgrade while two are being checked');
  t.match(answer, /^HTTP\/1\.1 503 Service Unavailable\r\n/);
  t.match(answer, /\r\nRetry-After: 2\r\n/);
  const body = errorEnvelopeSchema.parse(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)));
  t.equal(body.error.code, 'unavailable');
  t.match(body.error.message, /2 agent connections are being set up at once/);

  await lock.release();
  t.match(await within(first.answer, 'the first answer'), /^HTTP\/1\.1 401 /, 'the waiting ones are answered once the database answers');
  t.match(await within(second.answer, 'the second answer'), /^HTTP\/1\.1 101 /);
});

t.test('limits: an upgrade still unauthenticated at GF_AGENT_HANDSHAKE_MS is answered 503 and closed', async (t) => {
  const { db, url: databaseUrl } = await createPostgresTestDatabase(t);
  const s = await startGatewayApp(t, { db, env: { GF_AGENT_HANDSHAKE_MS: '300' } });
  const lock = await lockMachines(t, databaseUrl);
  const idle = rawUpgrade(s.url, UNKNOWN_TOKEN);
  t.teardown(() => idle.socket.destroy());
  const answer = await within(idle.answer, 'an answer while the token check waits');
  t.match(answer, /^HTTP\/1\.1 503 /);
  t.match(answer, /could not be checked within 300 ms/);
  await within(new Promise((resolve) => (idle.socket.destroyed ? resolve(null) : idle.socket.once('close', resolve))), 'the connection closed');
  await lock.release();
});

t.test('limits: a refused upgrade whose client keeps its half open holds no connection', async (t) => {
  const s = await startGatewayApp(t);
  const count = () => new Promise<number>((resolve, reject) => s.app.server.getConnections((err, n) => (err ? reject(err) : resolve(n))));
  const baseline = await count();
  const held = Array.from({ length: 5 }, () => rawUpgrade(s.url, UNKNOWN_TOKEN, { allowHalfOpen: true }));
  t.teardown(() => held.forEach((u) => u.socket.destroy()));
  for (const upgrade of held) t.match(await within(upgrade.answer, 'the refusal'), /^HTTP\/1\.1 401 /);
  await until(async () => (await count()) === baseline, "the server's side of each refused upgrade is closed");
  t.ok(held.every((u) => !u.socket.writableEnded), 'while each client still holds its half open');
});

t.test('limits: machine-token routes are limited per machine (600 a minute), then 429 with Retry-After', async (t) => {
  // 10 s into a 60 s window: pinned, so a window cannot end in the middle of the test.
  const s = await startGatewayApp(t, { rateLimitNow: () => 1_700_000_010_000 });
  const { machineToken } = await enrollMachine(s.app, s.db);
  const other = await enrollMachine(s.app, s.db);
  const get = (token: string) => fetch(`${s.url}/agent/v1/assignments/asg_none/inputs/data`, { headers: { authorization: `Bearer ${token}` } });
  const statuses = new Map<number, number>();
  for (let i = 0; i < 600; i++) {
    const res = await get(machineToken);
    statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    await res.arrayBuffer();
  }
  t.same([...statuses], [[404, 600]], '600 calls answered (no such assignment)');
  const limited = await get(machineToken);
  t.equal(limited.status, 429);
  t.equal(limited.headers.get('retry-after'), '30', 'with Retry-After');
  const body = errorEnvelopeSchema.parse(await limited.json());
  t.equal(body.error.code, 'rate_limited');
  t.match(body.error.message, /the machine limit is 600 per 60 s per machine/);
  t.equal((await get(other.machineToken)).status, 404, 'another machine has its own bucket');
});
