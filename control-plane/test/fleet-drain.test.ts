import t from 'tap';
import { loadFleetRows } from '../src/capacity/store.js';
import { sweepDrainDeadlines } from '../src/execution/drain-deadlines.js';
import type { ExecutionDeps } from '../src/execution/deps.js';
import { listAudit, type AuditActor } from '../src/fleet/audit.js';
import { setFarmQuarantine } from '../src/farms/quarantine.js';
import { setMachineCordon, setMachineDrain } from '../src/machines/drain.js';
import { listFleetEvents, sweepOldFleetEvents } from '../src/fleet/events.js';
import { loadCandidates } from '../src/matching/store.js';
import { AgentSocket, agentWithRunningJob, enrollMachine, hello, startGatewayApp } from './helpers/agent-client.js';

const admin: AuditActor = { kind: 'admin_wallet', id: '0x' + '11'.repeat(20) };

t.test('drain, cordon and quarantine', async (t) => {
  const test = await startGatewayApp(t);
  const { app, db, url } = test;
  const { machineId, machineToken } = await enrollMachine(app, db);
  // Verified as if its GPU challenge passed, so it is offered.
  await db.query(`UPDATE machines SET verification = 'verified' WHERE id = $1`, [machineId]);
  const agent = await AgentSocket.connect(url, machineToken);
  t.teardown(() => agent.close());
  agent.send(hello());
  await agent.next('welcome');
  const farmId = (await db.query<{ farm_id: string }>('SELECT farm_id FROM machines WHERE id = $1', [machineId]))[0]!.farm_id;
  const offered = async () => ({
    index: (await loadFleetRows(db, { allowSimulated: true })).some((r) => r.machineId === machineId),
    matcher: (await loadCandidates(db, { allowAgentless: false, allowSimulated: true, now: new Date() })).some((u) => u.machine.id === machineId),
  });
  t.same(await offered(), { index: true, matcher: true }, 'offered before');

  t.test('behavior: a drain reaches the agent link as `drain`, withdraws the offer, and is recorded', async (t) => {
    const deadline = new Date(Date.now() + 3600_000);
    const state = await setMachineDrain(db, { machineId, drain: true, deadline, reason: 'rack maintenance', actor: admin });
    t.same(state, { machineId, drainRequested: true, drainSetBy: 'admin', drainDeadline: deadline, drainReason: 'rack maintenance', cordoned: false });
    t.same(await agent.next('drain'), { type: 'drain', undrain: false, reason: 'rack maintenance' });
    t.same(await offered(), { index: false, matcher: false });
    const { events } = await listFleetEvents(db, { limit: 10, after: null, machineId });
    t.match(events[0], { type: 'machine.drained', machineId, farmId, message: /rack maintenance/ });
    const { entries } = await listAudit(db, { limit: 10, after: null });
    t.match(entries[0], { actor: admin, action: 'machine.drain', targetType: 'machine', targetId: machineId, details: { reason: 'rack maintenance', deadline: deadline.toISOString() } });

    t.same(await setMachineDrain(db, { machineId, drain: false, deadline: null, reason: null, actor: admin }), { machineId, drainRequested: false, drainSetBy: null, drainDeadline: null, drainReason: null, cordoned: false });
    t.same(await agent.next('drain'), { type: 'drain', undrain: true, reason: null });
    t.same(await offered(), { index: true, matcher: true }, 'offered again');
  });

  t.test('behavior: a cordon withdraws the offer without telling the agent; a quarantine withdraws the farm', async (t) => {
    await setMachineCordon(db, { machineId, cordon: true, reason: 'flaky fan', actor: admin });
    t.same(await offered(), { index: false, matcher: false });
    await setMachineCordon(db, { machineId, cordon: false, reason: null, actor: admin });
    t.same(await offered(), { index: true, matcher: true });
    t.same(await setFarmQuarantine(db, { farmId, quarantine: true, reason: 'fraud review', actor: admin }), { farmId, status: 'quarantined', quarantineReason: 'fraud review' });
    t.same(await offered(), { index: false, matcher: false });
    await setFarmQuarantine(db, { farmId, quarantine: false, reason: null, actor: admin });
    t.same(await offered(), { index: true, matcher: true });
    await agent.barrier();
    t.notOk(agent.received.some((m) => m.type === 'drain'), 'no drain message for a cordon or quarantine');
    const { events } = await listFleetEvents(db, { limit: 10, after: null, farmId });
    t.same(events.slice(0, 4).map((e) => e.type), ['farm.unquarantined', 'farm.quarantined', 'machine.uncordoned', 'machine.cordoned']);
    const page1 = await listAudit(db, { limit: 3, after: null });
    const page2 = await listAudit(db, { limit: 3, after: page1.next });
    t.same([...page1.entries, ...page2.entries].map((e) => e.action), ['farm.unquarantine', 'farm.quarantine', 'machine.uncordon', 'machine.cordon', 'machine.undrain', 'machine.drain'], 'paged newest first');
    t.equal(page2.next, null);
  });

  t.test('error: no such machine or farm gives null; the audit log refuses changes', async (t) => {
    t.equal(await setMachineDrain(db, { machineId: 'mch_missing', drain: true, deadline: null, reason: null, actor: admin }), null);
    t.equal(await setMachineCordon(db, { machineId: 'mch_missing', cordon: true, reason: null, actor: admin }), null);
    t.equal(await setFarmQuarantine(db, { farmId: 'farm_missing', quarantine: true, reason: null, actor: admin }), null);
    await t.rejects(db.query('DELETE FROM audit_log'), /append-only/);
    await t.rejects(db.query(`UPDATE fleet_events SET message = 'x'`), /append-only/);
  });
});

t.test('behavior: at the drain deadline, what still runs is stopped and requeued as machine_drained, never charged', async (t) => {
  const { app, db, url, config, blobs } = await startGatewayApp(t);
  const { agent, machineId, jobId, assignmentId } = await agentWithRunningJob(t, { app, db, url });
  const deps: ExecutionDeps = { db, escrow: null, config: config.execution, blobs };

  await setMachineDrain(db, { machineId, drain: true, deadline: new Date(Date.now() + 3600_000), reason: 'move', actor: admin });
  await agent.next('drain');
  t.equal(await sweepDrainDeadlines(deps), 0, 'before the deadline the job runs on');

  await setMachineDrain(db, { machineId, drain: true, deadline: new Date(Date.now() - 1000), reason: 'move', actor: admin });
  t.equal(await sweepDrainDeadlines(deps), 1);
  t.match(await agent.next('cancel'), { assignmentId, reason: /drained/ });
  const [asg] = await db.query<{ state: string; failure_code: string }>('SELECT state, failure_code FROM assignments WHERE id = $1', [assignmentId]);
  t.same(asg, { state: 'failed', failure_code: 'machine_drained' });
  const [job] = await db.query<{ status: string; assignment_id: string | null }>('SELECT status, assignment_id FROM jobs WHERE id = $1', [jobId]);
  t.same(job, { status: 'QUEUED', assignment_id: null }, 'requeued for another machine');
  const [excluded] = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM job_exclusions WHERE job_id = $1', [jobId]);
  t.equal(excluded?.n, 0, 'the machine is not held against the job');
  t.equal(await sweepDrainDeadlines(deps), 0, 'stopped once');
});

t.test('behavior: a drain asked while the agent was away reaches it at hello', async (t) => {
  const { app, db, url } = await startGatewayApp(t);
  const { machineId, machineToken } = await enrollMachine(app, db);
  await setMachineDrain(db, { machineId, drain: true, deadline: null, reason: 'decommission', actor: admin });
  const agent = await AgentSocket.connect(url, machineToken);
  t.teardown(() => agent.close());
  agent.send(hello());
  await agent.next('welcome');
  t.same(await agent.next('drain'), { type: 'drain', undrain: false, reason: 'decommission' });
});

t.test('behavior: the retention sweep deletes events past the retention only', async (t) => {
  const { db } = await startGatewayApp(t);
  await db.query(`INSERT INTO fleet_events (type, message, at) VALUES ('link.up', 'old', now() - interval '91 days'), ('link.up', 'new', now())`);
  t.equal(await sweepOldFleetEvents(db), 1);
  t.same((await listFleetEvents(db, { limit: 10, after: null })).events.map((e) => e.message), ['new']);
});
