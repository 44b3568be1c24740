import t from 'tap';
import { createChallenge, createFarm, createMachine } from '../src/testing/factories.js';
import { GpuSampleAggregator, maintainHistory } from '../src/fleet/history.js';
import { assertError } from './helpers/assert.js';
import { contractChecked } from './helpers/fleet-contract.js';
import { ADMIN_TOKEN, bearer, createTestKey } from './helpers/app.js';
import { AgentSocket, enrollMachine, heartbeat, hello, startGatewayApp } from './helpers/agent-client.js';
import { devWallet, fakeWebDist, HOST, PUBLIC_URL, session, signIn, type SignedIn } from './helpers/web.js';

const admin = devWallet(1);
const customer = devWallet(2);

async function adminApp(t: Parameters<typeof startGatewayApp>[0]) {
  const test = await startGatewayApp(t, { env: { GF_PUBLIC_URL: PUBLIC_URL, GF_WEB_DIR: fakeWebDist(t), GF_ADMIN_WALLETS: admin.address } });
  const { app, checked } = contractChecked(test.app);
  const asAdmin = await signIn(app, admin);
  return { ...test, app, asAdmin, checkedAnswers: checked };
}

function post(signedIn: SignedIn, url: string, payload: unknown = {}) {
  return { method: 'POST' as const, url, headers: { ...session(signedIn, { csrf: true }), 'content-type': 'application/json' }, payload: JSON.stringify(payload) };
}

t.test('admin actions through HTTP', async (t) => {
  const { app, db, url, asAdmin, checkedAnswers } = await adminApp(t);
  const { machineId, machineToken } = await enrollMachine(app, db);
  const agent = await AgentSocket.connect(url, machineToken);
  t.teardown(() => agent.close());
  agent.send(hello());
  await agent.next('welcome');
  const farmId = (await db.query<{ farm_id: string }>('SELECT farm_id FROM machines WHERE id = $1', [machineId]))[0]!.farm_id;

  t.test('behavior: an admin drain reaches the agent link as `drain`, is audited with the wallet, and shows in the table', async (t) => {
    const deadline = new Date(Date.now() + 7200_000).toISOString();
    const res = await app.inject(post(asAdmin, `/admin/api/machines/${machineId}/drain`, { deadline, reason: 'swap PSU' }));
    t.equal(res.statusCode, 200, res.body);
    t.same(res.json(), { machineId, drainRequested: true, drainSetBy: 'admin', drainDeadline: deadline, drainReason: 'swap PSU', cordoned: false });
    t.same(await agent.next('drain'), { type: 'drain', undrain: false, reason: 'swap PSU' });
    const audit = (await app.inject({ url: '/admin/api/audit', headers: session(asAdmin) })).json();
    t.match(audit.data[0], { actor: { kind: 'admin_wallet', id: admin.address.toLowerCase() }, action: 'machine.drain', targetType: 'machine', targetId: machineId, at: /^\d{4}-/ });
    // Nothing runs on it: drained at once. A GPU reserved by an assignment keeps it draining.
    const table = (await app.inject({ url: '/admin/api/machines?state=drained', headers: session(asAdmin) })).json();
    t.equal(table.total, 1);
    t.match(table.data[0], { id: machineId, farm: { id: farmId }, state: 'drained', drainRequested: true, drainDeadline: deadline, gpuCount: 2 });
    await db.query('UPDATE machine_gpus SET busy = true WHERE machine_id = $1', [machineId]);
    const busy = (await app.inject({ url: '/admin/api/machines?state=draining', headers: session(asAdmin) })).json();
    t.match(busy.data, [{ id: machineId, state: 'draining' }], 'draining while a job holds its GPUs');
    t.match((await app.inject({ url: '/admin/api/fleet/overview?window=7d', headers: session(asAdmin) })).json().machines, { draining: 1, drained: 0 }, 'the overview counts it the same way');
    await db.query('UPDATE machine_gpus SET busy = false WHERE machine_id = $1', [machineId]);
    const events = (await app.inject({ url: `/admin/api/events?type=machine.drained&machine=${machineId}`, headers: session(asAdmin) })).json();
    t.match(events.data, [{ type: 'machine.drained', machineId, farmId, message: /swap PSU/ }]);

    const undrained = await app.inject(post(asAdmin, `/admin/api/machines/${machineId}/undrain`));
    t.equal(undrained.json().drainRequested, false, undrained.body);
    t.same(await agent.next('drain'), { type: 'drain', undrain: true, reason: null });
  });

  t.test('behavior: cordon, quarantine and their lists', async (t) => {
    t.equal((await app.inject(post(asAdmin, `/admin/api/machines/${machineId}/cordon`, { reason: 'fan noise' }))).json().cordoned, true);
    t.match((await app.inject({ url: `/admin/api/machines/${machineId}`, headers: session(asAdmin) })).json(), {
      machine: { id: machineId, state: 'cordoned', cordoned: true, gpuCount: 2 },
      gpus: [{ index: 0, classId: 'rtx-4090-24gb' }],
      recentJobs: [],
      startTimes: { sinceDays: 30, maxRuns: 100, toRunningMs: { runs: 0, p50: null, p95: null }, toFirstLogMs: { runs: 0, p50: null, p95: null } },
    });
    t.equal((await app.inject(post(asAdmin, `/admin/api/machines/${machineId}/uncordon`))).json().cordoned, false);
    const q = await app.inject(post(asAdmin, `/admin/api/farms/${farmId}/quarantine`, { reason: 'chargebacks' }));
    t.same(q.json(), { farmId, status: 'quarantined', quarantineReason: 'chargebacks' });
    const farms = (await app.inject({ url: '/admin/api/farms', headers: session(asAdmin) })).json();
    t.match(farms.data.find((f: { id: string }) => f.id === farmId), { status: 'quarantined', machines: 1 });
    await app.inject(post(asAdmin, `/admin/api/farms/${farmId}/unquarantine`));
    t.equal((await app.inject({ url: '/admin/api/farms', headers: session(asAdmin) })).json().data.find((f: { id: string }) => f.id === farmId).status, 'active');
    await agent.barrier();
    t.notOk(agent.received.some((m) => m.type === 'drain'), 'cordon and quarantine send the agent nothing');
  });

  t.test('behavior: suspending an account ends its sessions; a key is revoked; both audited', async (t) => {
    const asCustomer = await signIn(app, customer);
    const key = await createTestKey(db, { walletAddress: customer.address });
    const accounts = (await app.inject({ url: `/admin/api/accounts?wallet=${customer.address}`, headers: session(asAdmin) })).json();
    t.equal(accounts.data.length, 1);
    const account = accounts.data[0];
    t.match(account, { walletAddress: customer.address.toLowerCase(), status: 'active', keys: [{ id: key.keyId, revokedAt: null }] });
    const suspended = await app.inject(post(asAdmin, `/admin/api/accounts/${account.id}/suspend`, { reason: 'abuse' }));
    t.same(suspended.json(), { id: account.id, status: 'suspended', sessionsEnded: 1 });
    assertError(t, await app.inject({ url: '/dashboard/api/keys', headers: session(asCustomer) }), 'missing_api_key', 401);
    t.equal((await app.inject(post(asAdmin, `/admin/api/accounts/${account.id}/reactivate`))).json().status, 'active');
    const revoked = await app.inject(post(asAdmin, `/admin/api/keys/${key.keyId}/revoke`));
    t.match(revoked.json(), { id: key.keyId, revokedAt: /^\d{4}-/ });
    const audit = (await app.inject({ url: '/admin/api/audit?limit=3', headers: session(asAdmin) })).json();
    t.same(audit.data.map((e: { action: string }) => e.action), ['api_key.revoke', 'account.reactivate', 'account.suspend']);
    t.match(audit.data[2].details, { reason: 'abuse', sessionsEnded: 1 });
    const next = (await app.inject({ url: `/admin/api/audit?limit=3&cursor=${audit.nextCursor}`, headers: session(asAdmin) })).json();
    t.equal(next.data[0].action, 'farm.unquarantine', 'the next page goes on where the first ended');
  });

  t.test('behavior: the admin-token API writes are audited as the admin token', async (t) => {
    const res = await app.inject({ method: 'POST', url: '/admin/v1/api-keys', headers: bearer(ADMIN_TOKEN), payload: { walletAddress: devWallet(3).address, scopes: ['jobs:read'] } });
    t.equal(res.statusCode, 201, res.body);
    const audit = (await app.inject({ url: '/admin/api/audit?limit=1', headers: session(asAdmin) })).json();
    t.match(audit.data[0], { actor: { kind: 'admin_token', id: 'GF_ADMIN_TOKEN' }, action: 'api_key.create', targetType: 'api_key', targetId: res.json().keyId });
  });

  t.test('behavior: heartbeats become per-minute history, rolled into 15-minute rows; the overview counts the fleet', async (t) => {
    const samples = new GpuSampleAggregator();
    const base = Math.floor(Date.now() / 900_000) * 900_000 - 900_000;
    const gpu = (util: number) => [{ index: 0, uuid: 'GPU-sim-0-0000', temperatureC: 60 + util / 10, utilizationPercent: util, memoryUsedBytes: 1000, powerDrawWatts: 200 }];
    samples.add(machineId, gpu(40), base + 5_000);
    samples.add(machineId, gpu(60), base + 15_000);
    // A second replica's sums for the same minute add up with the first's.
    const other = new GpuSampleAggregator();
    other.add(machineId, gpu(80), base + 25_000);
    await samples.flush(db);
    await other.flush(db);
    samples.add(machineId, gpu(20), base + 65_000);
    t.equal(await samples.flush(db, { before: base + 119_000 }), 0, 'the minute under way stays in memory');
    t.equal(await samples.flush(db, { before: base + 120_000 }), 1, 'and is written once it ended');
    t.equal(samples.pending, 0);
    const hour = (await app.inject({ url: `/admin/api/machines/${machineId}/history?range=24h`, headers: session(asAdmin) })).json();
    t.equal(hour.resolutionSeconds, 60);
    t.same(hour.gpus[0].t.slice(0, 2), [base / 1000, base / 1000 + 60]);
    t.same(hour.gpus[0].utilizationPercent.slice(0, 2), [60, 20], 'the minute averages the three replicas’ samples');
    t.ok(hour.healthEvents.some((e: { type: string }) => e.type === 'machine.drained'), 'health events of the machine come along');

    const pass = await maintainHistory(db, base + 900_000 + 1000);
    t.ok(pass && pass.rolledQuarters >= 1);
    const week = (await app.inject({ url: `/admin/api/machines/${machineId}/history?range=7d`, headers: session(asAdmin) })).json();
    t.equal(week.resolutionSeconds, 900);
    t.same(week.gpus[0].t, [base / 1000]);
    t.same(week.gpus[0].utilizationPercent, [50], 'the quarter hour averages its minutes');
    t.same(week.gpus[0].powerWatts, [200]);
    await maintainHistory(db, base + 900_000 + 2000);
    const again = (await app.inject({ url: `/admin/api/machines/${machineId}/history?range=7d`, headers: session(asAdmin) })).json();
    t.same(again.gpus[0].utilizationPercent, [50], 'rolling up again changes nothing');

    const overview = (await app.inject({ url: '/admin/api/fleet/overview?window=7d', headers: session(asAdmin) })).json();
    t.match(overview, { machines: { online: 1 }, gpus: [{ classId: 'rtx-4090-24gb', regionKey: 'us-east', free: 2, busy: 0 }], jobs: { queued: 0, running: 0 }, series: { resolutionSeconds: 3600 } });
    t.equal(overview.series.machinesOnline.at(-1), 1, 'the upkeep recorded this minute’s fleet figures');
  });

  t.test('behavior: history partitions past their retention are dropped whole', async (t) => {
    const now = Date.now();
    const first = await maintainHistory(db, now);
    t.ok(first);
    const old = new Date(now - 3 * 86_400_000).toISOString().slice(0, 10);
    await db.query(`SELECT create_history_partition('gpu_samples_minute', $1::date)`, [old]);
    await db.query(`INSERT INTO gpu_samples_minute (machine_id, gpu_index, bucket, samples) VALUES ($1, 0, $2::date + interval '1 hour', 1)`, [machineId, old]);
    const pass = await maintainHistory(db, now);
    t.same(pass?.dropped, [`gpu_samples_minute_p${old.replaceAll('-', '')}`]);
    const [left] = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM gpu_samples_minute WHERE bucket < $1::date + interval '1 day'`, [old]);
    t.equal(left?.n, 0);
  });

  t.test('behavior: the machines table filters, sorts and pages with a total', async (t) => {
    const second = await enrollMachine(app, db);
    await db.query(`UPDATE machines SET last_heartbeat_at = now() - interval '1 hour' WHERE id = $1`, [second.machineId]);
    const url = '/admin/api/machines?sort=heartbeat_age&order=desc&limit=1';
    const page1 = (await app.inject({ url, headers: session(asAdmin) })).json();
    t.equal(page1.total, 2);
    t.equal(page1.data[0].id, second.machineId, 'the oldest heartbeat first');
    const page2 = (await app.inject({ url: `${url}&cursor=${page1.nextCursor}`, headers: session(asAdmin) })).json();
    t.equal(page2.data[0].id, machineId);
    t.equal(page2.nextCursor, null);
    assertError(t, await app.inject({ url: `/admin/api/machines?sort=failures&cursor=${page1.nextCursor}`, headers: session(asAdmin) }), 'invalid_request', 400);
    const byFarm = (await app.inject({ url: `/admin/api/machines?farm=${(await db.query<{ slug: string }>('SELECT slug FROM farms WHERE id = $1', [farmId]))[0]!.slug}`, headers: session(asAdmin) })).json();
    t.same(byFarm.data.map((m: { id: string }) => m.id), [machineId]);
    t.equal((await app.inject({ url: `/admin/api/machines?q=${machineId.slice(5, 15)}`, headers: session(asAdmin) })).json().total, 1);

    // Utilization: the mean over the GPUs of the last heartbeat that report one.
    const live = (index: number, utilizationPercent: number | null) => ({ index, uuid: `GPU-sim-0-000${index}`, temperatureC: 50, utilizationPercent, memoryUsedBytes: 1024, powerDrawWatts: 90 });
    agent.send(heartbeat({ gpus: [live(0, 30), live(1, 70), live(2, null)] }));
    await agent.barrier();
    const byUtilization = async (order: 'asc' | 'desc') =>
      (await app.inject({ url: `/admin/api/machines?sort=utilization&order=${order}`, headers: session(asAdmin) })).json().data.map((m: { id: string; utilizationPercent: number | null }) => [m.id, m.utilizationPercent]);
    t.same(await byUtilization('desc'), [[machineId, 50], [second.machineId, null]], 'a GPU without a figure is left out of the mean; unknown sorts lowest');
    t.same(await byUtilization('asc'), [[second.machineId, null], [machineId, 50]]);
    agent.send(heartbeat({ gpus: [live(0, 10), live(1, null)] }));
    await agent.barrier();
    t.same((await byUtilization('desc'))[0], [machineId, 10], 'each beat replaces the figure');
  });

  t.test('behavior: the verdict comes from the GPUs\' health: a warning keeps the machine at work, every GPU failed fails it', async (t) => {
    const verdictOf = async () => (await app.inject({ url: `/admin/api/machines?q=${machineId}`, headers: session(asAdmin) })).json().data[0];
    t.match(await verdictOf(), { verdict: 'healthy', verdictReasons: [] });
    await db.query(`UPDATE machine_gpus SET health = 'warning', health_reasons = '["PCIe link at x8 of x16"]'::jsonb WHERE machine_id = $1 AND gpu_index = 1`, [machineId]);
    t.match(await verdictOf(), { verdict: 'warning', state: 'online', verdictReasons: ['GPU 1 warning: PCIe link at x8 of x16'] });
    t.same((await app.inject({ url: '/admin/api/machines?verdict=warning', headers: session(asAdmin) })).json().data.map((m: { id: string }) => m.id), [machineId], 'the filter uses it');
    await db.query(`UPDATE machine_gpus SET health = 'failed', health_reasons = '["XID 79: the GPU fell off the bus"]'::jsonb WHERE machine_id = $1`, [machineId]);
    t.match(await verdictOf(), { verdict: 'failed', state: 'failed', verdictReasons: ['no GPU is usable', /^GPU 0 failed: XID 79/, /^GPU 1 failed: XID 79/] });
    const detail = (await app.inject({ url: `/admin/api/machines/${machineId}`, headers: session(asAdmin) })).json();
    t.same(detail.gpus.map((g: { verdict: string; reasons: string[] }) => [g.verdict, g.reasons]), [['failed', ['XID 79: the GPU fell off the bus']], ['failed', ['XID 79: the GPU fell off the bus']]], 'each GPU with its own verdict');
    await db.query(`UPDATE machine_gpus SET health = 'healthy', health_reasons = '[]'::jsonb WHERE machine_id = $1`, [machineId]);
  });

  t.test('behavior: the machine page carries its GPU proof and its recent challenges, newest first', async (t) => {
    const farm = await createFarm(db);
    const proven = await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 2, pricePerGpuHourMicroUsd: 500_000, verification: 'unverified' });
    const failed = await createChallenge(db, { machineId: proven.id, state: 'failed', reason: 'the commitment came 9.1 s after the go, past the 6.2 s deadline', gpuCount: 2 });
    const failedDetail = (await app.inject({ url: `/admin/api/machines/${proven.id}`, headers: session(asAdmin) })).json();
    t.match(failedDetail.gpuProof, { verification: 'failed', reason: `GPU challenge ${failed.id} failed: the commitment came 9.1 s after the go, past the 6.2 s deadline`, provenAt: null, challengeId: failed.id });

    const passed = await createChallenge(db, { machineId: proven.id, state: 'passed', cause: 'retry', gpuCount: 2 });
    await db.query(`UPDATE gpu_challenges SET created_at = created_at + interval '1 second' WHERE id = $1`, [passed.id]);
    const detail = (await app.inject({ url: `/admin/api/machines/${proven.id}`, headers: session(asAdmin) })).json();
    t.match(detail.gpuProof, { verification: 'verified', reason: null, simulated: false, challengeId: passed.id, provenAt: /^\d{4}-/, verifiedAt: /^\d{4}-/, nextChallengeAt: /^\d{4}-/ });
    t.ok(Date.parse(detail.gpuProof.nextChallengeAt) > Date.now(), 'the idle re-check is ahead');
    t.same(detail.challenges.map((c: { id: string; state: string }) => [c.id, c.state]), [[passed.id, 'passed'], [failed.id, 'failed']], 'newest first');
    const [last] = detail.challenges;
    t.match(last, {
      cause: 'retry', simulated: false, classId: 'rtx-4090-24gb', shape: { m: 65_536, n: 4096, k: 4096, rounds: 1_200 },
      preSeed: /^[0-9a-f]{64}$/, goSeed: /^[0-9a-f]{64}$/, expectedSeconds: 5, deadlineSeconds: 9.3, elapsedSeconds: 5.012, checkMs: 310, reason: null,
      createdAt: /^\d{4}-/, goAt: /^\d{4}-/, committedAt: /^\d{4}-/, finishedAt: /^\d{4}-/,
    });
    t.equal(last.gpus.length, 2);
    t.equal(last.rowsChecked.length, 32, '16 rows opened per GPU');
    t.match(last.rowsChecked[0], { uuid: last.gpus[0].uuid, round: 0, row: 3 });

    const token = (await app.inject({ url: `/admin/v1/machines/${proven.id}`, headers: bearer(ADMIN_TOKEN) })).json();
    t.same(token.challenges, detail.challenges, 'the admin-token API shows the same challenges');
  });

  t.test('behavior: every answer read above keeps the fleet contract the web app parses (shared/src/fleet/api.ts)', async (t) => {
    t.ok(checkedAnswers() >= 20, `${checkedAnswers()} answers parsed by their contract schema`);
  });
});

t.test('error: roles, bad parameters naming the field, not_found', async (t) => {
  const { app, db, asAdmin } = await adminApp(t);
  const farm = await createFarm(db, { slug: 'role-farm' });
  const asCustomer = await signIn(app, customer);
  for (const url of ['/admin/api/fleet/overview', '/admin/api/machines', '/admin/api/events', '/admin/api/audit', '/admin/api/farms', '/admin/api/disputes', '/admin/api/accounts']) {
    assertError(t, await app.inject({ url, headers: session(asCustomer) }), 'forbidden', 403);
    assertError(t, await app.inject({ url, headers: { host: HOST } }), 'missing_api_key', 401);
    t.equal((await app.inject({ url, headers: session(asAdmin) })).statusCode, 200, url);
  }
  assertError(t, await app.inject(post(asCustomer, `/admin/api/farms/${farm.id}/quarantine`, { reason: 'x' })), 'forbidden', 403);
  const noCsrf = await app.inject({ method: 'POST', url: `/admin/api/farms/${farm.id}/quarantine`, headers: { ...session(asAdmin), 'content-type': 'application/json' }, payload: '{}' });
  t.equal(noCsrf.statusCode, 403, 'a write needs the CSRF token');

  const field = async (url: string, name: string, method: 'GET' | 'POST' = 'GET', payload?: unknown) => {
    const res = await app.inject(method === 'GET' ? { url, headers: session(asAdmin) } : post(asAdmin, url, payload));
    assertError(t, res, 'invalid_request', 400);
    t.ok(res.json().error.details.some((d: { field: string }) => d.field === name), `${url} names ${name}: ${res.body}`);
  };
  await field('/admin/api/machines?sort=age', 'sort');
  await field('/admin/api/machines?limit=0', 'limit');
  await field('/admin/api/machines?state=asleep', 'state');
  await field('/admin/api/machines?colour=red', 'colour');
  await field('/admin/api/machines?cursor=nonsense', 'cursor');
  await field('/admin/api/fleet/overview?window=1y', 'window');
  await field('/admin/api/events?type=machine.exploded', 'type');
  await field('/admin/api/audit?limit=501', 'limit');
  await field('/admin/api/accounts?wallet=bob', 'wallet');
  await field('/admin/api/machines/not-a-machine', 'id');
  await field(`/admin/api/machines/mach_${'0'.repeat(26)}/history?range=2y`, 'range');
  await field(`/admin/api/machines/mach_${'0'.repeat(26)}/drain`, 'deadline', 'POST', { deadline: 'tomorrow' });
  await field(`/admin/api/machines/mach_${'0'.repeat(26)}/drain`, 'when', 'POST', { when: 'now' });
  await field(`/admin/api/jobs/job_${'0'.repeat(26)}/resolve-dispute`, 'outcome', 'POST', { outcome: 'split' });
  await field(`/admin/api/farms/${farm.id}/quarantine`, 'reason', 'POST', { reason: 42 });

  const missing = `mach_${'0'.repeat(26)}`;
  for (const url of [`/admin/api/machines/${missing}`, `/admin/api/machines/${missing}/history`]) assertError(t, await app.inject({ url, headers: session(asAdmin) }), 'not_found', 404);
  for (const action of ['drain', 'undrain', 'cordon', 'uncordon']) assertError(t, await app.inject(post(asAdmin, `/admin/api/machines/${missing}/${action}`)), 'not_found', 404);
  assertError(t, await app.inject(post(asAdmin, `/admin/api/farms/farm_${'0'.repeat(26)}/quarantine`)), 'not_found', 404);
  assertError(t, await app.inject(post(asAdmin, `/admin/api/accounts/acct_${'0'.repeat(26)}/suspend`)), 'not_found', 404);
  assertError(t, await app.inject(post(asAdmin, `/admin/api/keys/key_${'0'.repeat(26)}/revoke`)), 'not_found', 404);
  assertError(t, await app.inject(post(asAdmin, `/admin/api/jobs/job_${'0'.repeat(26)}/resolve-dispute`, { outcome: 'refund' })), 'not_found', 404);
});
