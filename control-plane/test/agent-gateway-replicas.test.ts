import { AGENT_CLOSE_CODES } from '@gpufarm/shared';
import t from 'tap';
import { openPostgres } from '../src/db/postgres.js';
import { notifyAgent } from '../src/dispatch/store.js';
import { createPostgresTestDatabase } from './helpers/database.js';
import { AgentSocket, enrollMachine, hello, insertAssignment, insertJob, startGatewayApp } from './helpers/agent-client.js';

/** Two control-plane replicas (two pools, two gateways listening) on one PostgreSQL database. */
t.test('behavior: a machine linked to replica A that connects to replica B is taken over by B; dispatches from either reach B only', async (t) => {
  const { db, url } = await createPostgresTestDatabase(t);
  const other = openPostgres(url!);
  t.teardown(() => other.close());
  const a = await startGatewayApp(t, { db });
  const b = await startGatewayApp(t, { db: other });
  const { machineId, machineToken } = await enrollMachine(a.app, db);

  const first = await AgentSocket.connect(a.url, machineToken);
  first.send(hello());
  await first.next('welcome');
  t.equal(a.gateway.connectedMachines(), 1);

  const second = await AgentSocket.connect(b.url, machineToken);
  t.teardown(() => second.close());
  const closed = await first.closed;
  t.equal(closed.code, AGENT_CLOSE_CODES.replaced, 'replica A closed its older link');
  t.match(closed.reason, /took over/);
  second.send(hello());
  t.equal((await second.next('welcome')).machineId, machineId);
  t.equal(a.gateway.connectedMachines(), 0, 'A holds no link of the machine');
  t.equal(b.gateway.connectedMachines(), 1);

  // An assignment decided on replica A reaches the agent through replica B.
  const assignmentId = await insertAssignment(db, { jobId: await insertJob(db), machineId });
  await notifyAgent(db, { machineId, assignmentId, kind: 'assign' });
  t.equal((await second.next('assign')).assignment.assignmentId, assignmentId);
  await notifyAgent(other, { machineId, assignmentId, kind: 'cancel', reason: 'the customer canceled the job' });
  t.same(await second.next('cancel'), { type: 'cancel', assignmentId, reason: 'the customer canceled the job' });

  // Back to A: B's link is the older one now.
  const third = await AgentSocket.connect(a.url, machineToken);
  t.teardown(() => third.close());
  t.equal((await second.closed).code, AGENT_CLOSE_CODES.replaced, 'replica B closed its link in turn');
  third.send(hello());
  t.equal((await third.next('welcome')).machineId, machineId);
});
