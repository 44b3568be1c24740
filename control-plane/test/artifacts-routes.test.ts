import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { artifactMetadataSchema, artifactSummarySchema, type ArtifactMetadata } from '@gpufarm/shared';
import { fileSource, packOutputRule, uploadArtifact } from '@gpufarm/agent/artifacts';
import t, { type Test } from 'tap';
import { newAgentToken } from '../src/auth/machine-tokens.js';
import type { AgentUploadAnswer } from '../src/artifacts/agent-upload.js';
import type { UrlSigner } from '../src/artifacts/signing.js';
import { listJobsArtifacts } from '../src/artifacts/store.js';
import { bearer, createTestKey } from './helpers/app.js';
import { assertError } from './helpers/assert.js';
import { startS3rver } from './helpers/s3rver.js';
import { artifactSetup, MAX_INPUT_BYTES, uploadPath, uploadSetup, type ArtifactSetup, type Upload } from './helpers/uploads.js';

const sha256 = (bytes: Buffer | string) => createHash('sha256').update(bytes).digest('hex');
/** The path and query of a signed URL, for inject. */
const pathOf = (url: string) => {
  const u = new URL(url);
  return `${u.pathname}${u.search}`;
};

/** The environment that picks each artifact store (s3: a fresh s3rver process). */
const STORE_ENVS: [string, (t: Test) => Promise<Record<string, string>>][] = [
  ['fs', async () => ({})],
  ['s3', async (t) => (await startS3rver(t)).env],
];

/** The bytes behind a download URL: our signed `/files/` route through inject, a presigned bucket URL over HTTP. */
async function bytesAt(s: ArtifactSetup, url: string): Promise<Buffer> {
  if (new URL(url).pathname.startsWith('/files/')) return (await s.app.inject({ method: 'GET', url: pathOf(url) })).rawPayload;
  const res = await fetch(url);
  if (res.status !== 200) throw new Error(`${url} answered ${res.status}`);
  return Buffer.from(await res.arrayBuffer());
}

async function uploadInput(s: ArtifactSetup, body: Buffer, query = ''): Promise<ArtifactMetadata> {
  const res = await s.app.inject({ method: 'POST', url: `/v1/artifacts${query}`, headers: { ...bearer(s.key), 'content-type': 'application/octet-stream' }, payload: body });
  if (res.statusCode !== 201) throw new Error(`upload answered ${res.statusCode}: ${res.body}`);
  return artifactMetadataSchema.parse(res.json());
}

t.test('default: POST /v1/artifacts stores a streamed input, hashed, and answers its metadata', async (t) => {
  const s = await artifactSetup(t);
  const body = randomBytes(300 * 1024); // past the 256 KiB JSON body limit
  const res = await s.app.inject({ method: 'POST', url: '/v1/artifacts?filename=weights.bin', headers: { ...bearer(s.key), 'content-type': 'application/octet-stream' }, payload: body });
  t.equal(res.statusCode, 201);
  const meta = artifactMetadataSchema.parse(res.json());
  t.equal(meta.kind, 'input');
  t.equal(meta.filename, 'weights.bin');
  t.equal(meta.sha256, sha256(body), 'the server hash equals an independent one');
  t.equal(meta.sizeBytes, body.length);
  t.equal(meta.jobId, null);
  t.match(meta.id, /^art_[0-9a-z]{26}$/);
  t.equal(res.headers['x-artifact-sha256'], sha256(body));
  const ttlMs = Date.parse(meta.expiresAt) - Date.parse(meta.createdAt);
  t.ok(Math.abs(ttlMs - 30 * 86_400_000) < 5_000, 'expires after the configured 30 days');
  const urlTtl = Date.parse(meta.urlExpiresAt) - Date.now();
  t.ok(urlTtl > 110_000 && urlTtl <= 121_000, 'the URL lives 120 s');
  const file = await s.app.inject({ method: 'GET', url: pathOf(meta.url) });
  t.equal(file.statusCode, 200);
  t.equal(sha256(file.rawPayload), sha256(body), 'the signed URL serves the bytes');

  const json = await s.app.inject({ method: 'POST', url: '/v1/artifacts', headers: { ...bearer(s.key), 'content-type': 'application/json' }, payload: '{"not":"parsed"}' });
  t.equal(json.statusCode, 201, 'any content type is stored as bytes');
  t.equal(json.json().sha256, sha256('{"not":"parsed"}'));
  t.equal(json.json().filename, 'input.bin', 'default filename');

  const again = await uploadInput(s, body);
  t.not(again.id, meta.id, 'a second upload is a second artifact');
  t.equal(again.sha256, meta.sha256);
  // Other files of this store may share the two-character folder (1 in 256): only this hash's entries count.
  t.same(readdirSync(join(s.dir, meta.sha256.slice(0, 2))).filter((n) => n.startsWith(meta.sha256)), [meta.sha256], 'equal bytes are one stored file');
});

t.test('error: payload_too_large for inputs over GF_MAX_INPUT_BYTES, declared or streamed', async (t) => {
  const s = await artifactSetup(t);
  const declared = await s.app.inject({ method: 'POST', url: '/v1/artifacts', headers: { ...bearer(s.key), 'content-type': 'application/octet-stream' }, payload: randomBytes(MAX_INPUT_BYTES + 1) });
  assertError(t, declared, 'payload_too_large', 413);
  t.match(declared.json().error.message, String(MAX_INPUT_BYTES));
  // No Content-Length: the limit is found while streaming.
  const chunks = Array.from({ length: 20 }, () => randomBytes(64 * 1024));
  const streamed = await s.app.inject({ method: 'POST', url: '/v1/artifacts', headers: { ...bearer(s.key), 'content-type': 'application/octet-stream' }, payload: Readable.from(chunks) });
  assertError(t, streamed, 'payload_too_large', 413);
  const [row] = await s.db.query<{ n: number }>('SELECT count(*)::int AS n FROM artifacts');
  t.equal(row!.n, 0, 'nothing stored');
  const exact = await s.app.inject({ method: 'POST', url: '/v1/artifacts', headers: { ...bearer(s.key), 'content-type': 'application/octet-stream' }, payload: randomBytes(MAX_INPUT_BYTES) });
  t.equal(exact.statusCode, 201, 'exactly the limit is accepted');
});

t.test('error: POST /v1/artifacts without a key, without jobs:create, with a bad filename', async (t) => {
  const s = await artifactSetup(t);
  assertError(t, await s.app.inject({ method: 'POST', url: '/v1/artifacts', payload: 'x' }), 'missing_api_key', 401);
  const reader = await createTestKey(s.db, { scopes: ['jobs:read', 'artifacts:read'] });
  assertError(t, await s.app.inject({ method: 'POST', url: '/v1/artifacts', headers: bearer(reader.key), payload: 'x' }), 'insufficient_scope', 403);
  const bad = await s.app.inject({ method: 'POST', url: '/v1/artifacts?filename=../etc/passwd', headers: bearer(s.key), payload: 'x' });
  assertError(t, bad, 'invalid_request', 400);
  t.equal(bad.json().error.details[0].field, 'filename');
  assertError(t, await s.app.inject({ method: 'POST', url: '/v1/artifacts?name=x', headers: bearer(s.key), payload: 'x' }), 'invalid_request', 400);
});

t.test('default: GET /v1/artifacts/:id redirects to a signed URL with the integrity headers', async (t) => {
  const s = await artifactSetup(t);
  const body = randomBytes(5000);
  const meta = await uploadInput(s, body, '?filename=data.bin');
  const res = await s.app.inject({ method: 'GET', url: `/v1/artifacts/${meta.id}`, headers: bearer(s.key) });
  t.equal(res.statusCode, 302);
  t.equal(res.headers['x-artifact-sha256'], sha256(body));
  t.equal(res.headers['x-artifact-size'], '5000');
  t.equal(res.headers['x-ratelimit-limit'], '120', 'the download bucket: 120 per 60 s');
  const location = String(res.headers.location);
  t.match(location, new RegExp(`^${s.config.publicUrl}/files/${meta.id}\\?expires=\\d+&sig=`));
  const file = await s.app.inject({ method: 'GET', url: pathOf(location) });
  t.equal(file.statusCode, 200);
  t.equal(sha256(file.rawPayload), res.headers['x-artifact-sha256'], 'the downloaded bytes hash to X-Artifact-Sha256');
  t.equal(file.headers['content-length'], '5000');
  t.equal(file.headers['content-type'], 'application/octet-stream');
  t.equal(file.headers['content-disposition'], 'attachment; filename="data.bin"');
  t.equal(file.headers.etag, `"${sha256(body)}"`);
  t.equal(file.headers['x-artifact-sha256'], sha256(body));
  t.equal(file.headers['accept-ranges'], 'bytes');
});

t.test('behavior: format=json or Accept: application/json gives the metadata and the headers', async (t) => {
  const s = await artifactSetup(t);
  const meta = await uploadInput(s, Buffer.from('hello'));
  for (const [label, request] of [
    ['format=json', { url: `/v1/artifacts/${meta.id}?format=json`, headers: bearer(s.key) }],
    ['Accept', { url: `/v1/artifacts/${meta.id}`, headers: { ...bearer(s.key), accept: 'application/json' } }],
    ['Accept list', { url: `/v1/artifacts/${meta.id}`, headers: { ...bearer(s.key), accept: 'text/html;q=0.9, application/json' } }],
  ] as const) {
    const res = await s.app.inject({ method: 'GET', ...request });
    t.equal(res.statusCode, 200, label);
    const got = artifactMetadataSchema.parse(res.json());
    t.same({ ...got, url: '', urlExpiresAt: '' }, { ...meta, url: '', urlExpiresAt: '' }, `${label}: same metadata`);
    t.equal(res.headers['x-artifact-sha256'], sha256('hello'));
    t.equal(res.headers['x-artifact-size'], '5');
    t.equal((await s.app.inject({ method: 'GET', url: pathOf(got.url) })).body, 'hello', `${label}: its URL works`);
  }
  const html = await s.app.inject({ method: 'GET', url: `/v1/artifacts/${meta.id}`, headers: { ...bearer(s.key), accept: 'application/json;q=0, */*' } });
  t.equal(html.statusCode, 302, 'application/json with q=0 is not asked for');
});

t.test('error: GET /v1/artifacts/:id for another account, unknown, malformed, expired, without scope', async (t) => {
  const s = await artifactSetup(t);
  const meta = await uploadInput(s, Buffer.from('secret'));
  const other = await createTestKey(s.db);
  const foreign = await s.app.inject({ method: 'GET', url: `/v1/artifacts/${meta.id}`, headers: bearer(other.key) });
  assertError(t, foreign, 'not_found', 404);
  t.notMatch(foreign.body, /x-artifact/i);
  t.equal(foreign.headers['x-artifact-sha256'], undefined, 'nothing about the bytes leaks');
  assertError(t, await s.app.inject({ method: 'GET', url: `/v1/artifacts/art_${'0'.repeat(26)}`, headers: bearer(s.key) }), 'not_found', 404);
  const malformed = await s.app.inject({ method: 'GET', url: '/v1/artifacts/nope', headers: bearer(s.key) });
  assertError(t, malformed, 'invalid_request', 400);
  t.equal(malformed.json().error.details[0].field, 'id');
  assertError(t, await s.app.inject({ method: 'GET', url: `/v1/artifacts/${meta.id}?format=xml`, headers: bearer(s.key) }), 'invalid_request', 400);
  assertError(t, await s.app.inject({ method: 'GET', url: `/v1/artifacts/${meta.id}` }), 'missing_api_key', 401);
  const creator = await createTestKey(s.db, { scopes: ['jobs:create', 'jobs:read'] });
  assertError(t, await s.app.inject({ method: 'GET', url: `/v1/artifacts/${meta.id}`, headers: bearer(creator.key) }), 'insufficient_scope', 403);

  const url = (await s.app.inject({ method: 'GET', url: `/v1/artifacts/${meta.id}?format=json`, headers: bearer(s.key) })).json().url as string;
  await s.db.query("UPDATE artifacts SET expires_at = now() - interval '1 second' WHERE id = $1", [meta.id]);
  const expired = await s.app.inject({ method: 'GET', url: `/v1/artifacts/${meta.id}`, headers: bearer(s.key) });
  assertError(t, expired, 'gone', 410);
  assertError(t, await s.app.inject({ method: 'GET', url: pathOf(url) }), 'gone', 410);
  assertError(t, await s.app.inject({ method: 'GET', url: `/v1/artifacts/${meta.id}`, headers: bearer(other.key) }), 'not_found', 404);
});

t.test('error: the download bucket allows 120 per 60 s', async (t) => {
  // The limiter's clock held inside one window: 121 calls on a loaded machine may straddle a
  // window's end of the wall clock, and the 121st then opens a fresh window (seen in a CI run).
  const s = await artifactSetup(t, {}, { now: () => 1_700_000_010_000 });
  const meta = await uploadInput(s, Buffer.from('x'));
  for (let i = 0; i < 120; i++) {
    const res = await s.app.inject({ method: 'GET', url: `/v1/artifacts/${meta.id}`, headers: bearer(s.key) });
    if (res.statusCode !== 302) t.fail(`download ${i + 1} answered ${res.statusCode}`);
  }
  const limited = await s.app.inject({ method: 'GET', url: `/v1/artifacts/${meta.id}`, headers: bearer(s.key) });
  assertError(t, limited, 'rate_limited', 429);
  t.ok(Number(limited.headers['retry-after']) >= 1);
});

t.test('behavior: signed URLs are not counted as anonymous calls (each was counted when issued)', async (t) => {
  const s = await artifactSetup(t);
  const meta = await uploadInput(s, Buffer.from('x'));
  const path = pathOf(meta.url);
  for (let i = 0; i < 80; i++) {
    const res = await s.app.inject({ method: 'GET', url: path });
    if (res.statusCode !== 200) t.fail(`download ${i + 1} of one signed URL answered ${res.statusCode}`);
  }
  t.equal((await s.app.inject({ method: 'GET', url: path })).statusCode, 200, 'past the anonymous 60 per minute');
});

t.test('behavior: the signed URL serves byte ranges, HEAD, and refuses bad or old signatures', async (t) => {
  const s = await artifactSetup(t);
  const body = Buffer.from('0123456789abcdefghij');
  const meta = await uploadInput(s, body);
  const path = pathOf(meta.url);

  const part = await s.app.inject({ method: 'GET', url: path, headers: { range: 'bytes=2-5' } });
  t.equal(part.statusCode, 206);
  t.equal(part.body, '2345');
  t.equal(part.headers['content-range'], 'bytes 2-5/20');
  t.equal(part.headers['content-length'], '4');
  t.equal(part.headers['x-artifact-sha256'], sha256(body), 'the whole body hash, for the client to check once assembled');
  const tail = await s.app.inject({ method: 'GET', url: path, headers: { range: 'bytes=-3' } });
  t.equal(tail.statusCode, 206);
  t.equal(tail.body, 'hij');
  const open = await s.app.inject({ method: 'GET', url: path, headers: { range: 'bytes=15-' } });
  t.equal(open.body, 'fghij');
  const unsatisfiable = await s.app.inject({ method: 'GET', url: path, headers: { range: 'bytes=20-30' } });
  t.equal(unsatisfiable.statusCode, 416);
  t.equal(unsatisfiable.headers['content-range'], 'bytes */20');
  const many = await s.app.inject({ method: 'GET', url: path, headers: { range: 'bytes=0-1,5-6' } });
  t.equal(many.statusCode, 200, 'several ranges: the whole body');
  t.equal(many.body, body.toString());
  const staleIfRange = await s.app.inject({ method: 'GET', url: path, headers: { range: 'bytes=0-1', 'if-range': '"other"' } });
  t.equal(staleIfRange.statusCode, 200, 'If-Range with another ETag: the whole body');
  const freshIfRange = await s.app.inject({ method: 'GET', url: path, headers: { range: 'bytes=0-1', 'if-range': `"${sha256(body)}"` } });
  t.equal(freshIfRange.statusCode, 206);

  const head = await s.app.inject({ method: 'HEAD', url: path });
  t.equal(head.statusCode, 200);
  t.equal(head.headers['content-length'], '20');
  t.equal(head.headers['x-artifact-sha256'], sha256(body));
  t.equal(head.body, '');

  const u = new URL(meta.url);
  const sig = u.searchParams.get('sig')!;
  const tampered = `${u.pathname}?expires=${u.searchParams.get('expires')}&sig=${sig.slice(0, -2)}${sig.endsWith('AA') ? 'BB' : 'AA'}`;
  const refused = await s.app.inject({ method: 'GET', url: tampered });
  assertError(t, refused, 'forbidden', 403);
  t.match(refused.json().error.message, /signature/);
  const longer = `${u.pathname}?expires=${Number(u.searchParams.get('expires')) + 3600}&sig=${sig}`;
  assertError(t, await s.app.inject({ method: 'GET', url: longer }), 'forbidden', 403);
  const other = await uploadInput(s, Buffer.from('other'));
  assertError(t, await s.app.inject({ method: 'GET', url: `/files/${other.id}${u.search}` }), 'forbidden', 403);
  assertError(t, await s.app.inject({ method: 'GET', url: u.pathname }), 'forbidden', 403);
  t.equal((await s.app.inject({ method: 'HEAD', url: tampered })).statusCode, 403, 'HEAD is refused alike');

  const old = s.signer.sign(meta.id, 120, Date.now() - 10 * 60_000);
  const expired = await s.app.inject({ method: 'GET', url: pathOf(old.url) });
  assertError(t, expired, 'forbidden', 403);
  t.match(expired.json().error.message, /expired.*new one/);
});

t.test('behavior: an empty artifact downloads as zero bytes', async (t) => {
  const s = await artifactSetup(t);
  const meta = await uploadInput(s, Buffer.alloc(0));
  t.equal(meta.sha256, sha256(''));
  const file = await s.app.inject({ method: 'GET', url: pathOf(meta.url) });
  t.equal(file.statusCode, 200);
  t.equal(file.headers['content-length'], '0');
  t.equal(file.body, '');
});

t.test('behavior: a large download streams through the signed URL over a real socket', async (t) => {
  const s = await artifactSetup(t);
  const body = randomBytes(8 * 1024 * 1024 + 123);
  const meta = await uploadInput(s, body.subarray(0, MAX_INPUT_BYTES));
  await s.app.listen({ port: 0, host: '127.0.0.1' });
  const port = (s.app.server.address() as { port: number }).port;
  const res = await fetch(`http://127.0.0.1:${port}${pathOf(meta.url)}`);
  t.equal(res.status, 200);
  t.equal(sha256(Buffer.from(await res.arrayBuffer())), meta.sha256);
});

// ---- Agent uploads ----

type UploadReply = Partial<AgentUploadAnswer> & { error?: { code: string; message: string; details: { field: string; message: string }[] } };

interface PutOptions {
  token?: string | null;
  /** `X-Content-Sha256` sent as a trailer after the chunked body, as the agent does. */
  trailer?: string;
  header?: string;
}

/** A chunked PUT like the agent's uploader: the body in chunks, the hash as a trailer. */
function put(u: Upload, path: string, chunks: Buffer[], options: PutOptions = {}): Promise<{ status: number; json: UploadReply }> {
  return new Promise((resolve, reject) => {
    const token = options.token === undefined ? u.token : options.token;
    const req = http.request({
      host: '127.0.0.1',
      port: u.port,
      path,
      method: 'PUT',
      headers: {
        'content-type': 'application/x-tar',
        'transfer-encoding': 'chunked',
        ...(options.trailer ? { trailer: 'X-Content-Sha256' } : {}),
        ...(options.header ? { 'x-content-sha256': options.header } : {}),
        ...(token ? { authorization: `Bearer ${token}` } : {}),
      },
    });
    req.on('error', reject);
    req.on('response', (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => {
        const text = Buffer.concat(parts).toString();
        resolve({ status: res.statusCode ?? 0, json: text ? (JSON.parse(text) as UploadReply) : {} });
      });
    });
    let i = 0;
    const next = () => {
      if (req.destroyed) return;
      if (i < chunks.length) {
        req.write(chunks[i++]!, next);
        return;
      }
      if (options.trailer) req.addTrailers({ 'X-Content-Sha256': options.trailer });
      req.end();
    };
    next();
  });
}


t.test('error: agent uploads without a token, with an unknown or another machine’s token', async (t) => {
  const s = await uploadSetup(t);
  const body = [Buffer.from('x')];
  const missing = await put(s, uploadPath(s, 'output-0'), body, { token: null });
  t.equal(missing.status, 401);
  t.equal(missing.json.error?.code, 'missing_api_key');
  const unknown = await put(s, uploadPath(s, 'output-0'), body, { token: newAgentToken('gfa') });
  t.equal(unknown.status, 401);
  t.equal(unknown.json.error?.code, 'invalid_api_key');
  const other = await put(s, uploadPath(s, 'output-0'), body, { token: s.otherToken });
  t.equal(other.status, 404, "another machine's assignment is not found");
  t.equal(other.json.error?.code, 'not_found');
  const [row] = await s.db.query<{ n: number }>('SELECT count(*)::int AS n FROM artifacts');
  t.equal(row!.n, 0);
});

t.test('error: unavailable when the store lost the bytes of a live artifact', async (t) => {
  const s = await artifactSetup(t);
  const meta = await uploadInput(s, Buffer.from('soon lost'));
  await s.blobs.delete(meta.sha256);
  assertError(t, await s.app.inject({ method: 'GET', url: pathOf(meta.url) }), 'unavailable', 503);
});

// Where the bytes go and come from is the store's business: these run against the filesystem
// store and a real s3rver process.
for (const [store, storeEnv] of STORE_ENVS) {
  t.test(`${store}: default: an agent streams an output; the server hashes it, compares the trailer, stores a row`, async (t) => {
    const s = await uploadSetup(t, 'running', undefined, await storeEnv(t));
    const chunks = Array.from({ length: 4 }, () => randomBytes(50_000));
    const bytes = Buffer.concat(chunks);
    const res = await put(s, uploadPath(s, 'output-0'), chunks, { trailer: sha256(bytes) });
    t.equal(res.status, 201, JSON.stringify(res.json));
    t.same(res.json, { artifactId: res.json.artifactId, sha256: sha256(bytes), sizeBytes: bytes.length, declaredSha256: sha256(bytes), hashesMatch: true });
    const [row] = await s.db.query<Record<string, unknown>>('SELECT * FROM artifacts WHERE id = $1', [res.json.artifactId ?? null]);
    t.match(row, { account_id: s.accountId, job_id: s.jobId, assignment_id: s.assignmentId, kind: 'output', name: 'output-0', filename: `${s.jobId}-output-0.tar`, sha256: sha256(bytes), declared_sha256: sha256(bytes) });
    const file = await s.app.inject({ method: 'GET', url: `/v1/artifacts/${res.json.artifactId}`, headers: bearer(s.key) });
    t.equal(file.statusCode, 302, 'the job owner downloads it');
    t.equal(sha256(await bytesAt(s, String(file.headers.location))), sha256(bytes));

    const log = Buffer.from('{"seq":0,"line":"hello"}\n');
    const logRes = await put(s, uploadPath(s, 'log'), [log], { trailer: sha256(log) });
    t.equal(logRes.status, 201);
    const summaries = (await listJobsArtifacts(s.db, [s.jobId])).get(s.jobId)!;
    for (const summary of summaries) artifactSummarySchema.parse(summary);
    t.same(summaries, [
      { id: res.json.artifactId, kind: 'output', filename: `${s.jobId}-output-0.tar`, sizeBytes: bytes.length, sha256: sha256(bytes) },
      { id: logRes.json.artifactId, kind: 'log', filename: `${s.jobId}-log.ndjson`, sizeBytes: log.length, sha256: sha256(log) },
    ]);
    const foreign = await createTestKey(s.db);
    assertError(t, await s.app.inject({ method: 'GET', url: `/v1/artifacts/${res.json.artifactId}`, headers: bearer(foreign.key) }), 'not_found', 404);
  });

  t.test(`${store}: behavior: a declared hash that differs is recorded, and the server hash is stored`, async (t) => {
    const s = await uploadSetup(t, 'running', undefined, await storeEnv(t));
    const bytes = Buffer.from('real output');
    const res = await put(s, uploadPath(s, 'output-0'), [bytes], { trailer: sha256('claimed output') });
    t.equal(res.status, 201);
    t.equal(res.json.sha256, sha256(bytes));
    t.equal(res.json.declaredSha256, sha256('claimed output'));
    t.equal(res.json.hashesMatch, false);
    const [row] = await s.db.query<{ sha256: string; declared_sha256: string }>('SELECT sha256, declared_sha256 FROM artifacts WHERE id = $1', [res.json.artifactId ?? null]);
    t.same(row, { sha256: sha256(bytes), declared_sha256: sha256('claimed output') });

    const header = await put(s, uploadPath(s, 'log'), [bytes], { header: sha256(bytes).toUpperCase() });
    t.equal(header.json.declaredSha256, sha256(bytes), 'a retry declares in a header (lower-cased)');
    t.equal(header.json.hashesMatch, true);
  });

  t.test(`${store}: behavior: no declared hash is stored with declared null; a retry replaces the row and its old bytes`, async (t) => {
    const s = await uploadSetup(t, 'running', undefined, await storeEnv(t));
    const first = await put(s, uploadPath(s, 'output-0'), [Buffer.from('first try')]);
    t.equal(first.status, 201);
    t.equal(first.json.declaredSha256, null);
    t.equal(first.json.hashesMatch, null);
    const second = await put(s, uploadPath(s, 'output-0'), [Buffer.from('second try')], { trailer: sha256('second try') });
    t.equal(second.status, 201);
    t.equal(second.json.artifactId, first.json.artifactId, 'same artifact id');
    const rows = await s.db.query<{ sha256: string }>('SELECT sha256 FROM artifacts WHERE assignment_id = $1', [s.assignmentId]);
    t.same(rows, [{ sha256: sha256('second try') }], 'one row, the new bytes');
    t.equal(await s.blobs.stat(sha256('first try')), null, 'the replaced bytes are deleted');
    t.not(await s.blobs.stat(sha256('second try')), null);
  });


  t.test(`${store}: error: agent uploads for unknown rules, bad names, too large, or a closed assignment`, async (t) => {
    const s = await uploadSetup(t, 'running', [{ path: '/output', maxBytes: 100_000 }], await storeEnv(t));
    const rule = await put(s, uploadPath(s, 'output-1'), [Buffer.from('x')]);
    t.equal(rule.status, 404);
    t.match(rule.json.error?.message, /no output rule 1/);
    const name = await put(s, uploadPath(s, 'secrets'), [Buffer.from('x')]);
    t.equal(name.status, 400);
    t.equal(name.json.error?.code, 'invalid_request');
    const unknownAssignment = await put(s, '/agent/v1/assignments/asg_nope/outputs/output-0', [Buffer.from('x')]);
    t.equal(unknownAssignment.status, 404);
    const big = await put(s, uploadPath(s, 'output-0'), Array.from({ length: 4 }, () => randomBytes(30_000)), { trailer: 'a'.repeat(64) });
    t.equal(big.status, 413);
    t.equal(big.json.error?.code, 'payload_too_large');
    t.match(big.json.error?.message, /100000/);
    const badHash = await put(s, uploadPath(s, 'output-0'), [Buffer.from('x')], { header: 'not-a-hash' });
    t.equal(badHash.status, 400);
    t.equal(badHash.json.error?.details[0]?.field, 'X-Content-Sha256');

    await s.db.query("UPDATE assignments SET state = 'canceled' WHERE id = $1", [s.assignmentId]);
    const closed = await put(s, uploadPath(s, 'output-0'), [Buffer.from('x')]);
    t.equal(closed.status, 409);
    t.equal(closed.json.error?.code, 'conflict');
    await s.db.query("UPDATE assignments SET state = 'finished', finished_at = now() - interval '1 minute' WHERE id = $1", [s.assignmentId]);
    t.equal((await put(s, uploadPath(s, 'log'), [Buffer.from('late log')])).status, 201, 'just finished: a retry still lands');
    t.equal((await put(s, uploadPath(s, 'log'), [Buffer.from('late log')])).status, 201, 'and may repeat the same bytes');
    const changed = await put(s, uploadPath(s, 'log'), [Buffer.from('rewritten log')]);
    t.equal(changed.status, 409, 'but not change them once finished');
    t.equal(await s.blobs.stat(sha256('rewritten log')), null, 'the refused bytes are not kept');
    await s.db.query("UPDATE assignments SET finished_at = now() - interval '1 hour' WHERE id = $1", [s.assignmentId]);
    t.equal((await put(s, uploadPath(s, 'log'), [Buffer.from('too late')])).status, 409, 'long finished: refused');
    const [row] = await s.db.query<{ n: number }>('SELECT count(*)::int AS n FROM artifacts');
    t.equal(row!.n, 1, 'only the accepted upload stored');
  });

  t.test(`${store}: behavior: equal bytes from two jobs are one stored file with two rows`, async (t) => {
    const s = await uploadSetup(t, 'running', undefined, await storeEnv(t));
    const bytes = Buffer.from('identical output');
    const input = await uploadInput(s, bytes);
    const output = await put(s, uploadPath(s, 'output-0'), [bytes], { trailer: sha256(bytes) });
    t.not(output.json.artifactId, input.id);
    const [row] = await s.db.query<{ n: number }>('SELECT count(*)::int AS n FROM artifacts WHERE sha256 = $1', [sha256(bytes)]);
    t.equal(row!.n, 2);
    t.not(await s.blobs.stat(sha256(bytes)), null);
    const signer: UrlSigner = s.signer;
    t.ok(signer.sign(input.id, 1).url);
  });


  t.test(`${store}: behavior: the real agent uploader (chunked body, hash as a trailer) stores a packed output and a log`, async (t) => {
    const s = await uploadSetup(t, 'running', undefined, await storeEnv(t));
    const work = mkdtempSync(join(tmpdir(), 'gf-agent-out-'));
    t.teardown(() => rmSync(work, { recursive: true, force: true }));
    mkdirSync(join(work, 'output'));
    writeFileSync(join(work, 'output', 'result.txt'), 'the answer\n');
    writeFileSync(join(work, 'output', 'big.bin'), randomBytes(100_000));
    writeFileSync(join(work, 'job.log'), '{"seq":0,"stream":"stdout","line":"hi"}\n');
    const url = (name: string) => `http://127.0.0.1:${s.port}${uploadPath(s, name)}`;
    const headers = { authorization: `Bearer ${s.token}` };

    const output = await uploadArtifact({ url: url('output-0'), headers, contentType: 'application/x-tar', attempts: 1, open: () => packOutputRule(join(work, 'output'), { path: '/output', maxBytes: 256 * 1024 }) });
    t.equal(output.status, 201);
    const log = await uploadArtifact({ url: url('log'), headers, contentType: 'application/x-ndjson', attempts: 1, open: () => fileSource(join(work, 'job.log')) });
    t.equal(log.status, 201);
    const rows = await s.db.query<{ name: string; sha256: string; declared_sha256: string; size_bytes: number }>(
      'SELECT name, sha256, declared_sha256, size_bytes FROM artifacts WHERE assignment_id = $1 ORDER BY name',
      [s.assignmentId],
    );
    t.same(rows, [
      { name: 'log', sha256: log.sha256, declared_sha256: log.sha256, size_bytes: log.sizeBytes },
      { name: 'output-0', sha256: output.sha256, declared_sha256: output.sha256, size_bytes: output.sizeBytes },
    ], "the server's hashes equal the agent's, declared in the trailer");
    const [summary] = (await listJobsArtifacts(s.db, [s.jobId])).get(s.jobId)!;
    const meta = (await s.app.inject({ method: 'GET', url: `/v1/artifacts/${summary!.id}?format=json`, headers: bearer(s.key) })).json() as ArtifactMetadata;
    t.equal(sha256(await bytesAt(s, meta.url)), output.sha256, 'the customer downloads the same tar');
  });

  t.test(`${store}: behavior: an agent's input route redirects to a URL of the bytes valid 120 s`, async (t) => {
    const s = await uploadSetup(t, 'running', undefined, await storeEnv(t));
    const bytes = randomBytes(40_000);
    const input = await uploadInput(s, bytes, '?filename=data.bin');
    const inputs = [{ artifactId: input.id, mountName: 'data', url: 'http://unused.test/', sha256: input.sha256, sizeBytes: input.sizeBytes }];
    await s.db.query("UPDATE assignments SET spec = spec || jsonb_build_object('inputs', $2::jsonb) WHERE id = $1", [s.assignmentId, JSON.stringify(inputs)]);
    const redirect = await s.app.inject({ method: 'GET', url: `/agent/v1/assignments/${s.assignmentId}/inputs/data`, headers: { authorization: `Bearer ${s.token}` } });
    t.equal(redirect.statusCode, 302, redirect.body);
    const location = new URL(String(redirect.headers.location));
    if (store === 's3') {
      t.equal(location.searchParams.get('X-Amz-Expires'), '120', 'a presigned GET of the bucket');
      t.notOk(location.pathname.startsWith('/files/'));
    } else {
      t.ok(location.pathname.startsWith('/files/'), 'our signed route');
      const lifetimeMs = Number(location.searchParams.get('expires')) * 1000 - Date.now();
      t.ok(lifetimeMs > 110_000 && lifetimeMs <= 121_000, `valid 120 s (${lifetimeMs} ms)`);
    }
    t.equal(sha256(await bytesAt(s, location.href)), sha256(bytes));
  });
}
