import t from 'tap';
import { ANVIL_ACCOUNTS } from '@gpufarm/control-plane/chain/anvil.js';
import { lookAt, signInToDashboard } from './helpers/dashboard.js';
import { Marketplace } from './helpers/marketplace.js';

/**
 * The operator and admin areas of the web app in Chromium, against the real control plane on
 * anvil: who may open which area, and what each area's pages do.
 */

t.setTimeout(600_000);

const ADMIN = ANVIL_ACCOUNTS[2];
const OPERATOR = ANVIL_ACCOUNTS[3];
const CUSTOMER = ANVIL_ACCOUNTS[1];
const FARM = 'fleet-farm';

const market = await Marketplace.start(t, { env: { GF_ADMIN_WALLETS: ADMIN.address } });
// The farm whose payout wallet is OPERATOR (a token makes the farm).
await market.createEnrollmentToken({ farm: FARM, region: 'europe-west', priceUsd: '0.50', payout: OPERATOR.address });

t.test('error: a customer session cannot open /admin or /operator: the page says so and shows no area link', async (t) => {
  const session = await signInToDashboard(t, market, CUSTOMER.privateKey);
  const { page } = session;
  t.equal(await page.getByRole('navigation', { name: 'Areas' }).count(), 0, 'a customer sees no link to other areas');
  for (const area of ['admin', 'operator'] as const) {
    await page.goto(`${market.url}/${area}/`);
    const alert = page.getByRole('alert').filter({ hasText: `You cannot open the ${area} area` });
    await alert.waitFor();
    t.match(await alert.textContent(), CUSTOMER.address.toLowerCase(), `the ${area} page names the signed-in wallet`);
    t.equal(await page.getByRole('table').count(), 0, `the ${area} page shows no data`);
    await lookAt(t, session, `customer at /${area}`);
  }
  const res = await session.api('GET', '/auth/session');
  t.equal(res.status, 200, 'the customer stays signed in to the dashboard');
});

t.test('behavior: an admin and an operator see the links to their areas; the operator page names its farm and its role', async (t) => {
  const admin = await signInToDashboard(t, market, ADMIN.privateKey);
  const adminAreas = admin.page.getByRole('navigation', { name: 'Areas' });
  t.same(await adminAreas.getByRole('link').allTextContents(), ['Dashboard', 'Admin'], 'the admin sees the dashboard and admin areas');
  await adminAreas.getByRole('link', { name: 'Admin' }).click();
  await admin.page.waitForURL(`${market.url}/admin/overview`);
  await admin.page.getByRole('heading', { name: 'Fleet overview' }).waitFor();
  t.equal(await admin.page.getByText('You cannot open').count(), 0, 'the admin may open the admin area');

  const operator = await signInToDashboard(t, market, OPERATOR.privateKey);
  const operatorAreas = operator.page.getByRole('navigation', { name: 'Areas' });
  t.same(await operatorAreas.getByRole('link').allTextContents(), ['Dashboard', 'Operator'], 'the payout wallet sees the dashboard and operator areas');
  await operator.page.goto(`${market.url}/operator/operators`);
  const farm = operator.page.getByRole('region', { name: new RegExp(`\\(${FARM}\\)`) });
  await farm.waitFor();
  t.match(await farm.textContent(), /are its payout wallet/, 'the page says the wallet is the farm’s payout wallet');
  t.equal(await farm.getByRole('button', { name: 'Add operator' }).count(), 1, 'the payout wallet may add operators');
  await lookAt(t, operator, 'operator: operators of the farm');
});
