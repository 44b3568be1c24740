import { createHash } from 'node:crypto';
import t from 'tap';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { buildOpenApiDocument } from '../src/openapi/document.js';
import { assertError } from './helpers/assert.js';
import { bearer, createTestKey, type TestApp } from './helpers/app.js';
import { buildWebTestApp, devWallet, HOST, PUBLIC_URL, session, signIn, type SignedIn } from './helpers/web.js';

/** A machine that can run a one-GPU job, so the dashboard can create jobs. */
async function offerOneGpu(test: TestApp): Promise<void> {
  const farm = await createFarm(test.db, { slug: 'web-farm' });
  await createMachine(test.db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 });
  await test.offerIndex.refresh();
}

async function createJobThroughDashboard(test: TestApp, signedIn: SignedIn): Promise<string> {
  const res = await test.app.inject({ method: 'POST', url: '/dashboard/api/v1/jobs', headers: session(signedIn, { csrf: true }), payload: { image: 'ghcr.io/acme/job:1', gpu: { count: 1 } } });
  if (res.statusCode !== 201) throw new Error(`job creation answered ${res.statusCode}: ${res.body}`);
  return res.json().job.id as string;
}

t.test('default: the /v1 routes answer under /dashboard/api with the session, same JSON', async (t) => {
  const test = await buildWebTestApp(t);
  const { app } = test;
  await offerOneGpu(test);
  const signedIn = await signIn(app);
  const jobId = await createJobThroughDashboard(test, signedIn);
  const viaDashboard = await app.inject({ url: `/dashboard/api/v1/jobs/${jobId}`, headers: session(signedIn) });
  t.equal(viaDashboard.statusCode, 200);
  t.equal(viaDashboard.json().links.dashboard, `${PUBLIC_URL}/dashboard/jobs/${jobId}`);
  const key = await createTestKey(test.db, { walletAddress: signedIn.address });
  const viaV1 = await app.inject({ url: `/v1/jobs/${jobId}`, headers: bearer(key.key) });
  t.same(viaDashboard.json(), viaV1.json(), 'the same handler answers both');
  for (const url of ['/dashboard/api/v1', '/dashboard/api/v1/capacity', '/dashboard/api/v1/pricing', '/dashboard/api/v1/billing', `/dashboard/api/v1/jobs/${jobId}/logs`, '/dashboard/api/v1/jobs']) {
    t.equal((await app.inject({ url, headers: session(signedIn) })).statusCode, 200, url);
  }
  const funding = await app.inject({ url: `/dashboard/api/v1/jobs/${jobId}/funding`, headers: session(signedIn) });
  t.not(funding.statusCode, 404, 'the funding route is served');
  const cancelNoToken = await app.inject({ method: 'POST', url: `/dashboard/api/v1/jobs/${jobId}/cancel`, headers: session(signedIn), payload: {} });
  assertError(t, cancelNoToken, 'forbidden', 403);
  t.equal(cancelNoToken.json().error.message, 'The X-CSRF-Token header is missing or wrong: reload the dashboard.');
  const cancel = await app.inject({ method: 'POST', url: `/dashboard/api/v1/jobs/${jobId}/cancel`, headers: session(signedIn, { csrf: true }), payload: {} });
  t.equal(cancel.statusCode, 200, cancel.body);
  t.equal(cancel.json().status, 'CANCELED');
  // The job has ended, so its live stream sends what there is and closes.
  const stream = await app.inject({ url: `/dashboard/api/v1/jobs/${jobId}/logs/stream`, headers: { ...session(signedIn), accept: 'text/event-stream' } });
  t.equal(stream.statusCode, 200);
  t.match(stream.headers['content-type'], /^text\/event-stream/);
  t.match(stream.body, /event: end/);
});

t.test('error: forbidden without or with a wrong CSRF token; the token works', async (t) => {
  const { app } = await buildWebTestApp(t);
  const signedIn = await signIn(app);
  const payload = { scopes: ['jobs:read'] };
  assertError(t, await app.inject({ method: 'POST', url: '/dashboard/api/keys', headers: session(signedIn), payload }), 'forbidden', 403);
  assertError(t, await app.inject({ method: 'POST', url: '/dashboard/api/keys', headers: { ...session(signedIn), 'x-csrf-token': 'wrong' }, payload }), 'forbidden', 403);
  const other = await signIn(app, devWallet(2));
  assertError(t, await app.inject({ method: 'POST', url: '/dashboard/api/keys', headers: { ...session(signedIn), 'x-csrf-token': other.csrfToken } , payload }), 'forbidden', 403, );
  t.equal((await app.inject({ method: 'POST', url: '/dashboard/api/keys', headers: session(signedIn, { csrf: true }), payload })).statusCode, 201);
});

t.test('behavior: a key created on the dashboard works on /v1, records its use, and is revoked', async (t) => {
  const { app, db } = await buildWebTestApp(t);
  const signedIn = await signIn(app);
  const bad = await app.inject({ method: 'POST', url: '/dashboard/api/keys', headers: session(signedIn, { csrf: true }), payload: { scopes: ['root'], label: '' } });
  assertError(t, bad, 'invalid_request', 400);
  t.match(bad.json().error.details.map((d: { field: string }) => d.field).sort(), ['label', 'scopes[0]']);

  const created = await app.inject({ method: 'POST', url: '/dashboard/api/keys', headers: session(signedIn, { csrf: true }), payload: { label: 'ci', scopes: ['jobs:read', 'billing:read'] } });
  t.equal(created.statusCode, 201);
  const { key, apiKey } = created.json();
  t.match(key, /^gf_test_[A-Za-z0-9_-]{43}$/);
  t.same(apiKey, { id: apiKey.id, prefix: `gf_test_…${key.slice(-4)}`, label: 'ci', scopes: ['jobs:read', 'billing:read'], createdAt: apiKey.createdAt, lastUsedAt: null, revokedAt: null });

  const older = await app.inject({ method: 'POST', url: '/dashboard/api/keys', headers: session(signedIn, { csrf: true }), payload: { scopes: ['jobs:create'] } });
  await db.query(`UPDATE api_keys SET created_at = now() - interval '1 hour' WHERE id = $1`, [older.json().apiKey.id]);

  t.equal((await app.inject({ url: '/v1/billing', headers: bearer(key) })).statusCode, 200, 'the key works on /v1');
  let listed: Array<{ id: string; lastUsedAt: string | null; revokedAt: string | null }> = [];
  for (let i = 0; i < 50; i++) {
    listed = (await app.inject({ url: '/dashboard/api/keys', headers: session(signedIn) })).json().data;
    if (listed[0]?.lastUsedAt) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  t.same(listed.map((k) => k.id), [apiKey.id, older.json().apiKey.id], 'newest first');
  t.ok(listed[0]!.lastUsedAt && Math.abs(Date.parse(listed[0]!.lastUsedAt) - Date.now()) < 30_000, 'lastUsedAt is set');
  t.equal(listed[1]!.lastUsedAt, null, 'an unused key has none');
  const firstUse = listed[0]!.lastUsedAt;
  await app.inject({ url: '/v1/billing', headers: bearer(key) });
  await new Promise((r) => setTimeout(r, 100));
  const [row] = await db.query<{ last_used_at: Date }>('SELECT last_used_at FROM api_keys WHERE id = $1', [apiKey.id]);
  t.equal(row!.last_used_at.toISOString(), firstUse, 'not written again within the minute');

  const revoke = await app.inject({ method: 'POST', url: `/dashboard/api/keys/${apiKey.id}/revoke`, headers: session(signedIn, { csrf: true }) });
  t.equal(revoke.statusCode, 200);
  t.ok(revoke.json().revokedAt);
  t.equal(revoke.json().id, apiKey.id);
  assertError(t, await app.inject({ url: '/v1/billing', headers: bearer(key) }), 'revoked_api_key', 401);
  const after = (await app.inject({ url: '/dashboard/api/keys', headers: session(signedIn) })).json().data;
  t.ok(after[0].revokedAt, 'the list keeps the revoked key');
  assertError(t, await app.inject({ method: 'POST', url: '/dashboard/api/keys/nope/revoke', headers: session(signedIn, { csrf: true }) }), 'invalid_request', 400);
});

t.test('error: not_found for another account’s jobs, logs and keys', async (t) => {
  const test = await buildWebTestApp(t);
  const { app } = test;
  await offerOneGpu(test);
  const first = await signIn(app, devWallet(1));
  const second = await signIn(app, devWallet(2));
  const jobId = await createJobThroughDashboard(test, first);
  const key = (await app.inject({ method: 'POST', url: '/dashboard/api/keys', headers: session(first, { csrf: true }), payload: { scopes: ['jobs:read'] } })).json().apiKey;

  for (const url of [`/dashboard/api/v1/jobs/${jobId}`, `/dashboard/api/v1/jobs/${jobId}/logs`, `/dashboard/api/v1/jobs/${jobId}/logs/stream`, `/dashboard/api/v1/jobs/${jobId}/funding`]) {
    assertError(t, await app.inject({ url, headers: session(second) }), 'not_found', 404);
  }
  assertError(t, await app.inject({ method: 'POST', url: `/dashboard/api/v1/jobs/${jobId}/cancel`, headers: session(second, { csrf: true }), payload: {} }), 'not_found', 404);
  t.same((await app.inject({ url: '/dashboard/api/v1/jobs', headers: session(second) })).json().data, [], 'the job is not in the other list');
  t.same((await app.inject({ url: '/dashboard/api/keys', headers: session(second) })).json().data, [], 'nor the key');
  assertError(t, await app.inject({ method: 'POST', url: `/dashboard/api/keys/${key.id}/revoke`, headers: session(second, { csrf: true }) }), 'not_found', 404);
  t.equal((await app.inject({ url: '/dashboard/api/keys', headers: session(first) })).json().data[0].revokedAt, null, 'the key was not revoked');
});

t.test('behavior: /v1 ignores the cookie; /dashboard/api refuses Authorization', async (t) => {
  const { app, db } = await buildWebTestApp(t);
  const signedIn = await signIn(app);
  assertError(t, await app.inject({ url: '/v1/billing', headers: session(signedIn) }), 'missing_api_key', 401);
  const key = await createTestKey(db, { walletAddress: signedIn.address });
  const withKey = await app.inject({ url: '/dashboard/api/v1/billing', headers: { ...session(signedIn), ...bearer(key.key) } });
  assertError(t, withKey, 'invalid_api_key', 401);
  t.match(withKey.json().error.message, /session cookie/);
  assertError(t, await app.inject({ url: '/dashboard/api/v1/billing', headers: { host: HOST, ...bearer(key.key) } }), 'invalid_api_key', 401);
  const anonymous = await app.inject({ url: '/dashboard/api/v1/billing', headers: { host: HOST } });
  assertError(t, anonymous, 'missing_api_key', 401);
  t.equal(anonymous.json().error.message, 'Not signed in: sign in with your wallet.');
  t.equal((await app.inject({ url: '/dashboard/api/v1/capacity' })).statusCode, 200, 'public routes need no session');
});

t.test('behavior: CORS stays on /v1; the route table answers 405 and 404 under /dashboard/api', async (t) => {
  const { app } = await buildWebTestApp(t);
  t.equal((await app.inject({ url: '/v1/capacity' })).headers['access-control-allow-origin'], '*');
  t.equal((await app.inject({ url: '/dashboard/api/v1/capacity' })).headers['access-control-allow-origin'], undefined);
  const preflight = await app.inject({ method: 'OPTIONS', url: '/dashboard/api/v1/capacity' });
  t.equal(preflight.headers['access-control-allow-origin'], undefined);
  assertError(t, preflight, 'method_not_allowed', 405);
  const wrongMethod = await app.inject({ method: 'DELETE', url: '/dashboard/api/v1/jobs' });
  assertError(t, wrongMethod, 'method_not_allowed', 405);
  t.equal(wrongMethod.headers.allow, 'GET, HEAD, POST');
  const getRevoke = await app.inject({ url: '/dashboard/api/keys/key_0123456789abcdefghjkmnpqrs/revoke' });
  assertError(t, getRevoke, 'method_not_allowed', 405);
  const unknown = await app.inject({ url: '/dashboard/api/unknown' });
  assertError(t, unknown, 'not_found', 404);
  t.match(unknown.headers['content-type'], /application\/json/);
  assertError(t, await app.inject({ url: '/dashboard/api/files/art_x' }), 'not_found', 404);
  t.same(Object.keys(buildOpenApiDocument('http://127.0.0.1:8080').paths!).filter((path) => !path.startsWith('/v1')), ['/files/{id}'], 'the document describes /v1 (and the signed URL) only');
});

t.test('behavior: an artifact downloads from /dashboard/api through a same-origin signed URL', async (t) => {
  const { app } = await buildWebTestApp(t);
  const signedIn = await signIn(app);
  const bytes = Buffer.from('dashboard input bytes');
  const upload = await app.inject({
    method: 'POST',
    url: '/dashboard/api/v1/artifacts?filename=in.bin',
    headers: { ...session(signedIn, { csrf: true }), 'content-type': 'application/octet-stream' },
    payload: bytes,
  });
  t.equal(upload.statusCode, 201, upload.body);
  const id = upload.json().id as string;
  const redirect = await app.inject({ url: `/dashboard/api/v1/artifacts/${id}`, headers: session(signedIn) });
  t.equal(redirect.statusCode, 302);
  const location = new URL(redirect.headers.location as string);
  t.equal(location.origin, PUBLIC_URL, 'the signed URL is on the dashboard’s origin');
  t.match(location.pathname, /^\/files\//);
  const sha256 = createHash('sha256').update(bytes).digest('hex');
  t.equal(redirect.headers['x-artifact-sha256'], sha256);
  t.equal(redirect.headers['x-artifact-size'], String(bytes.length));
  const file = await app.inject({ url: location.pathname + location.search });
  t.equal(file.statusCode, 200);
  t.same(file.rawPayload, bytes);
});
