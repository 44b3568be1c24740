import t from 'tap';
import { assertError } from './helpers/assert.js';
import { loadConfig } from '../src/config.js';
import { buildTestApp } from './helpers/app.js';
import { createPostgresTestDatabase } from './helpers/database.js';
import { browserCookieOf, buildWebTestApp, devWallet, fakeWebDist, HOST, issueNonce, postSignIn, signIn, siweMessage } from './helpers/web.js';

/**
 * The web app's cookies through HTTP: `__Host-` cookies (Secure, Path=/, no Domain) when the
 * deployment is served over https, the unprefixed fallback over plain http, and sign-in nonces
 * bound to the browser that asked for them (its `gf_browser` cookie).
 */

/** The Set-Cookie header of `name` as the server sent it. */
function setCookieLine(res: { headers: Record<string, unknown> }, name: string): string {
  const raw = res.headers['set-cookie'];
  const lines = Array.isArray(raw) ? (raw as string[]) : typeof raw === 'string' ? [raw] : [];
  const line = lines.find((l) => l.startsWith(`${name}=`));
  if (!line) throw new Error(`no Set-Cookie for ${name} in ${JSON.stringify(lines)}`);
  return line;
}

t.test('behavior: over https the session and browser cookies are __Host- cookies: Secure, Path=/, no Domain', async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  const { app } = await buildTestApp(t, { db, env: { GF_PUBLIC_URL: 'https://dash.test', GF_WEB_DIR: fakeWebDist(t) } });
  const wallet = devWallet(2);
  const nonceRes = await app.inject({ method: 'POST', url: '/dashboard/api/auth/nonce', headers: { host: 'dash.test' } });
  t.match(setCookieLine(nonceRes, '__Host-gf_browser'), /^__Host-gf_browser=[A-Za-z0-9_-]{43}; Max-Age=300; Path=\/; HttpOnly; Secure; SameSite=Strict$/);
  const browser = browserCookieOf(nonceRes);
  const message = siweMessage(wallet.address, nonceRes.json().nonce, { domain: 'dash.test', uri: 'https://dash.test/dashboard/' });
  const res = await postSignIn(app, { message, signature: await wallet.signMessage(message) }, { host: 'dash.test', cookie: browser });
  t.equal(res.statusCode, 200, res.body);
  const line = setCookieLine(res, '__Host-gf_session');
  t.match(line, /^__Host-gf_session=[A-Za-z0-9_-]{43}; Max-Age=28800; Path=\/; HttpOnly; Secure; SameSite=Strict$/);
  t.notMatch(line, /Domain=/i, 'no Domain');
  t.notOk(res.cookies.some((c) => c.name === 'gf_session'), 'no unprefixed cookie');
  const value = res.cookies.find((c) => c.name === '__Host-gf_session')!.value;

  const current = await app.inject({ url: '/dashboard/api/auth/session', headers: { host: 'dash.test', cookie: `__Host-gf_session=${value}` } });
  t.equal(current.statusCode, 200, 'the __Host- cookie is the session');
  const unprefixed = await app.inject({ url: '/dashboard/api/auth/session', headers: { host: 'dash.test', cookie: `gf_session=${value}` } });
  t.equal(unprefixed.statusCode, 204, 'a cookie another host or an http page could set is no session');

  const out = await app.inject({ method: 'POST', url: '/dashboard/api/auth/sign-out', headers: { host: 'dash.test', cookie: `__Host-gf_session=${value}`, 'x-csrf-token': res.json().csrfToken } });
  t.equal(out.statusCode, 204);
  t.match(setCookieLine(out, '__Host-gf_session'), /^__Host-gf_session=; Max-Age=0; Path=\/; Expires=[^;]+; HttpOnly; Secure; SameSite=Strict$/, 'cleared with the same attributes');
});

t.test('behavior: over plain http the cookies have no prefix and no Secure (the local development fallback)', async (t) => {
  const { app } = await buildWebTestApp(t);
  const nonceRes = await app.inject({ method: 'POST', url: '/dashboard/api/auth/nonce', headers: { host: HOST } });
  t.match(setCookieLine(nonceRes, 'gf_browser'), /^gf_browser=[A-Za-z0-9_-]{43}; Max-Age=300; Path=\/; HttpOnly; SameSite=Strict$/);
  const signedIn = await signIn(app);
  t.match(setCookieLine(signedIn.res, 'gf_session'), /^gf_session=[A-Za-z0-9_-]{43}; Max-Age=28800; Path=\/; HttpOnly; SameSite=Strict$/);
});

t.test('error: invalid_api_key for a nonce another browser asked for', async (t) => {
  const { app, db } = await buildWebTestApp(t);
  const wallet = devWallet(1);
  // A message signed for a nonce the test browser asked for, posted from a browser without its cookie.
  const noCookie = siweMessage(wallet.address, await issueNonce(app));
  const bare = await postSignIn(app, { message: noCookie, signature: await wallet.signMessage(noCookie) }, {}, { otherBrowser: true });
  assertError(t, bare, 'invalid_api_key', 401);
  t.match(bare.json().error.message, /The nonce [0-9a-f]+ was issued to another browser .*: sign in again\./, 'a browser without the cookie is another browser');
  t.same(bare.cookies, [], 'no session cookie');

  // Posted from a browser that has a browser cookie of its own.
  const message = siweMessage(wallet.address, await issueNonce(app));
  const body = { message, signature: await wallet.signMessage(message) };
  const elsewhere = await postSignIn(app, body, { cookie: browserCookieOf(await app.inject({ method: 'POST', url: '/dashboard/api/auth/nonce', headers: { host: HOST } })) }, { otherBrowser: true });
  assertError(t, elsewhere, 'invalid_api_key', 401);
  t.match(elsewhere.json().error.message, /issued to another browser/);
  t.same(await db.query('SELECT id FROM web_sessions'), [], 'no session was opened');

  // The browser that asked signs in; two nonces of one browser (two tabs) both work.
  const first = await app.inject({ method: 'POST', url: '/dashboard/api/auth/nonce', headers: { host: HOST } });
  const browser = browserCookieOf(first);
  const secondNonce = await issueNonce(app, HOST, browser);
  t.equal(browserCookieOf(await app.inject({ method: 'POST', url: '/dashboard/api/auth/nonce', headers: { host: HOST, cookie: browser } })), browser, 'the browser keeps its cookie');
  for (const nonce of [first.json().nonce as string, secondNonce]) {
    const m = siweMessage(wallet.address, nonce);
    const res = await postSignIn(app, { message: m, signature: await wallet.signMessage(m) }, { cookie: browser }, { otherBrowser: true });
    t.equal(res.statusCode, 200, res.body);
  }
});


t.test('error: invalid_config for a mainnet deployment served over plain http beyond this host', async (t) => {
  t.throws(() => loadConfig({ GF_ENVIRONMENT: 'mainnet', GF_PUBLIC_URL: 'http://dash.example.com' }), { code: 'invalid_config', message: /GF_PUBLIC_URL: must be an https URL when GF_ENVIRONMENT is mainnet .*\(got "http:\/\/dash\.example\.com"\)/ });
  t.throws(() => loadConfig({ GF_ENVIRONMENT: 'mainnet', HOST: '10.0.0.5' }), { code: 'invalid_config', message: /GF_PUBLIC_URL: must be an https URL/ }, 'the default public URL on a LAN address');
  t.equal(loadConfig({ GF_ENVIRONMENT: 'mainnet', GF_PUBLIC_URL: 'https://dash.example.com' }).publicUrl, 'https://dash.example.com');
  t.equal(loadConfig({ GF_ENVIRONMENT: 'mainnet' }).publicUrl, 'http://127.0.0.1:8080', 'loopback http stays allowed');
  t.equal(loadConfig({ GF_ENVIRONMENT: 'testnet', GF_PUBLIC_URL: 'http://dash.example.com' }).publicUrl, 'http://dash.example.com', 'test deployments may run on http');
});
