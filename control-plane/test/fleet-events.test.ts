import { AGENT_CLOSE_CODES } from '@gpufarm/shared';
import t from 'tap';
import { listFleetEvents } from '../src/fleet/events.js';
import { GpuSampleAggregator } from '../src/fleet/history.js';
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

t.test('behavior: heartbeats over a real link reach the history in minute rows, without a write per heartbeat', async (t) => {
  const samples = new GpuSampleAggregator();
  const { app, db, url } = await startGatewayApp(t, { gpuSamples: (machineId, gpus) => samples.add(machineId, gpus, Date.now()) });
  const { machineId, machineToken } = await enrollMachine(app, db);
  const agent = await AgentSocket.connect(url, machineToken);
  t.teardown(() => agent.close());
  agent.send(hello());
  await agent.next('welcome');
  const gpu = (util: number) => [{ index: 0, uuid: 'GPU-sim-0-0000', temperatureC: 50, utilizationPercent: util, memoryUsedBytes: 2048, powerDrawWatts: 150 }];
  agent.send(heartbeat({ gpus: gpu(30) }));
  agent.send(heartbeat({ gpus: gpu(50) }));
  await agent.barrier();
  const rows = async () => db.query<{ samples: number; util: number }>('SELECT samples, util_sum / util_n AS util FROM gpu_samples_minute WHERE machine_id = $1', [machineId]);
  t.same(await rows(), [], 'nothing written per heartbeat');
  t.ok(samples.pending >= 1);
  await samples.flush(db);
  const written = await rows();
  t.equal(written.reduce((n, r) => n + r.samples, 0), 2, 'both heartbeats counted');
  t.equal(samples.pending, 0);
});
