import t from 'tap';
import { generateApiKey, hashApiKey } from '../src/auth/api-keys.js';
import { insertBillingEntry } from '../src/billing/store.js';
import { assertError } from './helpers/assert.js';
import { ADMIN_TOKEN, bearer, buildTestApp, createTestKey } from './helpers/app.js';

t.test('keys: gf_test_/gf_live_ plus 32 random bytes; only the SHA-256 is stored', async (t) => {
  const { db } = await buildTestApp(t);
  const created = await createTestKey(db);
  t.match(created.key, /^gf_test_[A-Za-z0-9_-]{43}$/);
  t.equal(Buffer.from(created.key.slice(8), 'base64url').length, 32);
  const rows = await db.query<{ key_hash: string }>('SELECT key_hash FROM api_keys');
  t.same(rows, [{ key_hash: hashApiKey(created.key) }]);
  const everything = JSON.stringify(await db.query('SELECT * FROM api_keys'));
  t.notMatch(everything, created.key.slice(8), 'the key itself is nowhere in the table');
  t.match(generateApiKey('live'), /^gf_live_/);
});

t.test('error: missing_api_key, invalid_api_key, wrong_environment', async (t) => {
  const { app } = await buildTestApp(t);
  assertError(t, await app.inject({ url: '/v1/billing' }), 'missing_api_key', 401);
  assertError(t, await app.inject({ url: '/v1/billing', headers: { authorization: 'Basic abc' } }), 'invalid_api_key', 401);
  assertError(t, await app.inject({ url: '/v1/billing', headers: bearer('gf_test_short') }), 'invalid_api_key', 401);
  assertError(t, await app.inject({ url: '/v1/billing', headers: bearer(generateApiKey('test')) }), 'invalid_api_key', 401);
  const live = await app.inject({ url: '/v1/billing', headers: bearer(generateApiKey('live')) });
  assertError(t, live, 'wrong_environment', 401);
  t.match(live.json().error.message, /gf_test_/, 'says which keys this deployment takes');
  // A bad key on a public endpoint is still refused rather than silently ignored.
  assertError(t, await app.inject({ url: '/v1/capacity', headers: bearer(generateApiKey('test')) }), 'invalid_api_key', 401);
});

t.test('error: wrong_environment on mainnet for a test key that exists', async (t) => {
  const { app, db } = await buildTestApp(t, { env: { GF_ENVIRONMENT: 'mainnet' } });
  const { key } = await createTestKey(db, { environment: 'testnet' });
  assertError(t, await app.inject({ url: '/v1/billing', headers: bearer(key) }), 'wrong_environment', 401);
  const liveKey = await createTestKey(db, { environment: 'mainnet' });
  t.equal((await app.inject({ url: '/v1/billing', headers: bearer(liveKey.key) })).statusCode, 200, 'a live key works on mainnet');
});

t.test('error: revoked_api_key, account_suspended, insufficient_scope', async (t) => {
  const { app, db } = await buildTestApp(t);
  const revoked = await createTestKey(db);
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
  const revoke = await app.inject({ method: 'POST', url: `/admin/v1/api-keys/${revoked.keyId}/revoke`, headers: admin });
  t.equal(revoke.statusCode, 200);
  assertError(t, await app.inject({ url: '/v1/billing', headers: bearer(revoked.key) }), 'revoked_api_key', 401);

  const suspended = await createTestKey(db, { status: 'suspended' });
  assertError(t, await app.inject({ url: '/v1/billing', headers: bearer(suspended.key) }), 'account_suspended', 403);

  const narrow = await createTestKey(db, { scopes: ['jobs:read'] });
  const res = await app.inject({ url: '/v1/billing', headers: bearer(narrow.key) });
  assertError(t, res, 'insufficient_scope', 403);
  t.match(res.json().error.message, /billing:read/);
});

t.test('behavior: concurrent requests share key lookups and each gets its own account', async (t) => {
  const { app, db } = await buildTestApp(t);
  const keys = await Promise.all(Array.from({ length: 12 }, () => createTestKey(db, { scopes: ['billing:read'] })));
  const revoked = await createTestKey(db);
  await db.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [revoked.keyId]);
  const unknown = generateApiKey('test');
  // Each account gets one billing entry of its own, so an answer shows whose key resolved.
  const entryIds: string[] = [];
  for (const key of keys) entryIds.push(await insertBillingEntry(db, { accountId: key.accountId, type: 'funded', amountMicroUsd: 1 }));
  const answers = await Promise.all([...keys.map((k) => k.key), revoked.key, unknown].map((key) => app.inject({ url: '/v1/billing', headers: bearer(key) })));
  keys.forEach((key, i) => {
    t.equal(answers[i]!.statusCode, 200);
    t.same(answers[i]!.json().data.map((e: { id: string }) => e.id), [entryIds[i]], `the entry of key ${key.keyId}’s own account`);
  });
  assertError(t, answers[keys.length]!, 'revoked_api_key', 401);
  assertError(t, answers[keys.length + 1]!, 'invalid_api_key', 401);
});

t.test('admin API: create a key, use it, suspend and reactivate its account', async (t) => {
  const { app } = await buildTestApp(t);
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
  assertError(t, await app.inject({ method: 'POST', url: '/admin/v1/api-keys', payload: {} }), 'missing_api_key', 401);
  assertError(t, await app.inject({ method: 'POST', url: '/admin/v1/api-keys', headers: { authorization: 'Bearer wrong' }, payload: {} }), 'invalid_api_key', 401);
  const bad = await app.inject({ method: 'POST', url: '/admin/v1/api-keys', headers: admin, payload: { walletAddress: '0x12', scopes: ['root'] } });
  assertError(t, bad, 'invalid_request', 400);
  t.same(bad.json().error.details.map((d: { field: string }) => d.field).sort(), ['scopes[0]', 'walletAddress']);

  const wallet = '0x70997970C51812dc3A010C7d01b50e0d17dc79C8';
  const created = await app.inject({ method: 'POST', url: '/admin/v1/api-keys', headers: admin, payload: { walletAddress: wallet, scopes: ['billing:read'] } });
  t.equal(created.statusCode, 201);
  const { key, accountId, walletAddress } = created.json();
  t.equal(walletAddress, wallet.toLowerCase());
  t.equal((await app.inject({ url: '/v1/billing', headers: bearer(key) })).statusCode, 200);
  const again = await app.inject({ method: 'POST', url: '/admin/v1/api-keys', headers: admin, payload: { walletAddress: wallet, scopes: ['jobs:read'] } });
  t.equal(again.json().accountId, accountId, 'one account per primary wallet');

  t.equal((await app.inject({ method: 'POST', url: `/admin/v1/accounts/${accountId}/suspend`, headers: admin })).statusCode, 200);
  assertError(t, await app.inject({ url: '/v1/billing', headers: bearer(key) }), 'account_suspended', 403);
  t.equal((await app.inject({ method: 'POST', url: `/admin/v1/accounts/${accountId}/reactivate`, headers: admin })).statusCode, 200);
  t.equal((await app.inject({ url: '/v1/billing', headers: bearer(key) })).statusCode, 200);
  assertError(t, await app.inject({ method: 'POST', url: '/admin/v1/api-keys/key_00000000000000000000000000/revoke', headers: admin }), 'not_found', 404);
  assertError(t, await app.inject({ method: 'POST', url: '/admin/v1/api-keys/nope/revoke', headers: admin }), 'invalid_request', 400);
});

t.test('admin routes do not exist without an admin token', async (t) => {
  const { app } = await buildTestApp(t, { env: { GF_ADMIN_TOKEN: '' } });
  assertError(t, await app.inject({ method: 'POST', url: '/admin/v1/api-keys', payload: {} }), 'not_found', 404);
});

t.test('GET /v1/billing lists the account’s own entries, newest first, page by page', async (t) => {
  const { app, db } = await buildTestApp(t);
  const mine = await createTestKey(db, { scopes: ['billing:read'] });
  const other = await createTestKey(db, { scopes: ['billing:read'] });
  const ids: string[] = [];
  for (let i = 0; i < 7; i++) ids.push(await insertBillingEntry(db, { accountId: mine.accountId, type: 'funded', amountMicroUsd: 1_000_000 + i, token: '0x' + 'a'.repeat(40), amount: `${1_000_000 + i}` }));
  await insertBillingEntry(db, { accountId: other.accountId, type: 'funded', amountMicroUsd: 5 });
  const seen: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const res: { statusCode: number; json(): { object: string; data: { id: string; jobId: null; txHash: null }[]; nextCursor: string | null } } =
      await app.inject({ url: `/v1/billing?limit=3${cursor ? `&cursor=${cursor}` : ''}`, headers: bearer(mine.key) });
    t.equal(res.statusCode, 200);
    const body = res.json();
    t.equal(body.object, 'list');
    for (const entry of body.data) {
      seen.push(entry.id);
      t.equal(entry.jobId, null, 'absent values are null, not omitted');
      t.equal(entry.txHash, null);
    }
    cursor = body.nextCursor;
    pages += 1;
  } while (cursor);
  t.equal(pages, 3);
  t.same(seen, [...ids].reverse(), 'every entry once, newest first, none of the other account');
});
