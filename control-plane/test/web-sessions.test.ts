import t from 'tap';
import { assertError } from './helpers/assert.js';
import { buildWebTestApp, devWallet, HOST, issueNonce, postSignIn, session, signIn, siweMessage } from './helpers/web.js';

t.test('default: a nonce, a signed message, a session cookie and the session', async (t) => {
  const { app, db } = await buildWebTestApp(t);
  const nonceRes = await app.inject({ method: 'POST', url: '/dashboard/api/auth/nonce', headers: { host: HOST } });
  t.equal(nonceRes.statusCode, 201);
  t.match(nonceRes.json().nonce, /^[A-Za-z0-9]{16,}$/);
  t.ok(Date.parse(nonceRes.json().expiresAt) > Date.now() + 4 * 60_000, 'the nonce lives five minutes');

  const wallet = devWallet(1);
  const signedIn = await signIn(app, wallet);
  const view = signedIn.res.json();
  t.same(Object.keys(view).sort(), ['address', 'chainId', 'csrfToken', 'expiresAt', 'roles']);
  t.same(view.roles, { admin: false, operatorFarms: [] }, 'a wallet with no role is a customer only');
  t.equal(view.address, wallet.address.toLowerCase());
  t.equal(view.chainId, 4663);
  t.ok(Math.abs(Date.parse(view.expiresAt) - (Date.now() + 8 * 3600_000)) < 60_000, 'eight hours by default');
  const cookie = signedIn.res.cookies.find((c) => c.name === 'gf_session')!;
  t.match(cookie, { path: '/', httpOnly: true, sameSite: 'Strict', maxAge: 28_800 });
  t.notOk(cookie.secure, 'not Secure on an http public URL');
  t.match(cookie.value, /^[A-Za-z0-9_-]{43}$/);

  const [row] = await db.query<{ id: string; wallet_address: string }>('SELECT id, wallet_address FROM web_sessions');
  t.match(row!.id, /^[0-9a-f]{64}$/, 'the session id is a SHA-256');
  t.notMatch(JSON.stringify(await db.query('SELECT * FROM web_sessions')), cookie.value, 'the cookie value is stored nowhere');
  t.same(await db.query('SELECT nonce FROM web_nonces'), [{ nonce: nonceRes.json().nonce }], 'the nonce of the sign-in was deleted on use, the unused one kept');

  const current = await app.inject({ url: '/dashboard/api/auth/session', headers: session(signedIn) });
  t.equal(current.statusCode, 200);
  t.same(current.json(), view);
  const accounts = await db.query<{ wallet_address: string }>('SELECT wallet_address FROM accounts');
  t.same(accounts, [{ wallet_address: wallet.address.toLowerCase() }], 'the wallet became an account on first sign-in');
});

t.test('error: invalid_api_key for a replayed message (its nonce is used)', async (t) => {
  const { app } = await buildWebTestApp(t);
  const wallet = devWallet(1);
  const message = siweMessage(wallet.address, await issueNonce(app));
  const body = { message, signature: await wallet.signMessage(message) };
  t.equal((await postSignIn(app, body)).statusCode, 200);
  const replay = await postSignIn(app, body);
  assertError(t, replay, 'invalid_api_key', 401);
  t.match(replay.json().error.message, /nonce .* was not issued by this server or was already used: sign in again\./);
  t.same(replay.cookies, [], 'no cookie for a refused sign-in');
});

t.test('error: invalid_api_key naming each failed check', async (t) => {
  const { app, db } = await buildWebTestApp(t);
  const wallet = devWallet(1);
  const other = devWallet(2);
  const cases: Array<[string, (nonce: string) => string, RegExp, { signer?: typeof wallet; host?: string }?]> = [
    ['wrong domain', (n) => siweMessage(wallet.address, n, { domain: 'evil.test' }), /domain evil\.test is not this dashboard's \(dash\.test:8080\)/],
    ['wrong uri', (n) => siweMessage(wallet.address, n, { uri: 'https://evil.test/dashboard/' }), /URI https:\/\/evil\.test\/dashboard\/ is not on this dashboard's origin/],
    ['wrong chain id', (n) => siweMessage(wallet.address, n, { chainId: 1 }), /for chain 1, but this deployment is on chain 4663/],
    ['expired message', (n) => siweMessage(wallet.address, n, { issuedAt: new Date(Date.now() - 60_000), expirationTime: new Date(Date.now() - 1_000) }), /The message expired at/],
    ['issued long ago', (n) => siweMessage(wallet.address, n, { issuedAt: new Date(Date.now() - 10 * 60_000) }), /more than 5 minutes ago/],
    ['issued in the future', (n) => siweMessage(wallet.address, n, { issuedAt: new Date(Date.now() + 5 * 60_000) }), /is in the future/],
    ['bad signature', (n) => siweMessage(wallet.address, n), /The signature is not 0x[0-9a-fA-F]{40}'s signature of this message/, { signer: other }],
    ['unknown nonce', () => siweMessage(wallet.address, 'abcdef0123456789abcdef'), /not issued by this server or was already used/],
    ['wrong Host', (n) => siweMessage(wallet.address, n), /served at dash\.test:8080, but the request came to evil\.test/, { host: 'evil.test' }],
  ];
  for (const [name, build, expected, options] of cases) {
    const message = build(await issueNonce(app));
    const res = await postSignIn(app, { message, signature: await (options?.signer ?? wallet).signMessage(message) }, options?.host ? { host: options.host } : {});
    assertError(t, res, 'invalid_api_key', 401);
    t.match(res.json().error.message, expected, name);
    t.match(res.json().error.message, /sign in again\.$/, `${name}: says to sign in again`);
  }
  const [expiredNonce] = [await issueNonce(app)];
  await db.query(`UPDATE web_nonces SET expires_at = now() - interval '1 second' WHERE nonce = $1`, [expiredNonce]);
  const message = siweMessage(wallet.address, expiredNonce!);
  const res = await postSignIn(app, { message, signature: await wallet.signMessage(message) });
  assertError(t, res, 'invalid_api_key', 401);
  t.match(res.json().error.message, /nonce .* expired: sign in again/);
  t.same(await db.query('SELECT * FROM web_sessions'), [], 'no session was opened');
});

t.test('error: invalid_request naming the field of a malformed body or message', async (t) => {
  const { app } = await buildWebTestApp(t);
  const wallet = devWallet(1);
  const noSignature = await postSignIn(app, { message: 'hello' } as { message: string; signature: string });
  assertError(t, noSignature, 'invalid_request', 400);
  t.equal(noSignature.json().error.details[0].field, 'signature');
  const notHex = await postSignIn(app, { message: siweMessage(wallet.address, await issueNonce(app)), signature: 'zz' });
  assertError(t, notHex, 'invalid_request', 400);
  t.equal(notHex.json().error.details[0].field, 'signature');
  const notSiwe = await postSignIn(app, { message: 'please sign me', signature: '0x1234' });
  assertError(t, notSiwe, 'invalid_request', 400);
  t.equal(notSiwe.json().error.details[0].field, 'message');
  t.match(notSiwe.json().error.message, /not an EIP-4361 message/);
});

t.test('behavior: sign-in rotates the cookie; sign-out ends the session', async (t) => {
  const { app, db } = await buildWebTestApp(t);
  const first = await signIn(app);
  const second = await signIn(app, devWallet(1), { cookie: `gf_session=${first.cookie}` });
  t.not(second.cookie, first.cookie, 'a new cookie');
  t.equal((await app.inject({ url: '/dashboard/api/auth/session', headers: session(first) })).statusCode, 204, 'the replaced session is no session');
  t.equal((await app.inject({ url: '/dashboard/api/auth/session', headers: session(second) })).statusCode, 200);
  t.equal((await db.query('SELECT id FROM web_sessions')).length, 1, 'the previous session was deleted');

  const noToken = await app.inject({ method: 'POST', url: '/dashboard/api/auth/sign-out', headers: session(second) });
  assertError(t, noToken, 'forbidden', 403);
  const out = await app.inject({ method: 'POST', url: '/dashboard/api/auth/sign-out', headers: session(second, { csrf: true }) });
  t.equal(out.statusCode, 204);
  const cleared = out.cookies.find((c) => c.name === 'gf_session')!;
  t.equal(cleared.value, '');
  t.ok(cleared.maxAge === 0 || (cleared.expires && cleared.expires.getTime() <= Date.now()), 'the cookie is cleared');
  const after = await app.inject({ url: '/dashboard/api/auth/session', headers: session(second) });
  t.equal(after.statusCode, 204, 'signed out: the probe answers no session');
  t.equal(after.body, '');
  assertError(t, await app.inject({ url: '/dashboard/api/keys', headers: session(second) }), 'missing_api_key', 401);
  t.same(await db.query('SELECT id FROM web_sessions'), []);
});

t.test('error: missing_api_key for an expired session', async (t) => {
  const { app, db } = await buildWebTestApp(t);
  const signedIn = await signIn(app);
  await db.query(`UPDATE web_sessions SET expires_at = now() - interval '1 second'`);
  const res = await app.inject({ url: '/dashboard/api/v1/jobs', headers: session(signedIn) });
  assertError(t, res, 'missing_api_key', 401);
  t.equal(res.json().error.message, 'Your session expired: sign in again.');
});

t.test('behavior: GF_SESSION_TTL_SECONDS sets the session length and Max-Age', async (t) => {
  const { app } = await buildWebTestApp(t, { GF_SESSION_TTL_SECONDS: '600' });
  const signedIn = await signIn(app);
  t.equal(signedIn.res.cookies.find((c) => c.name === 'gf_session')!.maxAge, 600);
  t.ok(Math.abs(Date.parse(signedIn.res.json().expiresAt) - (Date.now() + 600_000)) < 30_000);
});

t.test('error: account_suspended for a suspended account’s session and sign-in', async (t) => {
  const { app, db } = await buildWebTestApp(t);
  const signedIn = await signIn(app);
  await db.query(`UPDATE accounts SET status = 'suspended'`);
  assertError(t, await app.inject({ url: '/dashboard/api/keys', headers: session(signedIn) }), 'account_suspended', 403);
  const wallet = devWallet(1);
  const message = siweMessage(wallet.address, await issueNonce(app));
  assertError(t, await postSignIn(app, { message, signature: await wallet.signMessage(message) }), 'account_suspended', 403);
});
