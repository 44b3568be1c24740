import { randomBytes } from 'node:crypto';
import { readdirSync } from 'node:fs';
import net from 'node:net';
import { join } from 'node:path';
import { SERVICE_VERSION, errorEnvelopeSchema } from '@gpufarm/shared';
import t, { type Test } from 'tap';
import { bearer } from './helpers/app.js';
import { assertError } from './helpers/assert.js';
import { artifactSetup, type ArtifactSetup } from './helpers/uploads.js';

/**
 * Slow and greedy clients through real sockets: a trickled body or head is cut with a 408
 * envelope, connections past the cap are refused, a URL the router refuses and a body with a
 * prototype key get the envelope, input uploads have a quota and a bucket of their own.
 */

/** What a raw socket received until the server closed it (or `waitMs` passed). */
interface RawAnswer {
  text: string;
  closedAfterMs: number | null;
}

function rawAnswer(socket: net.Socket, waitMs: number): Promise<RawAnswer> {
  const started = Date.now();
  return new Promise((resolve) => {
    let text = '';
    socket.on('data', (chunk: Buffer) => (text += chunk.toString()));
    const timer = setTimeout(() => {
      socket.destroy();
      resolve({ text, closedAfterMs: null });
    }, waitMs);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ text, closedAfterMs: Date.now() - started });
    });
  });
}

/** Status, headers (lower-cased) and JSON body of a raw HTTP/1.1 answer. */
function parseAnswer(text: string): { status: number; headers: Map<string, string>; body: unknown } {
  const [head = '', body = ''] = text.split('\r\n\r\n');
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers = new Map(lines.map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()] as const));
  return { status: Number(statusLine.split(' ')[1]), headers, body: body ? JSON.parse(body) : null };
}

async function connect(port: number): Promise<net.Socket> {
  const socket = net.connect({ host: '127.0.0.1', port });
  socket.on('error', () => undefined);
  await new Promise<void>((resolve) => socket.once('connect', resolve));
  return socket;
}

/** Writes `head` at once, then the body one byte every `everyMs` until the socket closes. */
async function trickle(s: ArtifactSetup & { port: number }, head: string, body: Buffer, everyMs: number): Promise<RawAnswer> {
  const socket = await connect(s.port);
  socket.write(head);
  let i = 0;
  const timer = setInterval(() => {
    if (i < body.length && !socket.destroyed) socket.write(body.subarray(i, ++i));
  }, everyMs);
  const answer = await rawAnswer(socket, 30_000);
  clearInterval(timer);
  return answer;
}

async function listening(t: Parameters<typeof artifactSetup>[0], env: Record<string, string> = {}): Promise<ArtifactSetup & { port: number }> {
  const s = await artifactSetup(t, env);
  await s.app.listen({ port: 0, host: '127.0.0.1' });
  return { ...s, port: (s.app.server.address() as net.AddressInfo).port };
}

function assertTimeoutEnvelope(t: Test, answer: RawAnswer, what: string): void {
  t.not(answer.closedAfterMs, null, `${what}: the server closed the connection within 30 s`);
  const { status, headers, body } = parseAnswer(answer.text);
  t.equal(status, 408, `${what}: 408`);
  const envelope = errorEnvelopeSchema.parse(body);
  t.equal(envelope.error.code, 'request_timeout', `${what}: the envelope's code`);
  t.equal(headers.get('x-request-id'), envelope.error.requestId, `${what}: X-Request-Id`);
  t.equal(headers.get('service-version'), SERVICE_VERSION, `${what}: Service-Version`);
  t.equal(headers.get('connection'), 'close', `${what}: the connection closes`);
}

t.test('error: request_timeout for a JSON body or an upload arriving one byte every 10 s, cut within 30 s', async (t) => {
  const s = await listening(t);
  const job = Buffer.from(JSON.stringify({ image: 'ghcr.io/acme/job:1', gpu: { count: 1 } }));
  const [json, upload] = await Promise.all([
    trickle(s, `POST /v1/jobs HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${s.key}\r\nContent-Type: application/json\r\nContent-Length: ${job.length}\r\n\r\n`, job, 10_000),
    trickle(s, `POST /v1/artifacts HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${s.key}\r\nContent-Type: application/octet-stream\r\nContent-Length: 4096\r\n\r\n`, randomBytes(4096), 10_000),
  ]);
  assertTimeoutEnvelope(t, json, 'POST /v1/jobs');
  assertTimeoutEnvelope(t, upload, 'POST /v1/artifacts');
  t.same(readdirSync(join(s.dir, 'tmp')), [], 'the cut upload left no temp file');
  const [rows] = await s.db.query<{ n: number }>('SELECT count(*)::int AS n FROM artifacts');
  t.equal(rows!.n, 0, 'and no artifact row');
  t.equal((await fetch(`http://127.0.0.1:${s.port}/v1`)).status, 200, 'the server answers the next client');
});

t.test('error: request_timeout for a request head that does not arrive in time', async (t) => {
  const s = await listening(t, { GF_HEADERS_TIMEOUT_MS: '2000' });
  const answer = await trickle(s, 'GET /v1 HTTP/1.1\r\n', Buffer.from('Host: x\r\nAccept: */*\r\n\r\n'), 2_000);
  assertTimeoutEnvelope(t, answer, 'a slow head');
});

t.test('behavior: connections past GF_MAX_CONNECTIONS are closed at once; one freed serves the next', async (t) => {
  const s = await listening(t, { GF_MAX_CONNECTIONS: '3' });
  const held = await Promise.all([1, 2, 3].map(() => connect(s.port)));
  const extra = await connect(s.port);
  const refused = await rawAnswer(extra, 5_000);
  t.not(refused.closedAfterMs, null, 'the fourth connection is closed');
  t.equal(refused.text, '', 'without an answer');
  held[0]!.destroy();
  await new Promise((resolve) => setTimeout(resolve, 100));
  t.equal((await fetch(`http://127.0.0.1:${s.port}/v1`)).status, 200, 'a freed slot serves a new client');
  for (const socket of held) socket.destroy();
});

t.test('error: a path parameter over the limit gets the envelope with the usual headers', async (t) => {
  const s = await artifactSetup(t);
  const res = await s.app.inject({ url: `/v1/jobs/job_${'a'.repeat(200)}`, headers: bearer(s.key) });
  assertError(t, res, 'invalid_request', 400);
  t.match(res.json().error.message, /longer than 128 characters/);
  t.equal(res.headers['x-request-id'], res.json().error.requestId);
  t.equal(res.headers['service-version'], SERVICE_VERSION);
});

t.test('error: validation_error, not invalid_json, for a valid body with a prototype key, naming the field', async (t) => {
  const s = await artifactSetup(t);
  const post = (payload: string) => s.app.inject({ method: 'POST', url: '/v1/jobs', headers: { ...bearer(s.key), 'content-type': 'application/json' }, payload });
  for (const [payload, field] of [
    ['{"__proto__": {"admin": true}, "image": "ghcr.io/acme/job:1", "gpu": {"count": 1}}', '__proto__'],
    ['{"image": "ghcr.io/acme/job:1", "gpu": {"count": 1}, "env": {"__proto__": "x"}}', 'env.__proto__'],
    ['{"image": "ghcr.io/acme/job:1", "gpu": {"count": 1}, "outputRules": [{"constructor": {"prototype": {}}}]}', 'outputRules[0].constructor.prototype'],
  ] as const) {
    const res = await post(payload);
    assertError(t, res, 'validation_error', 422);
    t.same(res.json().error.details.map((d: { field: string }) => d.field), [field], `names ${field}`);
  }
  assertError(t, await post('{"image": '), 'invalid_json', 400);
  assertError(t, await post(''), 'invalid_json', 400);
  t.equal(({} as { admin?: boolean }).admin, undefined, 'no prototype was touched');
});

t.test('error: input uploads past the account quota are 413 naming it; past their bucket 429', async (t) => {
  const s = await listening(t, { GF_INPUT_QUOTA_BYTES: '100000' });
  const upload = (body: Buffer) => fetch(`http://127.0.0.1:${s.port}/v1/artifacts`, { method: 'POST', headers: { ...bearer(s.key), 'content-type': 'application/octet-stream' }, body });
  t.equal((await upload(randomBytes(60_000))).status, 201, 'under the quota');
  const over = await upload(randomBytes(60_000));
  t.equal(over.status, 413, 'declared past what is left');
  const envelope = errorEnvelopeSchema.parse(await over.json());
  t.equal(envelope.error.code, 'payload_too_large');
  t.match(envelope.error.message, /input quota of 100000 bytes \(40000 bytes left\)/);
  const streamed = await fetch(`http://127.0.0.1:${s.port}/v1/artifacts`, {
    method: 'POST',
    headers: { ...bearer(s.key), 'content-type': 'application/octet-stream' },
    body: new ReadableStream({
      start(controller) {
        controller.enqueue(randomBytes(30_000));
        controller.enqueue(randomBytes(30_000));
        controller.close();
      },
    }),
    duplex: 'half',
  } as RequestInit);
  t.equal(streamed.status, 413, 'streamed past what is left');
  t.match(((await streamed.json()) as { error: { message: string } }).error.message, /input quota/);
  t.equal((await upload(randomBytes(30_000))).status, 201, 'what is left still fits');
  const [rows] = await s.db.query<{ bytes: number }>("SELECT sum(size_bytes)::int AS bytes FROM artifacts WHERE kind = 'input'");
  t.equal(rows!.bytes, 90_000, 'only the accepted uploads are stored');

  let limited: Response | null = null;
  for (let i = 0; i < 31 && !limited; i++) {
    const res = await upload(Buffer.from('x'));
    if (res.status === 429) limited = res;
    else await res.arrayBuffer();
  }
  t.ok(limited, 'the input_upload bucket runs out within 31 uploads a minute');
  t.ok(limited!.headers.get('retry-after'));
  t.match(((await limited!.json()) as { error: { message: string } }).error.message, /input_upload limit is 30 per 60 s/);
});
