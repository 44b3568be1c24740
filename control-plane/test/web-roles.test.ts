import t from 'tap';
import { createFarm } from '../src/testing/factories.js';
import { assertError } from './helpers/assert.js';
import { bearer, createTestKey } from './helpers/app.js';
import { buildWebTestApp, devWallet, HOST, session, signIn } from './helpers/web.js';

const admin = devWallet(1);
const payout = devWallet(2);
const staff = devWallet(3);

t.test('default: the session names the areas a wallet may open; each area API answers its role only', async (t) => {
  const test = await buildWebTestApp(t, { GF_ADMIN_WALLETS: ` ${admin.address}, ${'0x' + 'ab'.repeat(20)} ` });
  const { app, db } = test;
  const farm = await createFarm(db, { slug: 'north-farm', payoutAddress: payout.address });
  await createFarm(db, { slug: 'other-farm', payoutAddress: '0x' + '12'.repeat(20) });
  const staffed = await createFarm(db, { slug: 'staffed-farm', payoutAddress: '0x' + '34'.repeat(20) });
  await db.query('INSERT INTO farm_operators (farm_id, wallet_address) VALUES ($1, $2)', [staffed.id, staff.address.toLowerCase()]);

  const asAdmin = await signIn(app, admin);
  t.same(asAdmin.res.json().roles, { admin: true, operatorFarms: [] }, 'sign-in tells the admin role');
  const adminSession = await app.inject({ url: '/admin/api/session', headers: session(asAdmin) });
  t.equal(adminSession.statusCode, 200, adminSession.body);
  t.equal(adminSession.json().address, admin.address.toLowerCase());
  assertError(t, await app.inject({ url: '/operator/api/farms', headers: session(asAdmin) }), 'forbidden', 403);

  const asPayout = await signIn(app, payout);
  const roles = (await app.inject({ url: '/dashboard/api/auth/session', headers: session(asPayout) })).json().roles;
  t.same(roles, { admin: false, operatorFarms: [{ id: farm.id, slug: 'north-farm', name: farm.name, payoutAddress: payout.address.toLowerCase(), role: 'payout' }] });
  const farms = await app.inject({ url: '/operator/api/farms', headers: session(asPayout) });
  t.equal(farms.statusCode, 200, farms.body);
  t.same(farms.json().data.map((f: { slug: string }) => f.slug), ['north-farm'], 'only the farm it is the payout wallet of');
  const denied = await app.inject({ url: '/admin/api/session', headers: session(asPayout) });
  assertError(t, denied, 'forbidden', 403);
  t.match(denied.json().error.message, /is not an admin of this service/);

  const asStaff = await signIn(app, staff);
  const staffFarms = (await app.inject({ url: '/operator/api/farms', headers: session(asStaff) })).json().data;
  t.same(staffFarms.map((f: { slug: string; role: string }) => [f.slug, f.role]), [['staffed-farm', 'operator']], 'a listed operator wallet runs that farm');
});

t.test('error: a customer session cannot open the admin or operator APIs; no session is not signed in', async (t) => {
  const { app, db } = await buildWebTestApp(t, { GF_ADMIN_WALLETS: admin.address });
  const customer = await signIn(app, devWallet(3));
  for (const url of ['/admin/api/session', '/operator/api/farms']) {
    const res = await app.inject({ url, headers: session(customer) });
    assertError(t, res, 'forbidden', 403);
    t.match(res.json().error.message, /sign in with/, `${url} says what to do`);
    assertError(t, await app.inject({ url, headers: { host: HOST } }), 'missing_api_key', 401);
  }
  // An API key is no credential there, even an admin's wallet's key.
  const key = await createTestKey(db, { walletAddress: admin.address });
  assertError(t, await app.inject({ url: '/admin/api/session', headers: { host: HOST, ...bearer(key.key) } }), 'invalid_api_key', 401);
});

t.test('error: GF_ADMIN_WALLETS refuses what is not an address, naming it', async (t) => {
  await t.rejects(buildWebTestApp(t, { GF_ADMIN_WALLETS: `${admin.address},not-a-wallet` }), /GF_ADMIN_WALLETS\.1: must be a 0x-prefixed 20-byte hex address/);
});

t.test('default: the operator and admin areas are pages of the web app; their APIs and the admin-token API are not', async (t) => {
  const { app } = await buildWebTestApp(t);
  for (const url of ['/operator/', '/operator/machines/mach_x', '/admin/', '/admin/fleet']) {
    const res = await app.inject({ url, headers: { host: HOST } });
    t.equal(res.statusCode, 200, url);
    t.match(res.headers['content-type'], /^text\/html/, url);
    t.match(res.headers['content-security-policy'], /default-src 'self'/, url);
    t.match(res.body, /<div id="root">/, url);
  }
  for (const url of ['/operator', '/admin']) {
    const res = await app.inject({ url, headers: { host: HOST } });
    t.equal(res.statusCode, 301, url);
    t.equal(res.headers.location, `${url}/`);
  }
  for (const url of ['/operator/api/unknown', '/admin/api/unknown', '/admin/v1/unknown']) {
    const res = await app.inject({ url, headers: { host: HOST } });
    t.equal(res.statusCode, 404, url);
    t.match(res.headers['content-type'], /^application\/json/, url);
  }
  t.notOk((await app.inject({ url: '/admin/', headers: { host: HOST, origin: 'https://evil.test' } })).headers['access-control-allow-origin'], 'never cross-origin');
});
