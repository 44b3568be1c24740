import { errorEnvelopeSchema } from '@gpufarm/shared';
import t from 'tap';
import { bearer, buildTestApp, createOfferedJob, createTestKey } from './helpers/app.js';
import { createPostgresTestDatabase } from './helpers/database.js';
import { baseOf, call, hold, sessionHeaders, signInOverSockets, type HeldResponse } from './helpers/sockets.js';
import { devWallet, fakeWebDist, PUBLIC_URL } from './helpers/web.js';

/**
 * One account cannot multiply its share by holding many API keys or dashboard sessions: its
 * live log streams, its keys, its sessions and its rate buckets are capped per account. Every
 * call goes over a real socket to the real server.
 */

/** 10 s into a 60 s window: pinned, so a window cannot end in the middle of a test. */
const MID_WINDOW = () => 1_700_000_010_000;

t.test('limits: one account with many keys and a dashboard session holds at most GF_LOG_STREAMS_PER_ACCOUNT streams', async (t) => {
  const wallet = devWallet(1);
  const { db } = await createPostgresTestDatabase(t);
  const test = await buildTestApp(t, { db, env: { GF_LOG_STREAMS_PER_ACCOUNT: '7', GF_PUBLIC_URL: PUBLIC_URL, GF_WEB_DIR: fakeWebDist(t) } });
  const keys = await Promise.all([1, 2, 3, 4].map(() => createTestKey(db, { walletAddress: wallet.address })));
  t.equal(new Set(keys.map((k) => k.accountId)).size, 1, 'four keys of one account');
  const jobId = await createOfferedJob(test, keys[0]!.key);
  await test.app.listen({ port: 0, host: '127.0.0.1' });
  const base = baseOf(test.app);
  const streams: HeldResponse[] = [];
  t.teardown(() => streams.forEach((s) => s.drop()));
  const open = async (headers: Record<string, string>, prefix = '') => {
    const s = await hold(base, `${prefix}/v1/jobs/${jobId}/logs/stream`, { accept: 'text/event-stream', ...headers });
    streams.push(s);
    return s;
  };

  // 5 on the first key (its own cap), 1 on the second, 1 from the dashboard: 7, the account's cap.
  for (let i = 0; i < 5; i++) t.equal((await open(bearer(keys[0]!.key))).status, 200);
  t.equal((await open(bearer(keys[1]!.key))).status, 200);
  const dashboard = await signInOverSockets(base, wallet);
  t.equal((await open(sessionHeaders(dashboard), '/dashboard/api')).status, 200, 'a dashboard session streams on the same account');

  // Held, not awaited to its end: a stream that is not refused stays open.
  const refused = await open(bearer(keys[2]!.key));
  t.equal(refused.status, 429, 'a fresh key of the account gets no eighth stream');
  t.equal(refused.res.headers['retry-after'], '10');
  if (refused.status === 429) {
    const body = errorEnvelopeSchema.parse(JSON.parse(await refused.body));
    t.equal(body.error.code, 'rate_limited');
    t.match(body.error.message, /an account may keep at most 7 over all its keys and sessions/);
  }
  t.equal((await open(sessionHeaders(dashboard), '/dashboard/api')).status, 429, 'nor does the dashboard');

  const other = await createTestKey(db);
  const otherJob = await test.app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(other.key), payload: { image: 'ghcr.io/acme/job:1', gpu: { count: 1 } } });
  const otherStream = await hold(base, `/v1/jobs/${otherJob.json().job.id as string}/logs/stream`, bearer(other.key));
  streams.push(otherStream);
  t.equal(otherStream.status, 200, 'another account streams');

  streams[0]!.drop();
  await streams[0]!.closed;
  let again: HeldResponse | undefined;
  // The server sees the close after the client: ask until the slot is free (bounded).
  for (let tries = 0; tries < 100 && !again; tries++) {
    const next = await open(bearer(keys[2]!.key));
    if (next.status === 200) again = next;
    else await new Promise((resolve) => setTimeout(resolve, 20));
  }
  t.ok(again, "a closed stream frees the account's place for any of its keys");
});

t.test('limits: GF_API_KEYS_PER_ACCOUNT keys not revoked; one more is 409 conflict in the envelope', async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  const test = await buildTestApp(t, { db, env: { GF_API_KEYS_PER_ACCOUNT: '3', GF_PUBLIC_URL: PUBLIC_URL, GF_WEB_DIR: fakeWebDist(t) } });
  await test.app.listen({ port: 0, host: '127.0.0.1' });
  const base = baseOf(test.app);
  const signedIn = await signInOverSockets(base);
  const create = () => call(base, { method: 'POST', path: '/dashboard/api/keys', headers: sessionHeaders(signedIn, { csrf: true }), body: { scopes: ['jobs:read'] } });
  const created: string[] = [];
  for (let i = 0; i < 3; i++) {
    const res = await create();
    t.equal(res.status, 201, `key ${i + 1} of 3`);
    created.push((res.json() as { apiKey: { id: string } }).apiKey.id);
  }
  const refused = await create();
  t.equal(refused.status, 409);
  const body = errorEnvelopeSchema.parse(refused.json());
  t.equal(body.error.code, 'conflict');
  t.match(body.error.message, /already has 3 API keys that are not revoked/);
  t.match(body.error.message, /Revoke a key/);
  t.same(body.error.details, [{ field: 'apiKeys', message: 'apiKeys 3 not revoked, the most an account may have' }]);
  t.equal((await db.query('SELECT id FROM api_keys')).length, 3, 'no fourth key was stored');

  const revoked = await call(base, { method: 'POST', path: `/dashboard/api/keys/${created[0]!}/revoke`, headers: sessionHeaders(signedIn, { csrf: true }) });
  t.equal(revoked.status, 200);
  t.equal((await create()).status, 201, 'a revoked key frees its place');
  t.equal((await create()).status, 409);

  const concurrent = await Promise.all([1, 2, 3, 4].map(() => call(base, { method: 'POST', path: '/dashboard/api/keys/' + created[1]! + '/revoke', headers: sessionHeaders(signedIn, { csrf: true }) }).then(() => create())));
  t.equal(concurrent.filter((r) => r.status === 201).length, 1, 'one revoke frees one place, however many creations race for it');
});

t.test('limits: GF_SESSIONS_PER_ACCOUNT sessions; a sign-in past it signs the oldest browser out', async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  const test = await buildTestApp(t, { db, env: { GF_SESSIONS_PER_ACCOUNT: '2', GF_PUBLIC_URL: PUBLIC_URL, GF_WEB_DIR: fakeWebDist(t) } });
  await test.app.listen({ port: 0, host: '127.0.0.1' });
  const base = baseOf(test.app);
  const sessionOf = (s: { cookie: string; csrfToken: string }) => call(base, { path: '/dashboard/api/auth/session', headers: sessionHeaders(s) });
  const first = await signInOverSockets(base);
  const second = await signInOverSockets(base);
  t.equal((await sessionOf(first)).status, 200);
  const third = await signInOverSockets(base);
  t.equal((await sessionOf(third)).status, 200, 'the newest sign-in works');
  t.equal((await sessionOf(second)).status, 200, 'the second newest too');
  t.equal((await sessionOf(first)).status, 204, 'the oldest is signed out');
  t.equal((await db.query('SELECT id FROM web_sessions')).length, 2, 'the account keeps two sessions');
  const otherAccount = await signInOverSockets(base, devWallet(2));
  t.equal((await sessionOf(otherAccount)).status, 200);
  t.equal((await sessionOf(third)).status, 200, "another account's sign-in ends none of this one's");
});

t.test("limits: an account's keys together stay under twice one key's limit (600 calls a minute); each key keeps 300", async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  const test = await buildTestApp(t, { db, now: MID_WINDOW });
  const wallet = devWallet(3).address;
  const [a, b, c] = await Promise.all([1, 2, 3].map(() => createTestKey(db, { walletAddress: wallet })));
  await test.app.listen({ port: 0, host: '127.0.0.1' });
  const base = baseOf(test.app);
  // One keep-alive connection: fetch reuses it.
  const get = (key: string) => fetch(`${base}/v1/billing`, { headers: bearer(key) });
  const statuses = new Map<number, number>();
  for (let i = 0; i < 300; i++) {
    const [ra, rb] = await Promise.all([get(a!.key), get(b!.key)]);
    for (const r of [ra, rb]) {
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      await r.arrayBuffer();
    }
  }
  t.same([...statuses], [[200, 600]], 'two keys at their own limit: 600 calls, all served');
  const third = await get(c!.key);
  t.equal(third.status, 429, "a third key of the account is past the account's ceiling");
  t.equal(third.headers.get('retry-after'), '30');
  const body = errorEnvelopeSchema.parse(await third.json());
  t.equal(body.error.code, 'rate_limited');
  t.match(body.error.message, /the account limit is 600 per 60 s for the whole account/);
  const elsewhere = await createTestKey(db);
  t.equal((await get(elsewhere.key)).status, 200, 'another account has its own ceiling');
});
