import { AGENT_MACHINE_DRAIN_PATH } from '@gpufarm/shared';
import t from 'tap';
import { assertError } from './helpers/assert.js';
import { AgentSocket, enrollMachine, hello, startGatewayApp } from './helpers/agent-client.js';
import { devWallet, fakeWebDist, PUBLIC_URL, session, signIn, type SignedIn } from './helpers/web.js';

/**
 * A drain carries who set it: an admin's drain is lifted by an admin only, never by the farm's
 * operator area nor by the machine's own `gf-agent undrain`; the farm lifts its own drains; an
 * admin lifts any. Through HTTP: the admin and operator areas' APIs and the machine-token route.
 */

const admin = devWallet(1);
const payout = devWallet(2);

function post(signedIn: SignedIn, url: string, payload: unknown = {}) {
  return { method: 'POST' as const, url, headers: { ...session(signedIn, { csrf: true }), 'content-type': 'application/json' }, payload: JSON.stringify(payload) };
}

t.test('drains and who lifts them', async (t) => {
  const test = await startGatewayApp(t, { env: { GF_PUBLIC_URL: PUBLIC_URL, GF_WEB_DIR: fakeWebDist(t), GF_ADMIN_WALLETS: admin.address } });
  const { app, db, url } = test;
  const { machineId, machineToken } = await enrollMachine(app, db);
  await db.query('UPDATE farms SET payout_address = $1 WHERE id = (SELECT farm_id FROM machines WHERE id = $2)', [payout.address.toLowerCase(), machineId]);
  const agent = await AgentSocket.connect(url, machineToken);
  t.teardown(() => agent.close());
  agent.send(hello());
  await agent.next('welcome');
  const asAdmin = await signIn(app, admin);
  const asOperator = await signIn(app, payout);
  const fromMachine = (undrain: boolean) =>
    fetch(`${url}${AGENT_MACHINE_DRAIN_PATH}`, { method: 'POST', headers: { authorization: `Bearer ${machineToken}`, 'content-type': 'application/json' }, body: JSON.stringify({ undrain }) });
  const drainOf = async () => (await db.query<{ drain_requested: boolean; drain_set_by: string | null; drain_reason: string | null }>('SELECT drain_requested, drain_set_by, drain_reason FROM machines WHERE id = $1', [machineId]))[0];

  t.test('error: forbidden for the operator area and the machine to lift an admin\'s drain; an admin lifts it', async (t) => {
    const drained = await app.inject(post(asAdmin, `/admin/api/machines/${machineId}/drain`, { reason: 'fraud review' }));
    t.equal(drained.statusCode, 200, drained.body);
    t.match(drained.json(), { machineId, drainRequested: true, drainSetBy: 'admin', drainReason: 'fraud review' });

    const byOperator = await app.inject(post(asOperator, `/operator/api/machines/${machineId}/undrain`));
    assertError(t, byOperator, 'forbidden', 403);
    t.match(byOperator.json().error.message, /An admin drained machine .* \(fraud review\): only an admin lifts that drain/);
    const byMachine = await fromMachine(true);
    t.equal(byMachine.status, 403);
    t.match(await byMachine.json(), { error: { code: 'forbidden', message: /only an admin lifts that drain/ } });
    t.same(await drainOf(), { drain_requested: true, drain_set_by: 'admin', drain_reason: 'fraud review' }, 'still the admin\'s drain');

    // Draining it again from the farm's side does not make it the farm's to lift.
    const again = await app.inject(post(asOperator, `/operator/api/machines/${machineId}/drain`, { reason: 'mine now' }));
    t.equal(again.statusCode, 200, again.body);
    t.match(again.json(), { drainRequested: true, earning: { code: 'draining', fix: /Only an admin lifts this drain/ } });
    t.equal((await fromMachine(false)).status, 200);
    t.same(await drainOf(), { drain_requested: true, drain_set_by: 'admin', drain_reason: 'fraud review' }, 'the admin\'s drain is kept as it was');
    assertError(t, await app.inject(post(asOperator, `/operator/api/machines/${machineId}/undrain`)), 'forbidden', 403);

    const lifted = await app.inject(post(asAdmin, `/admin/api/machines/${machineId}/undrain`));
    t.equal(lifted.statusCode, 200, lifted.body);
    t.match(lifted.json(), { drainRequested: false, drainSetBy: null });
  });

  t.test('behavior: the farm lifts its own drains, from the operator area or the machine; an admin lifts any', async (t) => {
    const drained = await app.inject(post(asOperator, `/operator/api/machines/${machineId}/drain`, { reason: 'new fans' }));
    t.equal(drained.statusCode, 200, drained.body);
    t.same(await drainOf(), { drain_requested: true, drain_set_by: 'operator', drain_reason: 'new fans' });
    t.equal((await fromMachine(true)).status, 200, 'the machine lifts the operator area\'s drain');
    t.same(await drainOf(), { drain_requested: false, drain_set_by: null, drain_reason: null });

    t.equal((await fromMachine(false)).status, 200);
    t.equal((await drainOf())?.drain_set_by, 'operator');
    t.equal((await app.inject(post(asOperator, `/operator/api/machines/${machineId}/undrain`))).statusCode, 200, 'the operator area lifts the machine\'s drain');

    t.equal((await fromMachine(false)).status, 200);
    const lifted = await app.inject(post(asAdmin, `/admin/api/machines/${machineId}/undrain`));
    t.equal(lifted.statusCode, 200, lifted.body);
    t.same(await drainOf(), { drain_requested: false, drain_set_by: null, drain_reason: null }, 'an admin lifts the farm\'s drain');

    // An admin draining a machine the farm drained takes it over.
    t.equal((await fromMachine(false)).status, 200);
    t.equal((await app.inject(post(asAdmin, `/admin/api/machines/${machineId}/drain`, { reason: 'audit' }))).statusCode, 200);
    t.equal((await drainOf())?.drain_set_by, 'admin');
    t.equal((await fromMachine(true)).status, 403);
  });
});
