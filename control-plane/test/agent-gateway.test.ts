import { createHash } from 'node:crypto';
import { AGENT_CLOSE_CODES, AGENT_PROTOCOL_VERSION, capacityListSchema, enrollResponseSchema, errorEnvelopeSchema, MACHINE_NOTE_PREFIX } from '@gpufarm/shared';
import t from 'tap';
import { LOG_LINES_GRACE_SECONDS } from '../src/agent-gateway/link.js';
import { markSilentMachinesOffline } from '../src/machines/store.js';
import { notifyAgent } from '../src/dispatch/store.js';
import { ADMIN_TOKEN } from './helpers/app.js';
import { createPgliteTestDatabase } from './helpers/database.js';
import {
  AgentSocket,
  agentWithRunningJob,
  enrollBody,
  enrollMachine,
  heartbeat,
  hello,
  insertAssignment,
  insertJob,
  newEnrollmentToken,
  runChallenge,
  startGatewayApp,
  statusMessage,
  testInventory,
} from './helpers/agent-client.js';

const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');

t.test('POST /agent/v1/enroll', async (t) => {
  const { app, db } = await startGatewayApp(t);

  t.test('default: 201 with a machine token; the machine is stored offline with its GPUs', async (t) => {
    const token = await newEnrollmentToken(db, { farmSlug: 'enroll-farm' });
    const res = await app.inject({ method: 'POST', url: '/agent/v1/enroll', payload: enrollBody(token) });
    t.equal(res.statusCode, 201);
    const body = enrollResponseSchema.parse(res.json());
    t.equal(body.heartbeatIntervalSeconds, 5);
    const [machine] = await db.query<Record<string, unknown>>(
      `SELECT m.status, m.region_key, m.price_per_gpu_hour_micro_usd AS price, m.simulated, m.token_hash, m.public_key_pem, m.agent_version,
              m.cuda_version, m.driver_version, m.cpu_cores, f.slug FROM machines m JOIN farms f ON f.id = m.farm_id WHERE m.id = $1`,
      [body.machineId],
    );
    t.match(machine, { status: 'offline', region_key: 'us-east', price: 450_000, simulated: true, agent_version: '0.1.0', cuda_version: '12.4', driver_version: '550.54.15', cpu_cores: 16, slug: 'enroll-farm' });
    t.equal(machine!.token_hash, sha256(body.machineToken), 'only the SHA-256 of the machine token is stored');
    t.match(machine!.public_key_pem, /^-----BEGIN PUBLIC KEY-----/);
    const gpus = await db.query<{ gpu_index: number; class_id: string; uuid: string }>('SELECT gpu_index, class_id, uuid FROM machine_gpus WHERE machine_id = $1 ORDER BY gpu_index', [body.machineId]);
    t.same(gpus, [{ gpu_index: 0, class_id: 'rtx-4090-24gb', uuid: 'GPU-sim-0-0000' }, { gpu_index: 1, class_id: 'rtx-4090-24gb', uuid: 'GPU-sim-1-0000' }]);
    const [used] = await db.query<{ machine_id: string }>('SELECT machine_id FROM enrollment_tokens WHERE token_hash = $1 AND used_at IS NOT NULL', [sha256(token)]);
    t.equal(used?.machine_id, body.machineId, 'the token is spent and names the machine');
  });

  t.test('behavior: a token enrolls one machine only, even when two race', async (t) => {
    const token = await newEnrollmentToken(db);
    const answers = await Promise.all([0, 1].map(() => app.inject({ method: 'POST', url: '/agent/v1/enroll', payload: enrollBody(token) })));
    t.same(answers.map((r) => r.statusCode).sort(), [201, 401]);
    const again = await app.inject({ method: 'POST', url: '/agent/v1/enroll', payload: enrollBody(token) });
    t.equal(again.statusCode, 401);
    const error = errorEnvelopeSchema.parse(again.json()).error;
    t.equal(error.code, 'invalid_api_key');
    t.match(error.message, /enrollment token is unknown, was already used, or expired/);
  });

  t.test('error: invalid_api_key for an unknown or expired token', async (t) => {
    const unknown = await app.inject({ method: 'POST', url: '/agent/v1/enroll', payload: enrollBody(`gfe_${'x'.repeat(43)}`) });
    t.equal(unknown.statusCode, 401);
    t.equal(unknown.json().error.code, 'invalid_api_key');
    const expired = await newEnrollmentToken(db, { ttlSeconds: -1 });
    const late = await app.inject({ method: 'POST', url: '/agent/v1/enroll', payload: enrollBody(expired) });
    t.equal(late.statusCode, 401);
    t.equal(late.json().error.code, 'invalid_api_key');
  });

  t.test('error: invalid_request names the field', async (t) => {
    const token = await newEnrollmentToken(db);
    const body = enrollBody(token);
    (body.inventory.gpus[0] as { vramBytes: unknown }).vramBytes = 'lots';
    const res = await app.inject({ method: 'POST', url: '/agent/v1/enroll', payload: body });
    t.equal(res.statusCode, 400);
    const error = errorEnvelopeSchema.parse(res.json()).error;
    t.equal(error.code, 'invalid_request');
    t.same(error.details.map((d) => d.field), ['inventory.gpus[0].vramBytes']);
    const noKey = await app.inject({ method: 'POST', url: '/agent/v1/enroll', payload: { ...enrollBody(token), publicKeyPem: undefined } });
    t.equal(noKey.statusCode, 400);
    t.match(noKey.json().error.message, /publicKeyPem/);
    const [unspent] = await db.query('SELECT 1 FROM enrollment_tokens WHERE token_hash = $1 AND used_at IS NULL', [sha256(token)]);
    t.ok(unspent, 'a refused body does not spend the token');
  });

  t.test('behavior: GPUs outside the catalog are not offered', async (t) => {
    const { machineId } = await enrollMachine(app, db, testInventory({ gpus: 2, classId: null }));
    t.same(await db.query('SELECT gpu_index FROM machine_gpus WHERE machine_id = $1', [machineId]), []);
  });
});

t.test('POST /admin/v1/enrollment-tokens', async (t) => {
  const { app, db } = await startGatewayApp(t);
  const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };

  t.test('default: a token for a new farm, shown once, that enrolls a machine at the price', async (t) => {
    const payout = '0xABCDEF0123456789ABCDEF0123456789ABCDEF01';
    const res = await app.inject({ method: 'POST', url: '/admin/v1/enrollment-tokens', headers: admin, payload: { farm: 'north-gpu', farmName: 'North GPU', payoutAddress: payout, regionKey: 'canada', pricePerGpuHour: '0.45' } });
    t.equal(res.statusCode, 201);
    const body = res.json();
    t.match(body, { object: 'enrollment_token', token: /^gfe_[A-Za-z0-9_-]{43}$/, farm: { slug: 'north-gpu', name: 'North GPU' }, regionKey: 'canada', pricePerGpuHour: '0.45' });
    t.ok(Date.parse(body.expiresAt) > Date.now() + 23 * 3600_000, 'valid for a day');
    const [farm] = await db.query<{ payout_address: string; provider: string }>(`SELECT payout_address, provider FROM farms WHERE slug = 'north-gpu'`);
    t.same(farm, { payout_address: payout.toLowerCase(), provider: 'North GPU' });
    t.same(await db.query('SELECT 1 FROM enrollment_tokens WHERE token_hash = $1', [body.token]), [], 'the token itself is not stored');
    const enrolled = await app.inject({ method: 'POST', url: '/agent/v1/enroll', payload: enrollBody(body.token) });
    t.equal(enrolled.statusCode, 201);
    const [machine] = await db.query<{ price: number; region_key: string }>('SELECT price_per_gpu_hour_micro_usd AS price, region_key FROM machines WHERE id = $1', [enrolled.json().machineId]);
    t.same(machine, { price: 450_000, region_key: 'canada' });
  });

  t.test('error: invalid_request names the field; missing_api_key without the admin token', async (t) => {
    const region = await app.inject({ method: 'POST', url: '/admin/v1/enrollment-tokens', headers: admin, payload: { farm: 'north-gpu', regionKey: 'mars', pricePerGpuHour: 1 } });
    t.equal(region.statusCode, 400);
    t.same(region.json().error.details.map((d: { field: string }) => d.field), ['regionKey']);
    const price = await app.inject({ method: 'POST', url: '/admin/v1/enrollment-tokens', headers: admin, payload: { farm: 'north-gpu', regionKey: 'canada', pricePerGpuHour: '0.1234567' } });
    t.equal(price.statusCode, 400);
    t.same(price.json().error.details.map((d: { field: string }) => d.field), ['pricePerGpuHour']);
    const payout = await app.inject({ method: 'POST', url: '/admin/v1/enrollment-tokens', headers: admin, payload: { farm: 'south-gpu', regionKey: 'canada', pricePerGpuHour: 1 } });
    t.equal(payout.statusCode, 400, 'a new farm needs a payout address');
    t.same(payout.json().error.details.map((d: { field: string }) => d.field), ['payoutAddress']);
    t.match(payout.json().error.message, /farm south-gpu has no payout address/);
    t.same(await db.query(`SELECT 1 FROM farms WHERE slug = 'south-gpu'`), [], 'the farm was not created');
    const known = await app.inject({ method: 'POST', url: '/admin/v1/enrollment-tokens', headers: admin, payload: { farm: 'north-gpu', regionKey: 'canada', pricePerGpuHour: 1 } });
    t.equal(known.statusCode, 201, 'a farm with an address keeps it');
    const anonymous = await app.inject({ method: 'POST', url: '/admin/v1/enrollment-tokens', payload: { farm: 'north-gpu', regionKey: 'canada', pricePerGpuHour: 1 } });
    t.equal(anonymous.statusCode, 401);
    t.equal(anonymous.json().error.code, 'missing_api_key');
  });
});

t.test('GET /agent/v1/ws', async (t) => {
  const { app, db, url, offerIndex, calls, metrics, logs } = await startGatewayApp(t);

  t.test('error: the upgrade is refused with 401 without a known machine token', async (t) => {
    for (const token of [null, `gfa_${'y'.repeat(43)}`, 'gf_test_notamachinetoken']) {
      const refused = await AgentSocket.connect(url, token).then(
        () => null,
        (err: { statusCode?: number; body?: string }) => err,
      );
      t.equal(refused?.statusCode, 401, `token ${token}`);
      t.equal(JSON.parse(refused?.body ?? '{}').error?.code, 'invalid_api_key');
    }
  });

  t.test('default: hello gets welcome; the machine is online and listed in /v1/capacity', async (t) => {
    const { app, db, url, gateway, offerIndex } = await startGatewayApp(t);
    const { machineId, machineToken } = await enrollMachine(app, db);
    const agent = await AgentSocket.connect(url, machineToken);
    t.teardown(() => agent.close());
    const benchmark = { status: 'completed' as const, reason: null, tier: 'A' as const, host: { diskWriteMBps: 900, sha256MBps: 1500 }, gpus: [], ranAt: new Date().toISOString() };
    agent.send(hello(testInventory(), [], { benchmark }));
    const welcome = await agent.next('welcome');
    t.match(welcome, { protocolVersion: AGENT_PROTOCOL_VERSION, machineId, heartbeatIntervalSeconds: 5, acked: [] });
    t.equal(welcome.lostAfterSeconds, 50 + 300, 'the requeue time of a silent machine, GF_MACHINE_OFFLINE_SECONDS + GF_MACHINE_LOST_GRACE_SECONDS');
    // Offered once its GPUs passed the control plane's challenge (machine-verification.test.ts).
    await runChallenge(agent);
    const [machine] = await db.query<{ status: string; offline_since: Date | null; connected_at: Date | null; benchmark_tier: string; benchmark: unknown; inventory: unknown }>(
      'SELECT status, offline_since, connected_at, benchmark_tier, benchmark, inventory FROM machines WHERE id = $1',
      [machineId],
    );
    t.match(machine, { status: 'online', offline_since: null, benchmark_tier: 'A', benchmark: { status: 'completed', tier: 'A' }, inventory: { simulated: true, detectedGpuCount: 2 } });
    t.ok(machine?.connected_at);
    t.equal(gateway.connectedMachines() >= 1, true);
    await offerIndex.refresh();
    const list = capacityListSchema.parse((await app.inject({ url: '/v1/capacity?limit=500' })).json());
    const offer = list.data.find((o) => o.gpu.classId === 'rtx-4090-24gb' && o.count === 2 && o.region.key === 'us-east');
    t.ok(offer, 'offered');
    t.equal(offer?.simulated, true);
    t.equal(offer?.available, 2);
    t.equal(offer?.benchmarkTier, 'A');
  });

  t.test('behavior: an unhealthy machine is not offered', async (t) => {
    const { machineId, machineToken } = await enrollMachine(app, db, testInventory({ gpus: 3 }));
    const agent = await AgentSocket.connect(url, machineToken);
    t.teardown(() => agent.close());
    agent.send(hello(testInventory({ gpus: 3, healthy: false })));
    await agent.next('welcome');
    const [machine] = await db.query<{ status: string; health_reason: string }>('SELECT status, health_reason FROM machines WHERE id = $1', [machineId]);
    t.equal(machine?.status, 'unhealthy');
    t.match(machine?.health_reason, /NVIDIA container toolkit/);
    await offerIndex.refresh();
    const list = capacityListSchema.parse((await app.inject({ url: '/v1/capacity?limit=500' })).json());
    t.notOk(list.data.some((o) => o.count === 3), 'no offer of its three GPUs');
  });

  t.test('behavior: heartbeats update live figures, health and uptime; inventory changes reach machine_gpus', async (t) => {
    const { machineId, machineToken } = await enrollMachine(app, db);
    const agent = await AgentSocket.connect(url, machineToken);
    t.teardown(() => agent.close());
    agent.send(hello());
    await agent.next('welcome');
    // The hello's own writes (its verification among them) are done before counting.
    await agent.barrier();
    const uptime = async () => (await db.query<{ s: number }>('SELECT coalesce(sum(seconds_up), 0)::int AS s FROM machine_uptime_days WHERE machine_id = $1', [machineId]))[0]!.s;

    await db.query(`UPDATE machines SET last_heartbeat_at = now() - interval '7 seconds' WHERE id = $1`, [machineId]);
    let fleetChanges = 0;
    let sentinelSeen: () => void = () => {};
    const sentinel = new Promise<void>((resolve) => (sentinelSeen = resolve));
    const unlisten = await db.listen('fleet_changed', (payload) => (payload === 'sentinel' ? sentinelSeen() : fleetChanges++));
    t.teardown(unlisten);
    // Notifications arrive in commit order: once this one is seen, the hello's own have been, and are not counted.
    await db.query(`SELECT pg_notify('fleet_changed', 'sentinel')`);
    await sentinel;
    fleetChanges = 0;
    agent.send(heartbeat());
    await agent.barrier();
    const [after] = await db.query<{ gpu_live: unknown; age: number }>('SELECT gpu_live, extract(epoch FROM now() - last_heartbeat_at)::float8 AS age FROM machines WHERE id = $1', [machineId]);
    t.ok(after!.age < 5, 'last_heartbeat_at is now');
    t.match(after!.gpu_live, [{ index: 0, temperatureC: 41, utilizationPercent: 12 }]);
    const first = await uptime();
    t.ok(first >= 7 && first <= 8, `7 s since the last heartbeat counted (${first})`);

    await db.query(`UPDATE machines SET last_heartbeat_at = now() - interval '1 hour' WHERE id = $1`, [machineId]);
    agent.send(heartbeat());
    await agent.barrier();
    t.equal(await uptime(), first + 10, 'a gap counts at most two heartbeat intervals');
    await new Promise((r) => setTimeout(r, 300));
    t.equal(fleetChanges, 0, 'plain heartbeats do not make the offer indexes reload');
    t.same(await markSilentMachinesOffline(db, { machineOfflineSeconds: 3600 }), [], 'a sweep that finds no silent machine');
    await db.query(`UPDATE machines SET status = status, price_per_gpu_hour_micro_usd = price_per_gpu_hour_micro_usd WHERE id = $1`, [machineId]);
    await db.query('UPDATE machine_gpus SET busy = busy WHERE machine_id = $1', [machineId]);
    await db.query(`UPDATE farms SET status = status WHERE id = (SELECT farm_id FROM machines WHERE id = $1)`, [machineId]);
    await new Promise((r) => setTimeout(r, 300));
    t.equal(fleetChanges, 0, 'nor do statements that change no offered value');

    agent.send(heartbeat({ inventory: testInventory({ gpus: 4, driverVersion: '560.1.1' }) }));
    await agent.barrier();
    const [changed] = await db.query<{ driver_version: string; gpus: number }>('SELECT driver_version, (SELECT count(*)::int FROM machine_gpus WHERE machine_id = $1) AS gpus FROM machines WHERE id = $1', [machineId]);
    t.same(changed, { driver_version: '560.1.1', gpus: 4 });
    const deadline = Date.now() + 5_000;
    while (fleetChanges === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    t.ok(fleetChanges > 0, 'an inventory change does');

    agent.send(heartbeat({ health: { status: 'unhealthy', reason: 'the GPU probe failed', gpuProbe: 'failed', checkedAt: new Date().toISOString() } }));
    await agent.barrier();
    const [sick] = await db.query<{ status: string; health_reason: string }>('SELECT status, health_reason FROM machines WHERE id = $1', [machineId]);
    t.same(sick, { status: 'unhealthy', health_reason: 'the GPU probe failed' });
    agent.send(heartbeat({ draining: true }));
    await agent.barrier();
    const [draining] = await db.query<{ status: string; draining: boolean }>('SELECT status, draining FROM machines WHERE id = $1', [machineId]);
    t.same(draining, { status: 'draining', draining: true });

    await db.query(`UPDATE machines SET status = 'disabled' WHERE id = $1`, [machineId]);
    agent.send(heartbeat());
    const closed = await agent.closed;
    t.equal(closed.code, AGENT_CLOSE_CODES.unauthorized, 'a machine an operator disabled is refused at its next heartbeat');
    const [disabled] = await db.query<{ status: string }>('SELECT status FROM machines WHERE id = $1', [machineId]);
    t.equal(disabled?.status, 'disabled', 'and stays disabled');
  });

  t.test('error: an invalid message closes the link with 4400 naming the field', async (t) => {
    const { machineToken } = await enrollMachine(app, db);
    const early = await AgentSocket.connect(url, machineToken);
    early.send(heartbeat());
    const beforeHello = await early.closed;
    t.equal(beforeHello.code, AGENT_CLOSE_CODES.invalidMessage);
    t.match(beforeHello.reason, /heartbeat: sent before welcome/);

    const agent = await AgentSocket.connect(url, machineToken);
    agent.send(hello());
    await agent.next('welcome');
    agent.send({ ...heartbeat(), gpus: [{ index: -1, uuid: 'GPU-x', temperatureC: null, utilizationPercent: null, memoryUsedBytes: null, powerDrawWatts: null }] });
    const closed = await agent.closed;
    t.equal(closed.code, AGENT_CLOSE_CODES.invalidMessage);
    t.match(closed.reason, /^heartbeat: gpus\.0\.index: /);

    const versions = await AgentSocket.connect(url, machineToken);
    versions.send(hello(testInventory(), [], { protocolVersion: 9, supportedVersions: [9] }));
    t.equal((await versions.closed).code, AGENT_CLOSE_CODES.unsupportedVersion);
  });

  t.test('behavior: the newest connection of a machine replaces the older one', async (t) => {
    const { machineId, machineToken } = await enrollMachine(app, db);
    const first = await AgentSocket.connect(url, machineToken);
    first.send(hello());
    await first.next('welcome');
    const second = await AgentSocket.connect(url, machineToken);
    t.teardown(() => second.close());
    t.equal((await first.closed).code, AGENT_CLOSE_CODES.replaced);
    second.send(hello());
    t.equal((await second.next('welcome')).machineId, machineId);
  });

  t.test('behavior: log lines are stored once across a resend and acked', async (t) => {
    const { machineId, machineToken } = await enrollMachine(app, db);
    const jobId = await insertJob(db, 'RUNNING');
    const assignmentId = await insertAssignment(db, { jobId, machineId, state: 'running' });
    const line = (seq: number) => ({ seq, stream: 'stdout' as const, atMs: Date.now(), line: `line ${seq}` });
    const agent = await AgentSocket.connect(url, machineToken);
    agent.send(hello(testInventory(), [{ assignmentId, jobId, state: 'running', nextLogSeq: 0 }]));
    t.same((await agent.next('welcome')).acked, [{ assignmentId, seq: null }]);
    agent.send({ type: 'logs', assignmentId, lines: [line(0), line(1), line(2)] });
    t.equal((await agent.next('logs.ack')).seq, 2);
    agent.close();
    await agent.closed;

    const again = await AgentSocket.connect(url, machineToken);
    t.teardown(() => again.close());
    again.send(hello(testInventory(), [{ assignmentId, jobId, state: 'running', nextLogSeq: 4 }]));
    t.same((await again.next('welcome')).acked, [{ assignmentId, seq: 2 }], 'welcome says what is stored');
    again.send({ type: 'logs', assignmentId, lines: [line(1), line(2), line(3)] });
    t.equal((await again.next('logs.ack')).seq, 3);
    const stored = await db.query<{ seq: number; line: string }>('SELECT seq, line FROM log_lines WHERE assignment_id = $1 ORDER BY seq', [assignmentId]);
    t.same(stored.map((r) => r.seq), [0, 1, 2, 3], 'each seq once');

    const foreign = await insertAssignment(db, { jobId: await insertJob(db, 'RUNNING'), machineId: (await enrollMachine(app, db)).machineId, state: 'running' });
    again.send({ type: 'logs', assignmentId: foreign, lines: [line(0)] });
    t.equal((await again.next('logs.ack', (m) => m.assignmentId === foreign)).seq, 0, 'acked so the agent lets go');
    t.same(await db.query('SELECT 1 FROM log_lines WHERE assignment_id = $1', [foreign]), [], 'but not stored: not this machine\'s');
  });

  /** How many agent log lines the gateway refused for `reason` (its `gf_agent_log_lines_refused_total`). */
  const refused = async (reason: string) => (await metrics.registry.getSingleMetric('gf_agent_log_lines_refused_total')?.get())?.values.find((v) => v.labels.reason === reason)?.value ?? 0;

  t.test('behavior: lines of an assignment that ended are stored within the grace, then acked and dropped (counted and logged), and the link stays up', async (t) => {
    const { agent, assignmentId } = await agentWithRunningJob(t, { app, db, url });
    const line = (seq: number) => ({ seq, stream: 'stdout' as const, atMs: Date.now(), line: `line ${seq}` });
    // The run ends (the machine reports it failed); its last lines come right after.
    agent.send(statusMessage(assignmentId, 'failed', { failure: { code: 'internal', message: 'the container vanished' }, lastLogSeq: 0 }));
    agent.send({ type: 'logs', assignmentId, lines: [line(0)] });
    t.equal((await agent.next('logs.ack', (m) => m.assignmentId === assignmentId)).seq, 0);
    const [ended] = await db.query<{ state: string }>('SELECT state FROM assignments WHERE id = $1', [assignmentId]);
    t.equal(ended?.state, 'failed', 'the assignment ended');
    // Past the grace: a machine still sending for it (an old agent, a restored outbox) appends nothing.
    await db.query('UPDATE assignments SET ended_at = now() - make_interval(secs => $2) WHERE id = $1', [assignmentId, LOG_LINES_GRACE_SECONDS + 1]);
    const before = await refused('assignment_ended');
    agent.send({ type: 'logs', assignmentId, lines: [line(1), line(2)] });
    t.equal((await agent.next('logs.ack', (m) => m.assignmentId === assignmentId)).seq, 2, 'acked, so the agent\'s outbox lets go of them');
    const stored = await db.query<{ seq: number }>('SELECT seq FROM log_lines WHERE assignment_id = $1 ORDER BY seq', [assignmentId]);
    t.same(stored.map((r) => r.seq), [0], 'the line within the grace is stored, the later ones are not');
    t.equal((await refused('assignment_ended')) - before, 2, 'counted');
    t.match(
      logs.find((l) => l.msg.includes(`assignment ${assignmentId} ended more than ${LOG_LINES_GRACE_SECONDS} s ago; 2 log lines after its last reported one acked and dropped`)),
      { level: 40, assignmentId, machineId: String, jobId: String, lines: 2 },
      'logged, with the assignment, machine and job as fields',
    );
    // Its end reported line 3 as the last: lines up to it belong to the run, however late the outbox sends them.
    await db.query('UPDATE assignments SET last_log_seq = 3 WHERE id = $1', [assignmentId]);
    agent.send({ type: 'logs', assignmentId, lines: [line(2), line(3), line(4)] });
    t.equal((await agent.next('logs.ack', (m) => m.assignmentId === assignmentId)).seq, 4);
    const late = await db.query<{ seq: number }>('SELECT seq FROM log_lines WHERE assignment_id = $1 ORDER BY seq', [assignmentId]);
    t.same(late.map((r) => r.seq), [0, 2, 3], 'lines up to the last reported one are stored, the one after it is not');
    t.equal((await refused('assignment_ended')) - before, 3, 'counted');
    agent.send(heartbeat());
    await agent.barrier();
    t.equal(agent.ws.readyState, agent.ws.OPEN, 'the link stays up');
  });

  t.test('behavior: an agent line on the system stream is stored as the machine\'s stderr, never as a line of the service', async (t) => {
    const { agent, jobId, assignmentId } = await agentWithRunningJob(t, { app, db, url });
    const fake = 'verified: RESULT_VERIFIED (the server recomputed the canary result and it matches)';
    const before = await refused('system_stream');
    agent.send({ type: 'logs', assignmentId, lines: [{ seq: 0, stream: 'system', atMs: Date.now(), line: fake }, { seq: 1, stream: 'stdout', atMs: Date.now(), line: 'own output' }] });
    t.equal((await agent.next('logs.ack', (m) => m.assignmentId === assignmentId)).seq, 1);
    const stored = await db.query<{ seq: number; stream: string; line: string }>('SELECT seq, stream, line FROM log_lines WHERE job_id = $1 ORDER BY seq', [jobId]);
    t.same(stored, [
      { seq: 0, stream: 'stderr', line: `${MACHINE_NOTE_PREFIX}${fake}` },
      { seq: 1, stream: 'stdout', line: 'own output' },
    ], 'the machine\'s note on stderr, marked as the machine\'s');
    t.equal((await refused('system_stream')) - before, 1, 'counted');
  });

  t.test('behavior: agent_dispatch notices send assign and cancel; offers are resent after hello', async (t) => {
    const { machineId, machineToken } = await enrollMachine(app, db);
    const waiting = await insertAssignment(db, { jobId: await insertJob(db), machineId });
    const agent = await AgentSocket.connect(url, machineToken);
    t.teardown(() => agent.close());
    agent.send(hello());
    await agent.next('welcome');
    t.equal((await agent.next('assign')).assignment.assignmentId, waiting, 'an offer made while away is sent after welcome');

    const jobId = await insertJob(db);
    const assignmentId = await insertAssignment(db, { jobId, machineId });
    await notifyAgent(db, { machineId, assignmentId, kind: 'assign' });
    const assign = await agent.next('assign');
    t.match(assign.assignment, { assignmentId, jobId, gpus: [{ index: 0, uuid: 'GPU-sim-0-0000' }] });
    await notifyAgent(db, { machineId, assignmentId, kind: 'cancel', reason: 'the customer canceled the job' });
    t.same(await agent.next('cancel'), { type: 'cancel', assignmentId, reason: 'the customer canceled the job' });

    agent.send({ type: 'assignment.accepted', assignmentId });
    await agent.barrier();
    t.ok(calls.some((c) => c.fn === 'assignmentAccepted' && c.assignmentId === assignmentId && c.args[0] === machineId), 'accepted goes to the lifecycle');
    agent.send({ type: 'assignment.accepted', assignmentId: waiting.replace('asg_', 'asg_x') });
    await agent.barrier();
    t.notOk(calls.some((c) => c.assignmentId === waiting.replace('asg_', 'asg_x')), 'an assignment not of this machine is ignored');
  });

  t.test('behavior: hello reconciles assignments: lost when the agent forgot them, cancel for ones the server ended', async (t) => {
    const { machineId, machineToken } = await enrollMachine(app, db);
    const forgotten = await insertAssignment(db, { jobId: await insertJob(db, 'RUNNING'), machineId, state: 'running' });
    const endedJob = await insertJob(db, 'FAILED');
    const ended = await insertAssignment(db, { jobId: endedJob, machineId, state: 'lost' });
    const agent = await AgentSocket.connect(url, machineToken);
    t.teardown(() => agent.close());
    agent.send(hello(testInventory(), [{ assignmentId: ended, jobId: endedJob, state: 'running', nextLogSeq: 0 }]));
    await agent.next('welcome');
    t.match(await agent.next('cancel'), { assignmentId: ended, reason: /lost/ });
    await agent.barrier();
    t.same(calls.filter((c) => c.fn === 'assignmentLost').map((c) => [c.assignmentId, c.args[0]]), [[forgotten, 'the agent restarted without it']]);
  });

  t.test('behavior: an agent speaking protocol 1 gets a welcome of protocol 1, without lostAfterSeconds', async (t) => {
    const { machineToken } = await enrollMachine(app, db);
    const agent = await AgentSocket.connect(url, machineToken);
    t.teardown(() => agent.close());
    agent.send(hello(testInventory(), [], { protocolVersion: 1, supportedVersions: [1] }));
    const welcome = await agent.next('welcome');
    t.equal(welcome.protocolVersion, 1);
    t.notOk('lostAfterSeconds' in welcome, 'a protocol 1 agent would refuse the unknown field');
  });

  t.test('behavior: a deterministic job\'s assignment says so on protocol 3 and leaves the field out for an agent on protocol 2', async (t) => {
    for (const versions of [[1, 2, 3], [1, 2]]) {
      const { machineId, machineToken } = await enrollMachine(app, db);
      const assignmentId = await insertAssignment(db, { jobId: await insertJob(db), machineId });
      await db.query(`UPDATE assignments SET spec = spec || '{"deterministic": true}'::jsonb WHERE id = $1`, [assignmentId]);
      const agent = await AgentSocket.connect(url, machineToken);
      t.teardown(() => agent.close());
      agent.send(hello(testInventory(), [], { protocolVersion: Math.max(...versions), supportedVersions: versions }));
      t.equal((await agent.next('welcome')).protocolVersion, Math.max(...versions));
      const { assignment } = await agent.next('assign');
      t.equal(assignment.assignmentId, assignmentId, `protocol ${Math.max(...versions)}: the offer is sent`);
      if (versions.includes(3)) t.equal(assignment.deterministic, true, 'protocol 3: deterministic');
      else t.notOk('deterministic' in assignment, 'protocol 2: left out, as its strict schema would refuse it');
    }
  });

  t.test('behavior: the GPUs of an assignment the agent still holds after it was requeued stay reserved until the agent lets go of it', async (t) => {
    const { machineId, machineToken } = await enrollMachine(app, db);
    const jobId = await insertJob(db, 'QUEUED');
    const superseded = await insertAssignment(db, { jobId, machineId, state: 'lost' });
    const gpusOf = () => db.query<{ gpu_index: number; busy: boolean; assignment_id: string | null }>('SELECT gpu_index, busy, assignment_id FROM machine_gpus WHERE machine_id = $1 ORDER BY gpu_index', [machineId]);
    const agent = await AgentSocket.connect(url, machineToken);
    t.teardown(() => agent.close());
    agent.send(hello(testInventory(), [{ assignmentId: superseded, jobId, state: 'exited', nextLogSeq: 0 }]));
    await agent.next('welcome');
    t.match(await agent.next('cancel'), { assignmentId: superseded });
    t.same(await gpusOf(), [
      { gpu_index: 0, busy: true, assignment_id: superseded },
      { gpu_index: 1, busy: false, assignment_id: null },
    ], 'its GPU is not free while the agent holds the old assignment');
    agent.send(heartbeat({ runningAssignmentIds: [superseded] }));
    await agent.barrier();
    t.equal((await gpusOf())[0]?.assignment_id, superseded, 'still held while heartbeats list it');
    agent.send(heartbeat({ runningAssignmentIds: [] }));
    await agent.barrier();
    t.same((await gpusOf())[0], { gpu_index: 0, busy: false, assignment_id: null }, 'free once the agent no longer lists it');

    const again = await AgentSocket.connect(url, machineToken);
    t.teardown(() => again.close());
    again.send(hello(testInventory(), [{ assignmentId: superseded, jobId, state: 'exited', nextLogSeq: 0 }]));
    await again.next('welcome');
    t.equal((await gpusOf())[0]?.assignment_id, superseded, 'held again by a new connection that lists it');
    again.send({ type: 'assignment.status', assignmentId: superseded, state: 'failed', at: new Date().toISOString(), imageDigest: null, startedAt: null, finishedAt: null, exitCode: null, oomKilled: null, timedOut: null, failure: { code: 'upload_failed', message: 'refused' }, outputs: null, record: null, lastLogSeq: null });
    await again.barrier();
    t.same((await gpusOf())[0], { gpu_index: 0, busy: false, assignment_id: null }, 'free once the agent reports it ended');
    const third = await AgentSocket.connect(url, machineToken);
    t.teardown(() => third.close());
    await db.query('UPDATE machine_gpus SET busy = true, assignment_id = $2 WHERE machine_id = $1 AND gpu_index = 0', [machineId, superseded]);
    third.send(hello(testInventory(), []));
    await third.next('welcome');
    t.same((await gpusOf())[0], { gpu_index: 0, busy: false, assignment_id: null }, 'a hello without it frees a reservation left by an earlier connection');
  });

  t.test('behavior: GPUs reserved by a live assignment survive an inventory without them', async (t) => {
    const { machineId, machineToken } = await enrollMachine(app, db);
    const assignmentId = await insertAssignment(db, { jobId: await insertJob(db, 'RUNNING'), machineId, state: 'running' });
    await db.query('UPDATE machine_gpus SET busy = true, assignment_id = $2 WHERE machine_id = $1 AND gpu_index = 0', [machineId, assignmentId]);
    const agent = await AgentSocket.connect(url, machineToken);
    t.teardown(() => agent.close());
    const inventory = testInventory({ gpus: 3 });
    inventory.gpus = inventory.gpus.slice(1);
    agent.send(hello(inventory, [{ assignmentId, jobId: 'x', state: 'running', nextLogSeq: 0 }]));
    await agent.next('welcome');
    const gpus = await db.query<{ gpu_index: number; busy: boolean; assignment_id: string | null }>('SELECT gpu_index, busy, assignment_id FROM machine_gpus WHERE machine_id = $1 ORDER BY gpu_index', [machineId]);
    t.same(gpus, [
      { gpu_index: 0, busy: true, assignment_id: assignmentId },
      { gpu_index: 1, busy: false, assignment_id: null },
      { gpu_index: 2, busy: false, assignment_id: null },
    ]);
  });
});

t.test('liveness sweep', async (t) => {
  const { app, db, url, gateway, calls } = await startGatewayApp(t, { env: { GF_MACHINE_OFFLINE_SECONDS: '1', GF_MACHINE_LOST_GRACE_SECONDS: '5', GF_ASSIGN_TIMEOUT_SECONDS: '30' } });
  const { machineId, machineToken } = await enrollMachine(app, db);
  const running = await insertAssignment(db, { jobId: await insertJob(db, 'RUNNING'), machineId, state: 'running' });
  const agent = await AgentSocket.connect(url, machineToken);
  t.teardown(() => agent.close());
  agent.send(hello(testInventory(), [{ assignmentId: running, jobId: 'x', state: 'running', nextLogSeq: 0 }]));
  await agent.next('welcome');
  const statusOf = async () => (await db.query<{ status: string; offline: boolean }>('SELECT status, offline_since IS NOT NULL AS offline FROM machines WHERE id = $1', [machineId]))[0];

  t.test('behavior: a machine silent past machineOfflineSeconds goes offline; its jobs wait for the grace', async (t) => {
    await gateway.sweep();
    t.same(await statusOf(), { status: 'online', offline: false }, 'heard from just now');
    await db.query(`UPDATE machines SET last_heartbeat_at = now() - interval '3 seconds' WHERE id = $1`, [machineId]);
    await gateway.sweep();
    t.same(await statusOf(), { status: 'offline', offline: true });
    t.notOk(calls.some((c) => c.fn === 'assignmentLost'), 'within the grace, nothing is lost');
  });

  t.test('behavior: a machine back within the grace is online and its jobs continue', async (t) => {
    agent.send(heartbeat({ runningAssignmentIds: [running] }));
    await agent.barrier();
    t.same(await statusOf(), { status: 'online', offline: false });
    await gateway.sweep();
    t.notOk(calls.some((c) => c.fn === 'assignmentLost'));
  });

  t.test('behavior: past the grace, its live assignments are lost', async (t) => {
    await db.query(`UPDATE machines SET status = 'offline', offline_since = now() - interval '6 seconds', last_heartbeat_at = now() - interval '7 seconds' WHERE id = $1`, [machineId]);
    await gateway.sweep();
    t.same(calls.filter((c) => c.fn === 'assignmentLost').map((c) => c.assignmentId), [running]);
    t.match(calls.find((c) => c.fn === 'assignmentLost')?.args[0], /offline for more than 5 s/);
  });

  t.test('behavior: an offer not accepted within assignTimeoutSeconds is rejected as timeout', async (t) => {
    const fresh = await insertAssignment(db, { jobId: await insertJob(db), machineId, offeredSecondsAgo: 5 });
    const stale = await insertAssignment(db, { jobId: await insertJob(db), machineId, offeredSecondsAgo: 31 });
    await gateway.sweep();
    const rejected = calls.filter((c) => c.fn === 'assignmentRejected');
    t.same(rejected.map((c) => [c.assignmentId, c.args[0], c.args[1]]), [[stale, machineId, 'timeout']]);
    t.notOk(rejected.some((c) => c.assignmentId === fresh));
  });
});

t.test('behavior: a link silent for three heartbeat intervals is closed with 4408', async (t) => {
  const { app, db, url } = await startGatewayApp(t, { env: { GF_HEARTBEAT_SECONDS: '1' } });
  const { machineToken } = await enrollMachine(app, db);
  const agent = await AgentSocket.connect(url, machineToken);
  agent.send(hello());
  t.equal((await agent.next('welcome')).heartbeatIntervalSeconds, 1);
  const started = Date.now();
  const closed = await agent.closed;
  t.equal(closed.code, AGENT_CLOSE_CODES.timeout);
  t.ok(Date.now() - started >= 2_000, 'not before three intervals of silence');
});

t.test('behavior: a server stalled for longer than three intervals does not close the links whose heartbeats wait unread', async (t) => {
  const { app, db, url } = await startGatewayApp(t, { env: { GF_HEARTBEAT_SECONDS: '1' } });
  const { machineToken } = await enrollMachine(app, db);
  const agent = await AgentSocket.connect(url, machineToken);
  t.teardown(() => agent.close());
  agent.send(hello());
  await agent.next('welcome');
  const beats = setInterval(() => agent.send(heartbeat()), 300);
  t.teardown(() => clearInterval(beats));
  await agent.barrier();
  // This process (the server and the agent's side alike) stops for four seconds, as a starved
  // or collecting control plane does: the heartbeat timer fires late and its frame is read only
  // after the watchdog's late tick.
  const end = Date.now() + 4_000;
  while (Date.now() < end) {
    // busy: nothing else runs
  }
  await agent.barrier();
  await new Promise((r) => setTimeout(r, 1_500));
  await agent.barrier();
  t.equal(agent.ws.readyState, agent.ws.OPEN, 'the link is still open');
});

t.test('behavior: on the embedded database (PGlite) too: enroll, hello, heartbeat with uptime, logs, dispatch, sweep', async (t) => {
  const { db: pglite } = await createPgliteTestDatabase(t);
  const { app, db, url, gateway } = await startGatewayApp(t, { db: pglite, env: { GF_MACHINE_OFFLINE_SECONDS: '1' } });
  const { machineId, machineToken } = await enrollMachine(app, db);
  const jobId = await insertJob(db, 'RUNNING');
  const assignmentId = await insertAssignment(db, { jobId, machineId, state: 'running' });
  const agent = await AgentSocket.connect(url, machineToken);
  t.teardown(() => agent.close());
  agent.send(hello(testInventory(), [{ assignmentId, jobId, state: 'running', nextLogSeq: 0 }]));
  t.same((await agent.next('welcome')).acked, [{ assignmentId, seq: null }]);
  await db.query(`UPDATE machines SET last_heartbeat_at = now() - interval '3 seconds' WHERE id = $1`, [machineId]);
  agent.send(heartbeat({ runningAssignmentIds: [assignmentId] }));
  agent.send({ type: 'logs', assignmentId, lines: [{ seq: 0, stream: 'stderr', atMs: Date.now(), line: 'hello' }] });
  t.equal((await agent.next('logs.ack', (m) => m.assignmentId === assignmentId)).seq, 0);
  const [uptime] = await db.query<{ s: number }>('SELECT sum(seconds_up)::int AS s FROM machine_uptime_days WHERE machine_id = $1', [machineId]);
  t.ok(uptime!.s >= 3 && uptime!.s <= 4, `uptime counted (${uptime!.s})`);
  t.same(await db.query('SELECT seq, stream, line FROM log_lines WHERE assignment_id = $1', [assignmentId]), [{ seq: 0, stream: 'stderr', line: 'hello' }]);
  const offered = await insertAssignment(db, { jobId: await insertJob(db), machineId });
  await notifyAgent(db, { machineId, assignmentId: offered, kind: 'assign' });
  t.equal((await agent.next('assign')).assignment.assignmentId, offered);
  await db.query(`UPDATE machines SET last_heartbeat_at = now() - interval '3 seconds' WHERE id = $1`, [machineId]);
  await gateway.sweep();
  const [machine] = await db.query<{ status: string }>('SELECT status FROM machines WHERE id = $1', [machineId]);
  t.equal(machine?.status, 'offline');
});

t.test('behavior: notices missed while the LISTEN connection was down are made good: offers are resent once it is back', async (t) => {
  const { app, db, url } = await startGatewayApp(t);
  const { machineId, machineToken } = await enrollMachine(app, db);
  const agent = await AgentSocket.connect(url, machineToken);
  t.teardown(() => agent.close());
  agent.send(hello());
  await agent.next('welcome');
  const killed = await db.query<{ ok: boolean }>(
    `SELECT pg_terminate_backend(pid) AS ok FROM pg_stat_activity
      WHERE datname = current_database() AND pid <> pg_backend_pid() AND query ILIKE 'LISTEN%'`,
  );
  t.ok(killed.length > 0 && killed.every((k) => k.ok), 'the listening connection was cut');
  const assignmentId = await insertAssignment(db, { jobId: await insertJob(db), machineId });
  await notifyAgent(db, { machineId, assignmentId, kind: 'assign' });
  t.equal((await agent.next('assign')).assignment.assignmentId, assignmentId, 'sent after the listener reconnected');
});
