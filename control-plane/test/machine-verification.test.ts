import { randomBytes } from 'node:crypto';
import t from 'tap';
import { capacityListSchema, type MachineInventory } from '@gpufarm/shared';
import { ADMIN_TOKEN } from './helpers/app.js';
import { AgentSocket, enrollBody, hello, insertAssignment, insertJob, newEnrollmentToken, runChallenge, startGatewayApp, TEST_CHALLENGE_PLAN, testInventory, TIGHT_CHALLENGE_PLAN, type GatewayTestApp } from './helpers/agent-client.js';

/**
 * Machine verification through HTTP and the agent's WebSocket: what a machine claims (GPUs,
 * driver, tier) is offered only after its GPUs passed the control plane's GPU challenge, again
 * after each driver or GPU change and at idle re-checks, and never while the GPU probe's
 * `nvidia-smi -L` contradicts it. The machine's part is played here on the CPU, honestly or with
 * the cheats the challenge must catch (`runChallenge`).
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
  verification: {
    status: string;
    reason: string | null;
    challengeId: string | null;
    verifiedAt: string | null;
    provenAt: string | null;
    nextChallengeAt: string | null;
    claims: { driverVersion: string | null; gpus: unknown[] } | null;
  };
  challenges: Array<{
    id: string;
    cause: string;
    state: string;
    simulated: boolean;
    classId: string | null;
    shape: { m: number; n: number; k: number; rounds: number };
    preSeed: string;
    goSeed: string | null;
    elapsedSeconds: number | null;
    deadlineSeconds: number | null;
    rowsChecked: Array<{ uuid: string; round: number; row: number }>;
    checkMs: number | null;
    reason: string | null;
  }>;
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

/** Every challenge of these tests (a real class's takes minutes on the CPU); the "slow GPU" waits past its window. */
const PLAN = TEST_CHALLENGE_PLAN;

t.test('machine verification', async (t) => {
  const s = await startGatewayApp(t, { challengePlan: PLAN });

  t.test('default: a newly enrolled machine is not offered until its GPUs passed a challenge, then it is, proven', async (t) => {
    const m = await connect(t, s, realInventory());
    const agent = m.agent;

    const before = await machineRecord(s, m.machineId);
    t.match(before, { status: 'online', claimedTier: 'A', verification: { status: 'verifying', reason: null, verifiedAt: null, provenAt: null } });
    t.match(before.verification.claims, { driverVersion: '550.54.15', gpus: [{ uuid: 'GPU-sim-0-0000' }, { uuid: 'GPU-sim-1-0000' }] });
    t.same(await offersOf(s, m.farm), [], 'not offered while its challenge is out');

    const played = await runChallenge(agent);
    t.equal(played.challengeId, before.verification.challengeId);
    const after = await machineRecord(s, m.machineId);
    t.match(after.verification, { status: 'verified', reason: null });
    t.ok(after.verification.verifiedAt);
    t.ok(after.verification.provenAt, 'real GPUs: proven');
    const next = Date.parse(after.verification.nextChallengeAt ?? '') - Date.now();
    t.ok(next > 11.9 * 3600_000 && next <= 24 * 3600_000, 'an idle re-check between 12 and 24 hours from now');
    const offers = await offersOf(s, m.farm);
    t.equal(offers.length, 1, 'offered once proven');
    t.match(offers[0], { count: 2, available: 2, benchmarkTier: 'A', simulated: false });

    // Admins see the challenge: seeds, shape, times and the rows the server checked.
    const [challenge] = after.challenges;
    t.match(challenge, { id: played.challengeId, cause: 'enrollment', state: 'passed', simulated: false, classId: 'rtx-4090-24gb', shape: { m: 256, n: 256, k: 256, rounds: 3 }, deadlineSeconds: 60, reason: null });
    t.match(challenge?.preSeed, /^[0-9a-f]{64}$/);
    t.match(challenge?.goSeed, /^[0-9a-f]{64}$/);
    t.not(challenge?.goSeed, challenge?.preSeed);
    t.ok((challenge?.elapsedSeconds ?? -1) >= 0, 'the time from go to commitment, on the server\'s clock');
    t.equal(challenge?.rowsChecked.length, 32, '16 rows of each of the two GPUs');
    t.ok(challenge?.rowsChecked.every((r) => r.round < 3 && r.row < 256));
    t.ok((challenge?.checkMs ?? -1) >= 0);
  });

  t.test('behavior: a hello whose driver or GPU set changed makes the machine unverified until a new challenge passes', async (t) => {
    const m = await enroll(s, realInventory());
    let agent = await AgentSocket.connect(s.url, m.machineToken);
    agent.send(hello(realInventory(), [], { benchmark }));
    await agent.next('welcome');
    await runChallenge(agent);
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
    t.match(changed.challenges[0], { cause: 'claims_changed', state: 'preparing' });
    t.same(await offersOf(s, m.farm), [], 'not offered after the driver changed');
    await runChallenge(agent);
    t.equal((await offersOf(s, m.farm)).length, 1, 'offered again once the new challenge passed');

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
    t.same(await offersOf(s, m.farm), [], 'not offered with a GPU no challenge saw');
    await s.gateway.sweep();
    const third = await runChallenge(agent);
    t.equal(Object.keys(third.roots).length, 3, 'the challenge covers the three GPUs');
    t.match(await offersOf(s, m.farm), [{ count: 3 }], 'its three GPUs offered once the sweep\'s challenge passed');
  });

  // The late machine plays against a 1 s window (an app of its own): the others' window is wide.
  const [outer, app] = [t, s];
  let tight: Promise<GatewayTestApp> | null = null;
  const failures: Array<[string, Parameters<typeof runChallenge>[1], RegExp, 'tight'?]> = [
    ['computes only half of each product', { skipRows: (_round, row) => row % 2 === 1 }, /round \d+ row \d+: the product's row and the Merkle path sent do not lead to the committed root/],
    ['commits a root that does not match its rows', { roots: (_uuid, computed) => computed.slice(0, 64) + 'f'.repeat(64) + computed.slice(128) }, /round [12] row \d+: the product's row and the Merkle path sent do not lead to the committed root/],
    ['commits after the class\'s window, as a slower GPU would', { delayMs: 1_500 }, /the commitment came \d+\.\d\d s after the go, past the 1\.00 s this class allows \(0\.50 s of work at its expected rate\): the GPU is slower than the class it claims/, 'tight'],
    ['reports more GPU time than passed', { gpuSeconds: 60 }, /reports 60\.00 s of GPU time, more than the/],
  ];
  for (const [what, play, reason, plan] of failures) {
    t.test(`error: a machine that ${what} fails, not offered, with the reason recorded`, async (t) => {
      const s = plan === 'tight' ? await (tight ??= startGatewayApp(outer, { challengePlan: TIGHT_CHALLENGE_PLAN })) : app;
      const m = await connect(t, s, realInventory());
      const played = await runChallenge(m.agent, play);
      const record = await machineRecord(s, m.machineId);
      t.match(record.verification, { status: 'failed', reason: new RegExp(`GPU challenge ${played.challengeId} failed: `) });
      t.match(record.verification.reason, reason);
      t.match(record.challenges[0], { id: played.challengeId, state: 'failed', reason });
      t.notOk(record.verification.provenAt, 'not proven');
      t.same(await offersOf(s, m.farm), [], 'not offered');
    });
  }

  t.test('error: a machine that replays an earlier commitment fails: a fresh seed makes every root new', async (t) => {
    const m = await connect(t, s, realInventory());
    const first = await runChallenge(m.agent);
    t.equal((await offersOf(s, m.farm)).length, 1);
    // Its idle re-check comes due; the machine sends the roots it committed the first time.
    await s.db.query('UPDATE machines SET next_challenge_at = now() - interval \'1 second\' WHERE id = $1', [m.machineId]);
    await s.gateway.sweep();
    const replay = await runChallenge(m.agent, { roots: (uuid) => first.roots[uuid]! });
    const record = await machineRecord(s, m.machineId);
    t.match(record.challenges[0], { id: replay.challengeId, cause: 'idle', state: 'failed', reason: new RegExp(`repeats challenge ${first.challengeId}'s roots: a replayed commitment`) });
    t.equal(record.verification.status, 'failed');
    t.same(await offersOf(s, m.farm), [], 'no longer offered');
  });

  t.test('behavior: the idle re-check never runs beside a customer job; it waits until the machine is idle, and keeps its verified date', async (t) => {
    const m = await connect(t, s, realInventory());
    await runChallenge(m.agent);
    const verified = await machineRecord(s, m.machineId);
    const jobId = await insertJob(s.db, 'RUNNING');
    const assignmentId = await insertAssignment(s.db, { jobId, machineId: m.machineId, state: 'running' });
    await s.db.query('UPDATE machine_gpus SET busy = true, assignment_id = $2 WHERE machine_id = $1 AND gpu_index = 0', [m.machineId, assignmentId]);
    await s.db.query('UPDATE machines SET next_challenge_at = now() - interval \'1 second\' WHERE id = $1', [m.machineId]);
    await s.gateway.sweep();
    await m.agent.barrier();
    t.equal(m.agent.received.filter((x) => x.type === 'challenge.prepare').length, 0, 'no challenge while a job holds a GPU');
    t.match((await machineRecord(s, m.machineId)).verification, { status: 'verified', challengeId: verified.verification.challengeId });

    await s.db.query('UPDATE machine_gpus SET busy = false, assignment_id = NULL WHERE machine_id = $1', [m.machineId]);
    await s.gateway.sweep();
    const idle = await runChallenge(m.agent);
    const after = await machineRecord(s, m.machineId);
    t.match(after.challenges[0], { id: idle.challengeId, cause: 'idle', state: 'passed' });
    t.equal(after.verification.status, 'verified');
    t.equal(after.verification.verifiedAt, verified.verification.verifiedAt, 'verified since the first challenge: it was offered all along');
    t.ok(Date.parse(after.verification.provenAt!) > Date.parse(verified.verification.provenAt!), 'proven again');
  });

  t.test('behavior: an idle re-check the machine declines leaves it verified and is asked again later, unless its last pass is old', async (t) => {
    const m = await connect(t, s, realInventory());
    await runChallenge(m.agent);
    const decline = async () => {
      await s.db.query('UPDATE machines SET next_challenge_at = now() - interval \'1 second\' WHERE id = $1', [m.machineId]);
      await s.gateway.sweep();
      const prepare = await m.agent.next('challenge.prepare');
      m.agent.send({ type: 'challenge.failed', challengeId: prepare.challengeId, reason: 'a job holds the GPUs (assignment asg_1)' });
      await m.agent.barrier();
      return machineRecord(s, m.machineId);
    };
    const kept = await decline();
    t.match(kept.verification, { status: 'verified' });
    t.match(kept.challenges[0], { cause: 'idle', state: 'failed', reason: /a job holds the GPUs/ });
    const again = Date.parse(kept.verification.nextChallengeAt ?? '') - Date.now();
    t.ok(again > 9 * 60_000 && again <= 10 * 60_000, 'asked again in 10 minutes');
    t.equal((await offersOf(s, m.farm)).length, 1, 'still offered');

    // Its last pass two days ago: declining no longer keeps it.
    await s.db.query(`UPDATE gpu_challenges SET finished_at = now() - interval '49 hours' WHERE machine_id = $1 AND state = 'passed'`, [m.machineId]);
    t.match((await decline()).verification, { status: 'failed', reason: /the machine could not run the challenge: a job holds the GPUs/ });
    t.same(await offersOf(s, m.farm), [], 'not offered');
  });

  t.test('error: a challenge the machine cannot run, or never answers, fails its verification with the reason', async (t) => {
    const m = await connect(t, s, realInventory());
    const prepare = await m.agent.next('challenge.prepare');
    m.agent.send({ type: 'challenge.failed', challengeId: prepare.challengeId, reason: 'gpu-bench exited with code 4: the driver is older than CUDA 11.0' });
    await m.agent.barrier();
    t.match((await machineRecord(s, m.machineId)).verification, { status: 'failed', reason: /the machine could not run the challenge: gpu-bench exited with code 4/ });

    // Retried from the sweep once CHALLENGE_RETRY_SECONDS passed; this time the machine goes silent after ready.
    await s.db.query('UPDATE machines SET verification_started_at = now() - interval \'11 minutes\' WHERE id = $1', [m.machineId]);
    await s.gateway.sweep();
    const retry = await m.agent.next('challenge.prepare');
    t.not(retry.challengeId, prepare.challengeId);
    m.agent.send({ type: 'challenge.ready', challengeId: retry.challengeId });
    await m.agent.next('challenge.go');
    await s.db.query('UPDATE gpu_challenges SET go_at = now() - interval \'10 minutes\' WHERE id = $1', [retry.challengeId]);
    await s.gateway.sweep();
    const cancel = await m.agent.next('challenge.cancel');
    t.equal(cancel.challengeId, retry.challengeId, 'the agent is told to stop it');
    const record = await machineRecord(s, m.machineId);
    t.match(record.challenges[0], { id: retry.challengeId, cause: 'retry', state: 'failed', reason: 'the machine sent no commitment in time' });
    t.equal(record.verification.status, 'failed');
  });

  t.test('error: an agent too old for the challenge cannot prove its GPUs and is told to upgrade', async (t) => {
    const m = await enroll(s, realInventory());
    const agent = await AgentSocket.connect(s.url, m.machineToken);
    t.teardown(() => agent.close());
    agent.send(hello(realInventory(), [], { benchmark, protocolVersion: 6, supportedVersions: [1, 2, 3, 4, 5, 6] }));
    await agent.next('welcome');
    await agent.barrier();
    t.match((await machineRecord(s, m.machineId)).verification, { status: 'failed', reason: /the agent speaks protocol 6, and proving GPUs needs 7: upgrade the agent/ });
    t.same(await offersOf(s, m.farm), []);
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
    t.equal(record.verification.status, 'unverified', 'no challenge for an unhealthy machine');
    t.same(await offersOf(s, m.farm), [], 'not offered');

    // A heartbeat without a new inventory does not make it healthy again.
    agent.send({ type: 'heartbeat', sentAt: new Date().toISOString(), health: lying.health, gpus: [], inventory: null, runningAssignmentIds: [], draining: false });
    await agent.barrier();
    t.equal((await machineRecord(s, m.machineId)).status, 'unhealthy');

    // A listing that agrees makes it healthy; its challenge runs and it is offered.
    agent.send({ type: 'heartbeat', sentAt: new Date().toISOString(), health: claimed.health, gpus: [], inventory: claimed, runningAssignmentIds: [], draining: false });
    await agent.barrier();
    t.equal((await machineRecord(s, m.machineId)).status, 'online');
    await s.gateway.sweep();
    await runChallenge(agent);
    t.equal((await offersOf(s, m.farm)).length, 1);
  });

  t.test('error: a machine with real GPUs whose agent reports no probe listing is not verified, with the reason', async (t) => {
    const m = await connect(t, s, testInventory({ simulated: false }));
    t.match((await machineRecord(s, m.machineId)).verification, { status: 'failed', reason: /did not report the GPU probe's nvidia-smi -L listing/ });
    t.same(await offersOf(s, m.farm), []);
  });

  t.test('behavior: a simulated machine passes the simulated challenge and is offered as simulated, never as proven', async (t) => {
    const m = await connect(t, s, testInventory(), testInventory(), null);
    t.same(await offersOf(s, m.farm), []);
    await runChallenge(m.agent);
    t.match(await offersOf(s, m.farm), [{ simulated: true, count: 2 }]);
    const record = await machineRecord(s, m.machineId);
    t.match(record.verification, { status: 'verified', provenAt: null });
    t.match(record.challenges[0], { simulated: true, classId: null, state: 'passed' });
  });

  t.test('args: an unknown machine id is refused', async (t) => {
    const unknown = await s.app.inject({ url: '/admin/v1/machines/nope', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    t.equal(unknown.statusCode, 400);
  });
});

t.test('behavior: without a plan override a simulated machine gets the small CPU challenge, with no timing window', async (t) => {
  const s = await startGatewayApp(t);
  const m = await connect(t, s, testInventory(), testInventory(), null);
  const prepare = await m.agent.next('challenge.prepare');
  t.match(prepare, { m: 256, n: 256, k: 256, rounds: 4, simulated: true, gpus: [{ index: 0, uuid: 'GPU-sim-0-0000' }, { index: 1, uuid: 'GPU-sim-1-0000' }] });
  t.match(prepare.preSeed, /^[0-9a-f]{64}$/);
});
