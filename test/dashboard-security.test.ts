import t from 'tap';
import { ANVIL_ACCOUNTS } from '@gpufarm/control-plane/testing';
import { Customer } from './helpers/customer.js';
import { lookAt, signInToDashboard } from './helpers/dashboard.js';
import { busyboxSpec } from './helpers/jobs.js';
import { Marketplace } from './helpers/marketplace.js';

/**
 * What the dashboard's sessions refuse, driven through Chromium and the real control plane on
 * anvil: a replayed sign-in, another account's objects, a write without the CSRF token, and a
 * wallet that switches account or chain.
 */

t.setTimeout(300_000);

const market = await Marketplace.start(t);
const FIRST = ANVIL_ACCOUNTS[1];
const SECOND = ANVIL_ACCOUNTS[2];

const errorCode = (body: unknown) => (body as { error?: { code?: string; message?: string } }).error;

t.test('behavior: a replayed Sign-In with Ethereum message is refused', async (t) => {
  const session = await signInToDashboard(t, market, FIRST.privateKey);
  t.match(session.signInBody, /"message":".*wants you to sign in with your Ethereum account/, 'the page sent an EIP-4361 message');
  const replay = await fetch(`${market.url}/dashboard/api/auth/sign-in`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: session.signInBody });
  const body: unknown = await replay.json();
  t.equal(replay.status, 401, 'the same message and signature a second time');
  t.equal(errorCode(body)?.code, 'invalid_api_key');
  t.match(errorCode(body)?.message, /nonce/i, 'the message says the nonce was used');
  t.notOk(replay.headers.get('set-cookie'), 'no session is made');
});

t.test('behavior: a second account cannot see the first one’s jobs, keys or logs through the pages or /dashboard/api', async (t) => {
  const first = await Customer.create(market, 1);
  const created = await first.createJob(busyboxSpec(market.images, 'echo secret'));
  const owner = await signInToDashboard(t, market, FIRST.privateKey);
  const madeKey = await owner.api('POST', '/keys', { body: { label: 'first account key', scopes: ['jobs:read'] }, csrf: true });
  t.equal(madeKey.status, 201);
  const keyId = (madeKey.body as { apiKey: { id: string } }).apiKey.id;
  t.equal((await owner.api('GET', `/v1/jobs/${created.job.id}`)).status, 200, 'the owner sees the job');

  const other = await signInToDashboard(t, market, SECOND.privateKey);
  for (const path of [`/v1/jobs/${created.job.id}`, `/v1/jobs/${created.job.id}/logs`, `/v1/jobs/${created.job.id}/funding`]) {
    const res = await other.api('GET', path);
    t.equal(res.status, 404, `GET /dashboard/api${path}: 404 for another account`);
    t.equal(errorCode(res.body)?.code, 'not_found');
  }
  const cancel = await other.api('POST', `/v1/jobs/${created.job.id}/cancel`, { body: {}, csrf: true });
  t.equal(cancel.status, 404, 'nor cancel it');
  const revoke = await other.api('POST', `/keys/${keyId}/revoke`, { body: {}, csrf: true });
  t.equal(revoke.status, 404, 'nor revoke its key');
  t.notMatch(JSON.stringify((await other.api('GET', '/keys')).body), keyId, 'its key list does not hold the first account’s key');
  t.notMatch(JSON.stringify((await other.api('GET', '/v1/jobs')).body), created.job.id, 'its job list does not hold the first account’s job');

  await other.page.goto(created.job.links.dashboard);
  await other.page.getByRole('alert').first().waitFor();
  t.equal(await other.page.getByText('secret').count(), 0, 'the job page shows nothing of the job');
  await lookAt(t, other, 'another account’s job');
  await other.page.getByRole('link', { name: 'API keys' }).click();
  await other.page.getByRole('table', { name: 'API keys' }).or(other.page.getByText(/no API keys/i)).first().waitFor();
  t.equal(await other.page.getByText('first account key').count(), 0, 'the keys page does not show the first account’s key');
  await lookAt(t, other, 'keys of the second account');
});

t.test('behavior: a state-changing dashboard request without the CSRF token is refused', async (t) => {
  const session = await signInToDashboard(t, market, FIRST.privateKey);
  const without = await session.api('POST', '/keys', { body: { scopes: ['jobs:read'] } });
  t.equal(without.status, 403, 'no X-CSRF-Token');
  t.equal(errorCode(without.body)?.code, 'forbidden');
  t.match(errorCode(without.body)?.message, /X-CSRF-Token/);
  const withToken = await session.api('POST', '/keys', { body: { scopes: ['jobs:read'] }, csrf: true });
  t.equal(withToken.status, 201, 'the same request with the token');
});

t.test('behavior: switching the wallet’s account or chain signs out', async (t) => {
  for (const change of ['account', 'chain'] as const) {
    const session = await signInToDashboard(t, market, FIRST.privateKey);
    const { page } = session;
    await page.getByRole('link', { name: 'API keys' }).click();
    if (change === 'account') await session.wallet.switchAccount(SECOND.privateKey);
    else await session.wallet.switchChain(1);
    await page.getByRole('heading', { name: 'Sign in' }).waitFor();
    await page.getByText(/signed out/i).first().waitFor();
    t.equal((await session.api('GET', '/auth/session')).status, 204, `after a ${change} switch the session is gone on the server`);
    await lookAt(t, session, `signed out after a ${change} switch`);
  }
});
