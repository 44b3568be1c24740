import { AGENT_CLOSE_CODES } from '@gpufarm/shared';
import t from 'tap';
import { listFleetEvents } from '../src/fleet/events.js';
import { AgentSocket, enrollMachine, heartbeat, hello, insertAssignment, insertJob, startGatewayApp, testInventory } from './helpers/agent-client.js';

t.test('behavior: fleet events are recorded where they happen, once per change', async (t) => {
  const { app, db, url, gateway } = await startGatewayApp(t, { env: { GF_MACHINE_OFFLINE_SECONDS: '1', GF_MACHINE_LOST_GRACE_SECONDS: '5' } });
  const { machineId, machineToken } = await enrollMachine(app, db);
  const types = async () => (await listFleetEvents(db, { limit: 100, after: null, machineId })).events.map((e) => e.type).reverse();
  t.same(await types(), ['machine.enrolled']);

  const agent = await AgentSocket.connect(url, machineToken);
  agent.send(hello());
  await agent.next('welcome');
  const sick = { status: 'unhealthy' as const, reason: 'the GPU probe failed', gpuProbe: 'failed' as const, checkedAt: new Date().toISOString() };
  agent.send(heartbeat({ health: sick }));
  agent.send(heartbeat({ health: sick }));
  agent.send(heartbeat());
  agent.send(heartbeat());
  await agent.barrier();
  t.same(await types(), ['machine.enrolled', 'link.up', 'machine.unhealthy', 'machine.healthy'], 'heartbeats write an event only on a change');
  const [unhealthy] = (await listFleetEvents(db, { limit: 1, after: null, machineId, types: ['machine.unhealthy'] })).events;
  t.match(unhealthy, { message: /the GPU probe failed/, farmId: /^farm_/ });

  agent.ws.close(1000, 'agent stopping');
  await agent.closed;
  // The server records the close once it sees it.
  for (let i = 0; i < 50 && !(await types()).includes('link.down'); i += 1) await new Promise((resolve) => setTimeout(resolve, 50));
  t.match((await listFleetEvents(db, { limit: 1, after: null, machineId })).events[0], { type: 'link.down', message: /agent stopping/ });

  const jobId = await insertJob(db, 'RUNNING');
  const assignmentId = await insertAssignment(db, { jobId, machineId, state: 'running' });
  await db.query('UPDATE jobs SET assignment_id = $2 WHERE id = $1', [jobId, assignmentId]);
  await db.query(`UPDATE machines SET status = 'online', last_heartbeat_at = now() - interval '3 seconds' WHERE id = $1`, [machineId]);
  await gateway.sweep();
  t.match((await listFleetEvents(db, { limit: 1, after: null, machineId })).events[0], { type: 'machine.partitioned', details: { liveAssignments: 1 } });
  await db.query(`UPDATE machines SET offline_since = now() - interval '6 seconds' WHERE id = $1`, [machineId]);
  await gateway.sweep();
  t.match((await listFleetEvents(db, { limit: 1, after: null, machineId })).events[0], { type: 'job.failed', jobId, details: { code: 'machine_lost', requeued: true } });
});

t.test('behavior: a link replaced by a newer one of the same machine records no outage', async (t) => {
  const { app, db, url } = await startGatewayApp(t);
  const { machineId, machineToken } = await enrollMachine(app, db);
  const first = await AgentSocket.connect(url, machineToken);
  first.send(hello(testInventory()));
  await first.next('welcome');
  const second = await AgentSocket.connect(url, machineToken);
  t.teardown(() => second.close());
  t.equal((await first.closed).code, AGENT_CLOSE_CODES.replaced);
  second.send(hello(testInventory()));
  await second.next('welcome');
  const types = (await listFleetEvents(db, { limit: 100, after: null, machineId })).events.map((e) => e.type);
  t.same(types, ['link.up', 'link.up', 'machine.enrolled']);
});
