import { request as httpRequest } from 'node:http';
import { connect, createServer, type Socket } from 'node:net';
import { logListSchema, type LogLine } from '@gpufarm/shared';
import t, { type Test } from 'tap';
import { bearer, buildTestApp, createOfferedJob, createTestKey } from '@gpufarm/control-plane/testing/app';
import { insertAgentLines, type LogStreamOptions } from '@gpufarm/control-plane/logs';
import { createClient, type FollowLogsEnd, type RequestEvent } from '../src/index.js';
import { failure, listening } from './helpers/control-plane.js';
import { ADDED_FIELD, frontOf } from './helpers/front.js';

/**
 * `followLogs` against the real control plane and its database: lines are stored as the agent
 * gateway stores them, and reach the stream through the database's NOTIFY.
 */

async function setup(t: Test, options: { logStream?: Partial<LogStreamOptions> } = {}) {
  const s = await listening((env) => buildTestApp(t, { env, ...options }));
  const { key } = await createTestKey(s.db);
  const jobId = await createOfferedJob(s, key);
  const store = (from: number, count: number) =>
    insertAgentLines(s.db, {
      jobId,
      assignmentId: 'asg_1',
      lines: Array.from({ length: count }, (_, i) => ({ seq: from + i, stream: 'stdout' as const, line: `line ${from + i}`, atMs: Date.UTC(2026, 10, 25, 12, 0, 0, from + i) })),
      capBytes: 1 << 24,
    });
  const cancel = async () => {
    const res = await s.app.inject({ method: 'POST', url: `/v1/jobs/${jobId}/cancel`, headers: bearer(key), payload: {} });
    if (res.statusCode !== 200) throw new Error(`cancel answered ${res.statusCode}: ${res.body}`);
  };
  /** Every line of the job as `GET /v1/jobs/:id/logs` pages them: the expected sequence. */
  const allLines = async () => {
    const lines: LogLine[] = [];
    for (let cursor = '0'; ; ) {
      const res = await s.app.inject({ url: `/v1/jobs/${jobId}/logs?limit=1000&cursor=${cursor}`, headers: bearer(key) });
      const page = logListSchema.parse(res.json());
      lines.push(...page.data);
      if (page.data.length === 0) return lines;
      cursor = page.nextCursor;
    }
  };
  return { ...s, key, jobId, store, cancel, allLines };
}

/** Reads a follow to its end: the lines it yielded and what it returned. */
async function drain(follow: AsyncGenerator<LogLine, FollowLogsEnd, undefined>, onLine?: (line: LogLine, index: number) => Promise<void> | void) {
  const lines: LogLine[] = [];
  for (;;) {
    const next = await follow.next();
    if (next.done) return { lines, end: next.value };
    lines.push(next.value);
    await onLine?.(next.value, lines.length);
  }
}

/** A TCP relay in front of the control plane whose open connections `cut()` destroys, as a network failure would. */
async function cuttableRelay(t: Test, target: string) {
  const { port } = new URL(target);
  const sockets = new Set<Socket>();
  const heads: string[] = [];
  const server = createServer((client) => {
    const upstream = connect({ host: '127.0.0.1', port: Number(port) });
    sockets.add(client).add(upstream);
    let first = true;
    client.on('data', (chunk: Buffer) => {
      if (first) heads.push(chunk.toString('latin1'));
      first = false;
    });
    client.pipe(upstream).pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    for (const socket of sockets) socket.destroy();
    server.close();
  });
  return {
    url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
    /** The request heads as the client sent them, one per connection. */
    heads,
    cut: () => {
      for (const socket of sockets) socket.destroy();
    },
  };
}

const streamCalls = (events: RequestEvent[]) => events.filter((e) => new URL(e.url).pathname.endsWith('/logs/stream'));
const pollCalls = (events: RequestEvent[]) => events.filter((e) => new URL(e.url).pathname.endsWith('/logs'));

t.test('behavior: a dropped connection is resumed from the last line with Last-Event-ID, no line lost or repeated', async (t) => {
  const s = await setup(t);
  await s.store(0, 300);
  const relay = await cuttableRelay(t, s.baseUrl);
  const events: RequestEvent[] = [];
  const gf = createClient({ baseUrl: relay.url, apiKey: s.key, onRequest: (e) => events.push(e) });
  let cutAfter: LogLine | null = null;
  const { lines, end } = await drain(gf.followLogs(s.jobId), async (line, count) => {
    if (count !== 50) return;
    cutAfter = line;
    relay.cut();
    // Stored and ended while the follower is cut off: it must still get all of them.
    await s.store(300, 300);
    await s.cancel();
  });
  const expected = await s.allLines();
  t.equal(expected.length, 600 + expected.filter((l) => l.stream === 'system').length, 'the job has the 600 stored lines');
  t.same(lines, expected, 'every line once, in order');
  t.same(end, { jobStatus: 'CANCELED', nextCursor: String(expected.at(-1)!.id) });
  t.ok(streamCalls(events).length >= 2, 'reconnected after the cut');
  t.equal(pollCalls(events).length, 0, 'never fell back to polling');
  const resumed = relay.heads.slice(1).map((head) => /^last-event-id: (\d+)/im.exec(head)?.[1]);
  t.ok(cutAfter, 'the cut happened mid-stream');
  t.ok(Number(resumed[0]) >= cutAfter!.id, `the first reconnection resumed after the lines already yielded (Last-Event-ID ${resumed[0]})`);
  t.ok(Number(resumed[0]) < expected.at(-1)!.id, 'and before the end');
});

t.test('behavior: when the stream answers 404, the follow polls GET /logs and still yields every line', async (t) => {
  const s = await setup(t);
  await s.store(0, 1200);
  const front = await frontOf(t, s.baseUrl, [404]);
  const events: RequestEvent[] = [];
  const gf = createClient({ baseUrl: front.baseUrl, apiKey: s.key, onRequest: (e) => events.push(e) });
  const { lines, end } = await drain(gf.followLogs(s.jobId, { pollIntervalMs: 20 }), async (_line, count) => {
    if (count !== 1100) return;
    await s.store(1200, 10);
    await s.cancel();
  });
  const expected = await s.allLines();
  t.same(lines, expected, 'every line once, in order');
  t.equal(end.jobStatus, 'CANCELED');
  t.equal(end.nextCursor, String(expected.at(-1)!.id));
  t.same(streamCalls(events).map((e) => e.status), [404], 'asked for the stream once');
  t.ok(pollCalls(events).length >= 3, 'then polled pages of the log');
});

t.test('behavior: past the per-key stream cap (429), the follow polls and still yields every line', async (t) => {
  const s = await setup(t, { logStream: { heartbeatMs: 15_000, maxPerKey: 1 } });
  await s.store(0, 20);
  // The key's only stream slot, held open by another reader.
  const held = await new Promise<{ destroy: () => void }>((resolve, reject) => {
    const req = httpRequest(`${s.baseUrl}/v1/jobs/${s.jobId}/logs/stream`, { headers: { ...bearer(s.key), accept: 'text/event-stream' } }, (res) => {
      res.resume();
      resolve({ destroy: () => req.destroy() });
    });
    req.on('error', reject);
    req.end();
  });
  t.teardown(() => held.destroy());
  const events: RequestEvent[] = [];
  const gf = createClient({ baseUrl: s.baseUrl, apiKey: s.key, onRequest: (e) => events.push(e) });
  setTimeout(() => void s.store(20, 5).then(s.cancel), 200);
  const { lines, end } = await drain(gf.followLogs(s.jobId, { pollIntervalMs: 50 }));
  t.same(lines, await s.allLines());
  t.equal(lines.filter((l) => l.stream === 'stdout').length, 25);
  t.equal(end.jobStatus, 'CANCELED');
  t.same(streamCalls(events).map((e) => e.status), [429]);
  t.ok(pollCalls(events).length >= 2, 'polled until the job ended');
});

t.test('behavior: a 503 from the stream is retried on the stream; a 200 that is not an event stream falls back to polling', async (t) => {
  const s = await setup(t);
  await s.store(0, 30);
  await s.cancel();
  const expected = await s.allLines();

  const flaky = await frontOf(t, s.baseUrl, [503]);
  const retried: RequestEvent[] = [];
  const throughFlaky = createClient({ baseUrl: flaky.baseUrl, apiKey: s.key, onRequest: (e) => retried.push(e) });
  t.same((await drain(throughFlaky.followLogs(s.jobId))).lines, expected);
  t.same(streamCalls(retried).map((e) => e.status), [503, 200], 'the stream again after the 503');
  t.equal(pollCalls(retried).length, 0);

  const notStream = await frontOf(t, s.baseUrl, [200]);
  const polled: RequestEvent[] = [];
  const throughNotStream = createClient({ baseUrl: notStream.baseUrl, apiKey: s.key, onRequest: (e) => polled.push(e) });
  const { lines, end } = await drain(throughNotStream.followLogs(s.jobId));
  t.same(lines, expected);
  t.equal(end.jobStatus, 'CANCELED');
  t.same(streamCalls(polled).map((e) => e.status), [200]);
  t.equal(pollCalls(polled).length, 1, 'one page: the job is final and the page short');
});

t.test('behavior: stream events and log pages with fields this client does not know, as a newer server may send, are read without them', async (t) => {
  const s = await setup(t);
  await s.store(0, 30);
  await s.cancel();
  const expected = await s.allLines();
  const newer = await frontOf(t, s.baseUrl, [], {}, 'forward-as-newer');
  const events: RequestEvent[] = [];
  const gf = createClient({ baseUrl: newer.baseUrl, apiKey: s.key, onRequest: (e) => events.push(e) });
  const streamed = await drain(gf.followLogs(s.jobId));
  t.same(streamed.lines, expected, 'every line from the stream');
  t.notOk(JSON.stringify(streamed).includes(ADDED_FIELD), 'without the added fields');
  t.equal(streamed.end.jobStatus, 'CANCELED', 'the end event read');
  t.same(streamCalls(events).map((e) => e.status), [200], 'one stream, not given up for polling');

  const notStream = await frontOf(t, s.baseUrl, [200], {}, 'forward-as-newer');
  const polled: RequestEvent[] = [];
  const throughPolls = createClient({ baseUrl: notStream.baseUrl, apiKey: s.key, onRequest: (e) => polled.push(e) });
  const paged = await drain(throughPolls.followLogs(s.jobId));
  t.same(paged.lines, expected, 'every line from the pages');
  t.notOk(JSON.stringify(paged).includes(ADDED_FIELD), 'without the added fields');
  t.equal(pollCalls(polled).length, 1, 'one page');
});

t.test('behavior: a cursor starts after that line; stream filters', async (t) => {
  const s = await setup(t);
  await s.store(0, 10);
  await s.cancel();
  const gf = createClient({ baseUrl: s.baseUrl, apiKey: s.key });
  const expected = (await s.allLines()).filter((l) => l.stream === 'stdout');
  const { lines } = await drain(gf.followLogs(s.jobId, { stream: 'stdout', cursor: String(expected[3]!.id) }));
  t.same(lines, expected.slice(4));
});

t.test('error: an aborted signal ends the follow with its reason; a bad key is not retried', async (t) => {
  const s = await setup(t);
  await s.store(0, 5);
  const gf = createClient({ baseUrl: s.baseUrl, apiKey: s.key });
  const controller = new AbortController();
  const reason = new Error('stopped by the caller');
  const follow = drain(gf.followLogs(s.jobId, { signal: controller.signal }), (_line, count) => {
    if (count === 5) setTimeout(() => controller.abort(reason), 50);
  });
  await t.rejects(follow, reason);
  const events: RequestEvent[] = [];
  const stranger = createClient({ baseUrl: s.baseUrl, apiKey: `${s.key.slice(0, -4)}zzzz`, onRequest: (e) => events.push(e) });
  const error = await failure(drain(stranger.followLogs(s.jobId)));
  t.equal(error.code, 'invalid_api_key');
  t.equal(events.length, 1, 'one call: a refused key is final');
  // Node's fetch opens a fresh idle socket after an aborted body; the server would wait out its timeout for it.
  s.app.server.closeAllConnections();
});

