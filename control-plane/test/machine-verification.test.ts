import { randomBytes } from 'node:crypto';
import t from 'tap';
import { capacityListSchema, type MachineInventory } from '@gpufarm/shared';
import { ADMIN_TOKEN } from './helpers/app.js';
import { AgentSocket, enrollBody, hello, newEnrollmentToken, runCanary, startGatewayApp, TEST_CANARY_IMAGE, testInventory, type GatewayTestApp } from './helpers/agent-client.js';

/**
 * Machine verification through HTTP and the agent's WebSocket: what a machine claims (GPUs,
 * driver, tier) is offered only after the control plane's own canary passed on it, again after
 * each driver or GPU change, and never while the GPU probe's `nvidia-smi -L` contradicts it.
 */

interface Enrolled {
  machineId: string;
  machineToken: string;
  farm: string;
}

async function enroll(s: GatewayTestApp, inventory: MachineInventory): Promise<Enrolled> {
  const farm = `verify-${randomBytes(4).toString('hex')}`;
  const token = await newEnrollmentToken(s.db, { farmSlug: farm });
  const res = await s.app.inject({ method: 'POST', url: '/agent/v1/enroll', payload: enrollBody(token, inventory) });
  if (res.statusCode !== 201) throw new Error(`enroll answered ${res.statusCode}: ${res.body}`);
  return { ...(res.json() as { machineId: string; machineToken: string }), farm };
}

/** The farm's offers in `GET /v1/capacity`, after the offer index reloaded. */
async function offersOf(s: GatewayTestApp, farm: string) {
  await s.offerIndex.refresh();
  const res = await s.app.inject({ url: `/v1/capacity?farm=${farm}` });
  return capacityListSchema.parse(res.json()).data;
}

interface MachineRecord {
  status: string;
  healthReason: string | null;
  claimedTier: string | null;
  verification: { status: string; reason: string | null; canaryJobId: string | null; verifiedAt: string | null; claims: { driverVersion: string | null; gpus: unknown[] } | null };
}

async function machineRecord(s: GatewayTestApp, machineId: string): Promise<MachineRecord> {
  const res = await s.app.inject({ url: `/admin/v1/machines/${machineId}`, headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  if (res.statusCode !== 200) throw new Error(`GET /admin/v1/machines answered ${res.statusCode}: ${res.body}`);
  return res.json() as MachineRecord;
}

const benchmark = { status: 'completed' as const, reason: null, tier: 'A' as const, host: { diskWriteMBps: 900, sha256MBps: 1500 }, gpus: [], ranAt: new Date().toISOString() };

/** A machine with real GPUs whose probe passed and listed `listed` (default: exactly its GPUs). */
function realInventory(options: { gpus?: number; driverVersion?: string; listed?: Array<{ name: string; uuid: string }> } = {}): MachineInventory {
  const inventory = testInventory({ simulated: false, gpus: options.gpus ?? 2, ...(options.driverVersion ? { driverVersion: options.driverVersion } : {}) });
  inventory.health.probeListing = options.listed ?? inventory.gpus.map((g) => ({ name: g.name, uuid: g.uuid }));
  return inventory;
}

interface TestContext {
  teardown(fn: () => unknown): void;
}

/** Enrolls a machine with `enrolled`, connects its agent and says hello with `said` (default the same); returns once the hello was handled. */
async function connect(t: TestContext, s: GatewayTestApp, enrolled: MachineInventory, said: MachineInventory = enrolled, tier: typeof benchmark | null = benchmark): Promise<Enrolled & { agent: AgentSocket }> {
  const m = await enroll(s, enrolled);
  const agent = await AgentSocket.connect(s.url, m.machineToken);
  t.teardown(() => agent.close());
  agent.send(hello(said, [], { benchmark: tier }));
  await agent.next('welcome');
  await agent.barrier();
  return { ...m, agent };
}

t.test('machine verification', async (t) => {
  const s = await startGatewayApp(t, { env: { GF_CANARY_IMAGE: TEST_CANARY_IMAGE } });

  t.test('default: a newly enrolled machine is not offered at its claimed tier until its canary passed, then it is', async (t) => {
    const m = await connect(t, s, realInventory());
    const agent = m.agent;

    const before = await machineRecord(s, m.machineId);
    t.match(before, { status: 'online', claimedTier: 'A', verification: { status: 'verifying', reason: null, verifiedAt: null } });
    t.match(before.verification.claims, { driverVersion: '550.54.15', gpus: [{ uuid: 'GPU-sim-0-0000' }, { uuid: 'GPU-sim-1-0000' }] });
    t.same(await offersOf(s, m.farm), [], 'not offered while its canary is out');

    const canary = await runCanary(agent, { url: s.url, machineToken: m.machineToken });
    t.equal(canary.jobId, before.verification.canaryJobId);
    const after = await machineRecord(s, m.machineId);
    t.match(after.verification, { status: 'verified', reason: null });
    t.ok(after.verification.verifiedAt);
    const offers = await offersOf(s, m.farm);
    t.equal(offers.length, 1, 'offered once verified');
    t.match(offers[0], { count: 2, available: 2, benchmarkTier: 'A', simulated: false });

    // The canary is the service's own job: RESULT_VERIFIED, on no customer's account, never billed or escrowed.
    const [job] = await s.db.query<{ kind: string; status: string; verification_level: string; account_id: string; fund_tx_hash: string | null }>(
      'SELECT kind, status, verification_level, account_id, fund_tx_hash FROM jobs WHERE id = $1',
      [canary.jobId],
    );
    t.same(job, { kind: 'verification', status: 'COMPLETED', verification_level: 'RESULT_VERIFIED', account_id: 'acct_service', fund_tx_hash: null });
    const [{ n }] = (await s.db.query<{ n: number }>('SELECT count(*)::int AS n FROM billing_entries WHERE job_id = $1', [canary.jobId])) as [{ n: number }];
    t.equal(n, 0, 'no billing entry');
  });

  t.test('behavior: a hello whose driver or GPU set changed makes the machine unverified until a new canary passes', async (t) => {
    const m = await enroll(s, realInventory());
    let agent = await AgentSocket.connect(s.url, m.machineToken);
    agent.send(hello(realInventory(), [], { benchmark }));
    await agent.next('welcome');
    await runCanary(agent, { url: s.url, machineToken: m.machineToken });
    t.equal((await offersOf(s, m.farm)).length, 1, 'verified and offered');
    agent.close();

    // The agent comes back after a driver upgrade.
    agent = await AgentSocket.connect(s.url, m.machineToken);
    t.teardown(() => agent.close());
    agent.send(hello(realInventory({ driverVersion: '560.35.03' }), [], { benchmark: null }));
    await agent.next('welcome');
    await agent.barrier();
    const changed = await machineRecord(s, m.machineId);
    t.match(changed.verification, { status: 'verifying', claims: { driverVersion: '560.35.03' } });
    t.same(await offersOf(s, m.farm), [], 'not offered after the driver changed');
    const [{ reason }] = (await s.db.query<{ reason: string }>(
      `SELECT line AS reason FROM log_lines WHERE job_id = (SELECT verification_job_id FROM machines WHERE id = $1) AND stream = 'system' ORDER BY seq LIMIT 1`,
      [m.machineId],
    )) as [{ reason: string }];
    t.match(reason, /^verification canary: matched: 2x/);
    await runCanary(agent, { url: s.url, machineToken: m.machineToken });
    t.equal((await offersOf(s, m.farm)).length, 1, 'offered again once the new canary passed');

    // A third GPU appears in a heartbeat's inventory: unverified again, with the reason.
    agent.send({
      type: 'heartbeat',
      sentAt: new Date().toISOString(),
      health: realInventory({ gpus: 3, driverVersion: '560.35.03' }).health,
      gpus: [],
      inventory: realInventory({ gpus: 3, driverVersion: '560.35.03' }),
      runningAssignmentIds: [],
      draining: false,
    });
    await agent.barrier();
    const grown = await machineRecord(s, m.machineId);
    t.match(grown.verification, { status: 'unverified', reason: /GPU added: NVIDIA GeForce RTX 4090 GPU-sim-2-0000/ });
    t.same(await offersOf(s, m.farm), [], 'not offered with a GPU no canary saw');
    await s.gateway.sweep();
    await runCanary(agent, { url: s.url, machineToken: m.machineToken });
    const offers = await offersOf(s, m.farm);
    t.match(offers, [{ count: 3 }], 'its three GPUs offered once the sweep\'s canary passed');
  });

  t.test('error: a canary whose result the server cannot recompute leaves the machine not verified, with the reason', async (t) => {
    const m = await connect(t, s, realInventory());
    await runCanary(m.agent, { url: s.url, machineToken: m.machineToken, result: () => `${'0'.repeat(64)}\n` });
    const record = await machineRecord(s, m.machineId);
    t.match(record.verification, { status: 'failed', reason: /does not match the server's recomputation/ });
    t.same(await offersOf(s, m.farm), [], 'not offered');
    const [job] = await s.db.query<{ status: string; verification_level: string }>('SELECT status, verification_level FROM jobs WHERE id = $1', [record.verification.canaryJobId]);
    t.same(job, { status: 'COMPLETED', verification_level: 'HOST_REPORTED' });
  });

  t.test('error: a canary the machine refuses fails its verification and is not queued for another machine', async (t) => {
    const m = await connect(t, s, realInventory());
    const agent = m.agent;
    const { assignment } = await agent.next('assign');
    agent.send({ type: 'assignment.rejected', assignmentId: assignment.assignmentId, reason: 'not_ready', message: 'disk full' });
    await agent.barrier();
    t.match((await machineRecord(s, m.machineId)).verification, { status: 'failed', reason: /the canary was not run: the machine declined \(not_ready\): disk full/ });
    const [job] = await s.db.query<{ status: string; refund_status: string | null }>('SELECT status, refund_status FROM jobs WHERE id = $1', [assignment.jobId]);
    t.equal(job?.status, 'FAILED');
    t.same(await offersOf(s, m.farm), [], 'not offered');
  });

  t.test('error: a GPU probe whose nvidia-smi -L disagrees with the hello makes the machine unhealthy, not offered', async (t) => {
    const claimed = realInventory();
    // The container saw one GPU of another model than the hello claims, and not the second one.
    const lying = realInventory({ listed: [{ name: 'NVIDIA GeForce RTX 3060', uuid: 'GPU-sim-0-0000' }] });
    const m = await connect(t, s, claimed, lying);
    const agent = m.agent;
    const record = await machineRecord(s, m.machineId);
    t.equal(record.status, 'unhealthy');
    t.match(record.healthReason, /nvidia-smi -L disagrees with the GPUs the agent reports: GPU-sim-0-0000 is listed as NVIDIA GeForce RTX 3060, claimed as NVIDIA GeForce RTX 4090; GPU-sim-1-0000 \(NVIDIA GeForce RTX 4090\) is not listed/);
    t.equal(record.verification.status, 'unverified', 'no canary for an unhealthy machine');
    t.same(await offersOf(s, m.farm), [], 'not offered');

    // A heartbeat without a new inventory does not make it healthy again.
    agent.send({ type: 'heartbeat', sentAt: new Date().toISOString(), health: lying.health, gpus: [], inventory: null, runningAssignmentIds: [], draining: false });
    await agent.barrier();
    t.equal((await machineRecord(s, m.machineId)).status, 'unhealthy');

    // A listing that agrees makes it healthy; its canary runs and it is offered.
    agent.send({ type: 'heartbeat', sentAt: new Date().toISOString(), health: claimed.health, gpus: [], inventory: claimed, runningAssignmentIds: [], draining: false });
    await agent.barrier();
    t.equal((await machineRecord(s, m.machineId)).status, 'online');
    await s.gateway.sweep();
    await runCanary(agent, { url: s.url, machineToken: m.machineToken });
    t.equal((await offersOf(s, m.farm)).length, 1);
  });

  t.test('error: a machine with real GPUs whose agent reports no probe listing is not verified, with the reason', async (t) => {
    const m = await connect(t, s, testInventory({ simulated: false }));
    t.match((await machineRecord(s, m.machineId)).verification, { status: 'failed', reason: /did not report the GPU probe's nvidia-smi -L listing/ });
    t.same(await offersOf(s, m.farm), []);
  });

  t.test('behavior: a simulated machine is verified by its canary alone and offered as simulated', async (t) => {
    const m = await connect(t, s, testInventory(), testInventory(), null);
    t.same(await offersOf(s, m.farm), []);
    await runCanary(m.agent, { url: s.url, machineToken: m.machineToken });
    t.match(await offersOf(s, m.farm), [{ simulated: true, count: 2 }]);
  });
});

t.test('error: without a canary image the control plane cannot verify, and says so', async (t) => {
  const s = await startGatewayApp(t);
  const m = await connect(t, s, testInventory());
  t.match((await machineRecord(s, m.machineId)).verification, { status: 'failed', reason: /no canary image is configured .*GF_CANARY_IMAGE/ });
  t.same(await offersOf(s, m.farm), []);
  const unknown = await s.app.inject({ url: '/admin/v1/machines/nope', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
  t.equal(unknown.statusCode, 400);
});
