import t from 'tap';
import { assertError } from './helpers/assert.js';
import { ADMIN_TOKEN, bearer } from './helpers/app.js';
import { buildWebTestApp, devWallet, session, signIn, type SignedIn } from './helpers/web.js';

/**
 * A farm's listed operator wallets were chosen by its payout wallet: when an admin gives the farm
 * another payout address, they stop running it (their sessions too) until the new payout wallet
 * lists them. Through HTTP: the admin API, the operator area's API and its sessions.
 */

const oldOwner = devWallet(1);
const staff = devWallet(2);
const newOwner = devWallet(3);

t.test('behavior: a new payout address removes the operator wallets the old one listed', async (t) => {
  const { app, db } = await buildWebTestApp(t);
  const token = (payoutAddress: string) =>
    app.inject({ method: 'POST', url: '/admin/v1/enrollment-tokens', headers: bearer(ADMIN_TOKEN), payload: { farm: 'east-farm', payoutAddress, regionKey: 'us-east', pricePerGpuHour: '0.5' } });
  const farmsOf = (signedIn: SignedIn) => app.inject({ url: '/operator/api/farms', headers: session(signedIn) });

  const first = await token(oldOwner.address);
  t.equal(first.statusCode, 201, first.body);
  t.equal(first.json().payoutChange, null, 'a new farm changes no payout');
  const asOld = await signIn(app, oldOwner);
  const farmId = (await farmsOf(asOld)).json().data[0].id as string;
  const added = await app.inject({ method: 'POST', url: `/operator/api/farms/${farmId}/operators`, headers: session(asOld, { csrf: true }), payload: { wallet: staff.address } });
  t.equal(added.statusCode, 201, added.body);
  const asStaff = await signIn(app, staff);
  t.match((await farmsOf(asStaff)).json(), { data: [{ id: farmId, role: 'operator' }] }, 'the listed wallet runs the farm');

  const same = await token(oldOwner.address.toLowerCase());
  t.equal(same.json().payoutChange, null, 'the same address again is no change');
  t.equal((await farmsOf(asStaff)).statusCode, 200, 'and keeps the operators');

  const changed = await token(newOwner.address);
  t.equal(changed.statusCode, 201, changed.body);
  t.same(changed.json().payoutChange, { from: oldOwner.address.toLowerCase(), to: newOwner.address.toLowerCase(), operatorsRemoved: [staff.address.toLowerCase()] });

  const staffNow = await farmsOf(asStaff);
  assertError(t, staffNow, 'forbidden', 403);
  t.match(staffNow.json().error.message, /runs no farm/, 'the removed wallet\'s open session runs the farm no more');
  assertError(t, await farmsOf(asOld), 'forbidden', 403);
  const asNew = await signIn(app, newOwner);
  t.match((await farmsOf(asNew)).json(), { data: [{ id: farmId, role: 'payout' }] });
  t.same((await app.inject({ url: `/operator/api/farms/${farmId}/operators`, headers: session(asNew) })).json(), { data: [] }, 'the new payout wallet starts with no operators');

  const [audit] = await db.query<{ details: { payoutChange: unknown } }>(`SELECT details FROM audit_log WHERE action = 'enrollment_token.create' ORDER BY id DESC LIMIT 1`);
  t.same(audit?.details.payoutChange, changed.json().payoutChange, 'the audit log records the change and the wallets removed');
});
