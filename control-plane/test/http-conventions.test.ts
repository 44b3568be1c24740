import { SERVICE_VERSION } from '@gpufarm/shared';
import t from 'tap';
import { ADMIN_TOKEN, bearer, buildTestApp, createTestKey } from './helpers/app.js';
import { assertError } from './helpers/assert.js';

t.test('every response carries X-Request-Id and Service-Version', async (t) => {
  const { app } = await buildTestApp(t);
  const ok = await app.inject({ url: '/v1' });
  t.equal(ok.statusCode, 200);
  t.match(ok.headers['x-request-id'], /^req_[A-Za-z0-9]{20}$/, 'generated req_ id');
  t.equal(ok.headers['service-version'], SERVICE_VERSION);

  const echoed = await app.inject({ url: '/v1/pricing', headers: { 'x-request-id': 'req_client-123' } });
  t.equal(echoed.headers['x-request-id'], 'req_client-123', 'a client value is echoed');

  const plain = await app.inject({ url: '/v1/nope', headers: { 'x-request-id': 'trace.42' } });
  t.equal(plain.headers['x-request-id'], 'trace.42', 'echoed as sent');
  t.match(plain.json().error.requestId, /^req_[A-Za-z0-9]{20}$/, "the body carries the server's own id, the one in its logs");
  const again = await app.inject({ url: '/v1/nope', headers: { 'x-request-id': 'trace.42' } });
  t.not(again.json().error.requestId, plain.json().error.requestId, 'one client value does not make two requests share an id');

  const junk = await app.inject({ url: '/v1', headers: { 'x-request-id': 'has spaces and ;' } });
  t.match(junk.headers['x-request-id'], /^req_[A-Za-z0-9]{20}$/, 'an unusable client value is replaced');
  t.not(ok.headers['x-request-id'], echoed.headers['x-request-id']);
});

t.test('GET /v1 describes the deployment', async (t) => {
  const { app, config } = await buildTestApp(t);
  const res = await app.inject({ url: '/v1' });
  const body = res.json();
  t.equal(body.serviceVersion, SERVICE_VERSION);
  t.equal(body.chainId, 4663);
  t.equal(body.environment, 'local');
  t.equal(body.links.capacity, `${config.publicUrl}/v1/capacity`);
  t.equal(body.links.docs, `${config.publicUrl}/docs`);
  const docs = await app.inject({ url: '/docs' });
  t.equal(docs.statusCode, 200);
  t.match(docs.body, /GET \/v1\/capacity/);
});

t.test('error: not_found for unknown paths, with and without a key', async (t) => {
  const { app, db } = await buildTestApp(t);
  assertError(t, await app.inject({ url: '/v2/capacity' }), 'not_found', 404);
  assertError(t, await app.inject({ method: 'POST', url: '/v1/nothing-here', payload: { a: 1 } }), 'not_found', 404);
  const { key } = await createTestKey(db);
  assertError(t, await app.inject({ url: '/v1/unknown', headers: bearer(key) }), 'not_found', 404);
});

t.test('error: method_not_allowed for a known path, with Allow', async (t) => {
  const { app } = await buildTestApp(t);
  const res = await app.inject({ method: 'DELETE', url: '/v1/capacity' });
  assertError(t, res, 'method_not_allowed', 405);
  t.match(res.headers.allow, /GET/);
  assertError(t, await app.inject({ method: 'POST', url: '/v1/pricing', payload: {} }), 'method_not_allowed', 405);
  assertError(t, await app.inject({ method: 'GET', url: '/admin/v1/api-keys' }), 'method_not_allowed', 405);
});

t.test('error: invalid_json and payload_too_large on a write endpoint', async (t) => {
  const { app } = await buildTestApp(t);
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };
  assertError(t, await app.inject({ method: 'POST', url: '/admin/v1/api-keys', headers: admin, payload: '{"walletAddress": ' }), 'invalid_json', 400);
  assertError(t, await app.inject({ method: 'POST', url: '/admin/v1/api-keys', headers: admin, payload: '' }), 'invalid_json', 400);
  const big = JSON.stringify({ walletAddress: '0x' + '1'.repeat(40), scopes: ['jobs:read'], label: 'x'.repeat(256 * 1024) });
  assertError(t, await app.inject({ method: 'POST', url: '/admin/v1/api-keys', headers: admin, payload: big }), 'payload_too_large', 413);
  // Just under the limit is parsed (and then refused for its over-long label, not its size).
  const under = JSON.stringify({ walletAddress: '0x' + '1'.repeat(40), scopes: ['jobs:read'], label: 'x'.repeat(200 * 1024) });
  const res = await app.inject({ method: 'POST', url: '/admin/v1/api-keys', headers: admin, payload: under });
  assertError(t, res, 'invalid_request', 400);
  t.equal(res.json().error.details[0].field, 'label');
});

t.test('error: invalid_request names the malformed parameter', async (t) => {
  const { app, db } = await buildTestApp(t);
  const { key } = await createTestKey(db);
  for (const [query, field] of [
    ['limit=0', 'limit'],
    ['limit=201', 'limit'],
    ['limit=ten', 'limit'],
    ['cursor=%%%', 'cursor'],
    ['cursor=eyJpZCI6MX0', 'cursor'],
    ['colour=red', 'colour'],
    ['limit=5&limit=6', 'limit'],
  ] as const) {
    const res = await app.inject({ url: `/v1/billing?${query}`, headers: bearer(key) });
    assertError(t, res, 'invalid_request', 400);
    t.equal(res.json().error.details[0].field, field, `${query} names ${field}`);
    t.match(res.json().error.message, field);
  }
});

t.test('error: internal hides the cause and the stack', async (t) => {
  const { app, db } = await buildTestApp(t);
  const { key } = await createTestKey(db);
  // A broken schema under a live server: a real statement failure, not a stand-in.
  await db.query('ALTER TABLE billing_entries RENAME TO billing_entries_gone');
  const res = await app.inject({ url: '/v1/billing', headers: bearer(key) });
  assertError(t, res, 'internal', 500);
  t.notMatch(res.body, /billing_entries/, 'the database error stays in the logs');
});

t.test('CORS: public GETs may be read cross-origin; writes send no CORS headers', async (t) => {
  const { app } = await buildTestApp(t);
  const origin = { origin: 'https://example.org' };
  const capacity = await app.inject({ url: '/v1/capacity', headers: origin });
  t.equal(capacity.headers['access-control-allow-origin'], '*');
  const preflight = await app.inject({ method: 'OPTIONS', url: '/v1/pricing', headers: { ...origin, 'access-control-request-method': 'GET' } });
  t.equal(preflight.statusCode, 204);
  t.equal(preflight.headers['access-control-allow-origin'], '*');
  t.equal(preflight.headers['service-version'], SERVICE_VERSION);

  const writePreflight = await app.inject({
    method: 'OPTIONS',
    url: '/admin/v1/api-keys',
    headers: { ...origin, 'access-control-request-method': 'POST' },
  });
  t.notOk(writePreflight.headers['access-control-allow-origin'], 'no CORS on a write preflight');
  t.notOk(writePreflight.headers['access-control-allow-methods']);
  assertError(t, writePreflight, 'method_not_allowed', 405);
  const write = await app.inject({ method: 'POST', url: '/admin/v1/api-keys', headers: { ...origin, authorization: `Bearer ${ADMIN_TOKEN}` }, payload: {} });
  t.notOk(write.headers['access-control-allow-origin'], 'no CORS on a write');
  const privateGet = await app.inject({ url: '/v1/billing', headers: origin });
  t.notOk(privateGet.headers['access-control-allow-origin'], 'no CORS on keyed endpoints');
});
