import { request as httpRequest, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { errorEnvelopeSchema, logLineSchema, logListSchema, SERVICE_VERSION, type LogLine } from '@gpufarm/shared';
import t, { type Test } from 'tap';
import { z } from 'zod';
import { appendServiceLine, insertAgentLines } from '../src/logs/store.js';
import type { LogStreamOptions } from '../src/logs/stream.js';
import type { Database } from '../src/db/database.js';
import { bearer, buildTestApp, createOfferedJob, createTestKey, type TestApp } from './helpers/app.js';
import { createPgliteTestDatabase } from './helpers/database.js';

/**
 * `GET /v1/jobs/:id/logs/stream` on a real socket against a real database: lines reach the
 * stream through the NOTIFY the database raises when they are stored.
 */

interface Setup extends TestApp {
  key: string;
  jobId: string;
  base: string;
}

async function setup(t: Test, options: { logStream?: Partial<LogStreamOptions>; db?: Database } = {}): Promise<Setup> {
  const test = await buildTestApp(t, options);
  const { key } = await createTestKey(test.db);
  const jobId = await createOfferedJob(test, key);
  await test.app.listen({ port: 0, host: '127.0.0.1' });
  const { port } = test.app.server.address() as AddressInfo;
  return { ...test, key, jobId, base: `http://127.0.0.1:${port}` };
}

interface SseEvent {
  id: string | null;
  event: string;
  data: string;
}

/** A Server-Sent Events reader over node:http that keeps every event and comment it got. */
class SseClient {
  readonly events: SseEvent[] = [];
  readonly comments: string[] = [];
  ended = false;
  private buffer = '';
  private waiters: Array<() => void> = [];

  private constructor(
    readonly res: IncomingMessage,
    private readonly destroy: () => void,
  ) {
    res.setEncoding('utf8');
    res.on('data', (chunk: string) => {
      this.buffer += chunk;
      let end: number;
      while ((end = this.buffer.indexOf('\n\n')) >= 0) {
        this.parse(this.buffer.slice(0, end));
        this.buffer = this.buffer.slice(end + 2);
      }
      this.notify();
    });
    res.on('end', () => {
      this.ended = true;
      this.notify();
    });
    res.on('error', () => {});
  }

  static open(url: string, headers: Record<string, string>): Promise<SseClient> {
    return new Promise((resolve, reject) => {
      const req = httpRequest(url, { headers: { accept: 'text/event-stream', ...headers } }, (res) => resolve(new SseClient(res, () => req.destroy())));
      req.on('error', reject);
      req.end();
    });
  }

  /** Drops the connection as a network failure would. */
  drop(): void {
    this.destroy();
  }

  get logs(): LogLine[] {
    return this.events.filter((e) => e.event === 'log').map((e) => logLineSchema.parse(JSON.parse(e.data)));
  }

  /** Waits until `done()` holds (checked on every chunk), failing after `ms`. */
  async until(done: () => boolean, what: string, ms = 5_000): Promise<void> {
    const deadline = Date.now() + ms;
    while (!done()) {
      if (this.ended && !done()) throw new Error(`stream ended before ${what}`);
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`${what}: nothing within ${ms} ms; events: ${JSON.stringify(this.events)}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  private notify(): void {
    for (const wake of this.waiters.splice(0)) wake();
  }

  private parse(block: string): void {
    const event: SseEvent = { id: null, event: 'message', data: '' };
    for (const line of block.split('\n')) {
      if (line.startsWith(':')) this.comments.push(line.slice(1).trim());
      else if (line.startsWith('id: ')) event.id = line.slice(4);
      else if (line.startsWith('event: ')) event.event = line.slice(7);
      else if (line.startsWith('data: ')) event.data = line.slice(6);
    }
    if (event.data !== '') this.events.push(event);
  }
}

const agentLines = (from: number, count: number, stream: 'stdout' | 'stderr' = 'stdout') =>
  Array.from({ length: count }, (_, i) => ({ seq: from + i, stream, line: `${stream} line ${from + i}`, atMs: Date.UTC(2026, 10, 22, 12, 0, from + i) }));

const storeLines = (s: Setup, from: number, count: number, stream: 'stdout' | 'stderr' = 'stdout') =>
  insertAgentLines(s.db, { jobId: s.jobId, assignmentId: 'asg_1', lines: agentLines(from, count, stream), capBytes: 1 << 20 });

const streamUrl = (s: Setup, query = '') => `${s.base}/v1/jobs/${s.jobId}/logs/stream${query}`;

async function cancel(s: Setup): Promise<void> {
  const res = await s.app.inject({ method: 'POST', url: `/v1/jobs/${s.jobId}/cancel`, headers: bearer(s.key), payload: {} });
  if (res.statusCode !== 200) throw new Error(`cancel answered ${res.statusCode}: ${res.body}`);
}

async function allLines(s: Setup): Promise<LogLine[]> {
  const res = await s.app.inject({ method: 'GET', url: `/v1/jobs/${s.jobId}/logs?limit=1000`, headers: bearer(s.key) });
  return logListSchema.parse(res.json()).data;
}

const statusEvents = (c: SseClient) => c.events.filter((e) => e.event === 'status').map((e) => z.object({ jobStatus: z.string() }).parse(JSON.parse(e.data)).jobStatus);

t.test('behavior: backfill from cursor 0, then lines live as they are stored, then end when the job is terminal', async (t) => {
  const s = await setup(t);
  await followToEnd(t, s);
});

t.test('behavior: the embedded PGlite database notifies the stream too', async (t) => {
  const s = await setup(t, { db: (await createPgliteTestDatabase(t)).db });
  await followToEnd(t, s);
});

async function followToEnd(t: Test, s: Setup): Promise<void> {
  await appendServiceLine(s.db, s.jobId, 'queued');
  await storeLines(s, 0, 2);

  const client = await SseClient.open(streamUrl(s, '?cursor=0'), bearer(s.key));
  t.equal(client.res.statusCode, 200);
  t.equal(client.res.headers['content-type'], 'text/event-stream; charset=utf-8');
  t.equal(client.res.headers['cache-control'], 'no-store');
  t.equal(client.res.headers['x-accel-buffering'], 'no');
  t.equal(client.res.headers['service-version'], SERVICE_VERSION);
  t.match(client.res.headers['x-request-id'], /^req_/);
  t.ok(client.res.headers['x-ratelimit-remaining'], 'the stream counted against the rate-limit buckets');

  await client.until(() => client.logs.length === 3, 'the backfilled lines');
  t.same(client.events[0], { id: null, event: 'status', data: '{"jobStatus":"CREATED"}' }, 'the first event is the status');
  t.same(client.logs.map((l) => l.line), ['queued', 'stdout line 0', 'stdout line 1']);

  await storeLines(s, 2, 2);
  await client.until(() => client.logs.length === 5, 'the live lines');
  await cancel(s);
  await client.until(() => client.ended, 'the end of the stream');

  const stored = await allLines(s);
  t.same(client.logs, stored, 'exactly the lines GET …/logs returns, in order, each once');
  const logEvents = client.events.filter((e) => e.event === 'log');
  t.same(logEvents.map((e) => e.id), stored.map((l) => String(l.id)), 'each event id is the cursor after its line');
  t.same(statusEvents(client), ['CREATED', 'CANCELED']);
  const end = client.events.at(-1)!;
  t.equal(end.event, 'end');
  t.same(JSON.parse(end.data), { jobStatus: 'CANCELED', nextCursor: String(stored.at(-1)!.id) });
}

t.test('behavior: Last-Event-ID resumes after a dropped connection with no line lost or repeated', async (t) => {
  const s = await setup(t);
  await storeLines(s, 0, 3);
  const first = await SseClient.open(streamUrl(s), bearer(s.key));
  await first.until(() => first.logs.length === 3, 'the first lines');
  first.drop();
  await storeLines(s, 3, 4);

  const lastId = first.events.filter((e) => e.event === 'log').at(-1)!.id!;
  // Last-Event-ID takes precedence over cursor, as a reconnecting EventSource sends both.
  const second = await SseClient.open(streamUrl(s, '?cursor=0'), { ...bearer(s.key), 'last-event-id': lastId });
  await second.until(() => second.logs.length === 4, 'the lines stored while disconnected');
  await storeLines(s, 7, 2);
  await cancel(s);
  await second.until(() => second.ended, 'the end of the stream');

  const seen = [...first.logs, ...second.logs];
  t.same(seen, await allLines(s), 'every line once, in order');
  t.same(statusEvents(second), ['CREATED', 'CANCELED']);
});

t.test('behavior: stream=stderr sends only stderr lines', async (t) => {
  const s = await setup(t);
  await appendServiceLine(s.db, s.jobId, 'pulling');
  await storeLines(s, 0, 2);
  await storeLines(s, 2, 2, 'stderr');
  const client = await SseClient.open(streamUrl(s, '?stream=stderr'), bearer(s.key));
  await client.until(() => client.logs.length === 2, 'the stderr backfill');
  await storeLines(s, 4, 1);
  await storeLines(s, 5, 1, 'stderr');
  await client.until(() => client.logs.length === 3, 'the live stderr line');
  await cancel(s);
  await client.until(() => client.ended, 'the end of the stream');
  t.same(client.logs.map((l) => l.line), ['stderr line 2', 'stderr line 3', 'stderr line 5']);
  t.same(JSON.parse(client.events.at(-1)!.data), { jobStatus: 'CANCELED', nextCursor: String(client.logs.at(-1)!.id) }, 'the end cursor is the last stderr line');
});

t.test('behavior: an idle stream sends a keep-alive comment every heartbeat', async (t) => {
  const s = await setup(t, { logStream: { heartbeatMs: 50, maxPerKey: 5 } });
  const client = await SseClient.open(streamUrl(s), bearer(s.key));
  await client.until(() => client.comments.length >= 2, 'two keep-alive comments', 2_000);
  t.same(client.comments.slice(0, 2), ['keep-alive', 'keep-alive']);
  t.same(statusEvents(client), ['CREATED']);
  client.drop();
});

t.test('behavior: a job already terminal gets its lines and end at once', async (t) => {
  const s = await setup(t);
  await storeLines(s, 0, 2);
  await cancel(s);
  const client = await SseClient.open(streamUrl(s, '?cursor=0'), bearer(s.key));
  await client.until(() => client.ended, 'the end of the stream');
  t.same(client.events.map((e) => e.event), ['status', 'log', 'log', 'end']);
});

t.test('errors: the JSON envelope before the stream starts', async (t) => {
  const s = await setup(t);
  const other = await createTestKey(s.db);
  const expectError = async (res: Response, status: number, code: string) => {
    t.equal(res.status, status, `${code}: status ${status}`);
    t.match(res.headers.get('content-type'), /^application\/json/);
    const body = errorEnvelopeSchema.parse(await res.json());
    t.equal(body.error.code, code);
    t.equal(res.headers.get('x-request-id'), body.error.requestId);
    return body.error;
  };

  await expectError(await fetch(streamUrl(s)), 401, 'missing_api_key');
  const notFound = await expectError(await fetch(streamUrl(s), { headers: bearer(other.key) }), 404, 'not_found');
  t.match(notFound.message, s.jobId);
  const badCursor = await expectError(await fetch(streamUrl(s, '?cursor=abc'), { headers: bearer(s.key) }), 400, 'invalid_request');
  t.same(badCursor.details.map((d) => d.field), ['cursor']);
  const tooLarge = await expectError(await fetch(streamUrl(s, '?cursor=9999999999999999'), { headers: bearer(s.key) }), 400, 'invalid_request');
  t.same(tooLarge.details.map((d) => d.field), ['cursor']);
  const badEventId = await expectError(await fetch(streamUrl(s), { headers: { ...bearer(s.key), 'last-event-id': '-1' } }), 400, 'invalid_request');
  t.same(badEventId.details.map((d) => d.field), ['Last-Event-ID']);
  const badStream = await expectError(await fetch(streamUrl(s, '?stream=stdin'), { headers: bearer(s.key) }), 400, 'invalid_request');
  t.same(badStream.details.map((d) => d.field), ['stream']);
  const head = await fetch(streamUrl(s), { method: 'HEAD', headers: bearer(s.key) });
  t.equal(head.status, 405, 'HEAD opens no stream');
  const readOnly = await createTestKey(s.db, { scopes: ['billing:read'] });
  await expectError(await fetch(streamUrl(s), { headers: bearer(readOnly.key) }), 403, 'insufficient_scope');
});

t.test('limits: a key keeps at most 5 streams open; the 6th gets 429 with Retry-After', async (t) => {
  const s = await setup(t);
  const open = await Promise.all(Array.from({ length: 5 }, () => SseClient.open(streamUrl(s), bearer(s.key))));
  t.same(open.map((c) => c.res.statusCode), [200, 200, 200, 200, 200]);

  const sixth = await fetch(streamUrl(s), { headers: bearer(s.key) });
  t.equal(sixth.status, 429);
  t.equal(sixth.headers.get('retry-after'), '10');
  const body = errorEnvelopeSchema.parse(await sixth.json());
  t.equal(body.error.code, 'rate_limited');
  t.match(body.error.message, /at most 5 open/);

  const other = await createTestKey(s.db);
  const otherJob = await s.app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(other.key), payload: { image: 'ghcr.io/acme/job:1', gpu: { count: 1 } } });
  const otherStream = await SseClient.open(`${s.base}/v1/jobs/${otherJob.json().job.id as string}/logs/stream`, bearer(other.key));
  t.equal(otherStream.res.statusCode, 200, 'another key has its own cap');

  open[0]!.drop();
  const deadline = Date.now() + 5_000;
  let again: SseClient | undefined;
  while (!again && Date.now() < deadline) {
    const next = await SseClient.open(streamUrl(s), bearer(s.key));
    if (next.res.statusCode === 200) again = next;
    else await new Promise((resolve) => setTimeout(resolve, 20));
  }
  t.ok(again, 'a closed stream frees its place');
  for (const c of [...open, otherStream, again]) c?.drop();
});

t.test('behavior: closing the server ends the open streams instead of waiting for them', async (t) => {
  const s = await setup(t);
  const client = await SseClient.open(streamUrl(s), bearer(s.key));
  await client.until(() => client.events.length === 1, 'the status event');
  const started = Date.now();
  await s.app.close();
  t.ok(Date.now() - started < 3_000, 'close did not wait on the stream');
  await client.until(() => client.ended, 'the end of the response', 2_000);
});
