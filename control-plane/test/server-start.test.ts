import { createHook } from 'node:async_hooks';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { loadConfig } from '../src/config.js';
import { migrate } from '../src/db/migrate.js';
import { startControlPlane } from '../src/server.js';
import { createTestKey } from './helpers/app.js';
import { createPostgresTestDatabase } from './helpers/database.js';
import { captureLog, LEVEL } from './helpers/logger.js';
import { s3rverObjectPath, startS3rver } from './helpers/s3rver.js';

/** Where a timer was started: the first frame outside node and node_modules. */
const startedAt = (stack: string) =>
  stack.split('\n').slice(2).find((line) => !/\(node:|node_modules|server-start\.test/.test(line))?.trim() ?? stack;

/** Records the timers started from now on; `stillRunning` stops recording and names those not cleared. */
function trackTimers(t: { teardown(fn: () => void): void }) {
  const live = new Map<number, string>();
  let tracking = true;
  const hook = createHook({
    init(asyncId, type) {
      if (tracking && type === 'Timeout') live.set(asyncId, startedAt(new Error().stack ?? ''));
    },
    destroy(asyncId) {
      live.delete(asyncId);
    },
  }).enable();
  t.teardown(() => hook.disable());
  return {
    async stillRunning(): Promise<string[]> {
      tracking = false;
      // Destroy hooks are delivered asynchronously after a timer is cleared.
      await new Promise((resolve) => setTimeout(resolve, 500));
      return [...live.values()];
    },
  };
}

async function listening(): Promise<{ server: Server; port: number }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, port: (server.address() as { port: number }).port };
}

t.test('error: a start that fails after the offer index, chain health and workers opened leaves no timer running', async (t) => {
  const { url } = await createPostgresTestDatabase(t);
  const taken = await listening();
  t.teardown(() => new Promise((resolve) => taken.server.close(resolve)));
  const deadRpc = await listening();
  await new Promise((resolve) => deadRpc.server.close(resolve));
  const dir = mkdtempSync(join(tmpdir(), 'gf-start-fail-'));
  const config = loadConfig({
    DATABASE_URL: url!,
    PORT: String(taken.port),
    GF_DATA_DIR: dir,
    GF_RPC_URL: `http://127.0.0.1:${deadRpc.port}/`,
    GF_ESCROW_ADDRESS: '0x5fbdb2315678afecb367f032d93f642f64180aa3',
  });

  const timers = trackTimers(t);
  await t.rejects(startControlPlane(config, { logger: false }), { code: 'EADDRINUSE' }, 'the port is taken: listen fails last');
  t.same(await timers.stillRunning(), [], 'every timer the start opened was cleared');
});

t.test('default: close() stops everything the start opened', async (t) => {
  const { url } = await createPostgresTestDatabase(t);
  const config = loadConfig({ DATABASE_URL: url!, PORT: '0', GF_DATA_DIR: mkdtempSync(join(tmpdir(), 'gf-start-close-')) });
  const timers = trackTimers(t);
  const controlPlane = await startControlPlane(config, { logger: false });
  t.match(controlPlane.url, /^http:\/\/127\.0\.0\.1:\d+$/);
  await controlPlane.close();
  t.same(await timers.stillRunning(), [], 'every timer the start opened was cleared');
});

t.test('s3: GF_ARTIFACT_STORE=s3 stores uploads in the bucket and redirects downloads to it; close() stops everything', async (t) => {
  const { url, db } = await createPostgresTestDatabase(t);
  const s3 = await startS3rver(t);
  const config = loadConfig({ DATABASE_URL: url!, PORT: '0', GF_DATA_DIR: mkdtempSync(join(tmpdir(), 'gf-start-s3-')), ...s3.env });
  // The key is made before the timers are watched: the test's own pool keeps an idle timer.
  await migrate(db);
  const { key } = await createTestKey(db);
  const timers = trackTimers(t);
  const controlPlane = await startControlPlane(config, { logger: false });
  const bytes = Buffer.from('an input kept in the bucket');
  const uploaded = await fetch(`${controlPlane.url}/v1/artifacts`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/octet-stream' }, body: bytes });
  t.equal(uploaded.status, 201);
  const { id, sha256 } = (await uploaded.json()) as { id: string; sha256: string };
  t.equal(sha256, createHash('sha256').update(bytes).digest('hex'));
  t.equal(readFileSync(s3rverObjectPath(s3, `blobs/${sha256}`)).toString(), bytes.toString(), 's3rver holds the bytes');
  const redirect = await fetch(`${controlPlane.url}/v1/artifacts/${id}`, { headers: { authorization: `Bearer ${key}` }, redirect: 'manual' });
  t.equal(redirect.status, 302);
  t.ok(redirect.headers.get('location')!.startsWith(`${s3.endpoint}/${s3.bucket}/blobs/${sha256}?`), 'a presigned GET of the bucket');
  await controlPlane.close();
  // Serving a request starts node's own Date-header cache timer (unref'd, gone within a second).
  await new Promise((resolve) => setTimeout(resolve, 1100));
  t.same(await timers.stillRunning(), [], 'every timer the start opened was cleared');
});

t.test('behavior: a start that waits long logs which step it waits on', async (t) => {
  const { url } = await createPostgresTestDatabase(t);
  // An RPC that takes connections and never answers: the start waits at the chain.
  const silent = await listening();
  const sockets = new Set<Socket>();
  silent.server.on('connection', (socket) => sockets.add(socket));
  t.teardown(() => new Promise((resolve) => silent.server.close(resolve)));
  const config = loadConfig({
    DATABASE_URL: url!,
    PORT: '0',
    GF_DATA_DIR: mkdtempSync(join(tmpdir(), 'gf-start-slow-')),
    GF_RPC_URL: `http://127.0.0.1:${silent.port}/`,
    GF_ESCROW_ADDRESS: '0x5fbdb2315678afecb367f032d93f642f64180aa3',
  });
  const { log, lines } = captureLog();
  const starting = startControlPlane(config, { logger: log, slowStartMs: 200 });
  const waiting = () => lines.filter((l) => l.component === 'start');
  const deadline = Date.now() + 30_000;
  while (!waiting().some((l) => l.step === "reaching the chain's RPC") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
  t.match(
    waiting().find((l) => l.step === "reaching the chain's RPC"),
    { level: LEVEL.warn, step: "reaching the chain's RPC", waitedS: Number, msg: /^gpufarm control plane: starting, still reaching the chain's RPC after \d+ s$/ },
    'it names the step, as a field',
  );
  for (const socket of sockets) socket.destroy();
  const controlPlane = await starting;
  const count = waiting().length;
  await new Promise((r) => setTimeout(r, 500));
  t.equal(waiting().length, count, 'and stops saying so once it listens');
  // The request lines go to the same logger, with the id the error envelope names as `requestId`.
  const res = await fetch(`${controlPlane.url}/v1/jobs/job_none`);
  const { error } = (await res.json()) as { error: { requestId: string } };
  t.match(
    lines.find((l) => l.requestId === error.requestId && l.msg === 'request completed'),
    { level: LEVEL.info, requestId: error.requestId, res: { statusCode: 401 } },
    "a request's lines carry requestId, not fastify's reqId",
  );
  t.notOk(lines.some((l) => 'reqId' in l), 'no line says reqId');
  await controlPlane.close();
});
