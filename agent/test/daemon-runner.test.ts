import t from 'tap';
import type { AssignmentSpec } from '@gpufarm/shared';
import { TestPeer } from './helpers/peer.js';
import { holdingRunner, testDaemon } from './helpers/daemon.js';

/**
 * The AssignmentRunner port as the daemon drives it. The runner here is a scripted producer of
 * lines and reports (the Docker runtime implements the same port); it stands in for containers,
 * not for any service the agent talks to.
 */
const scriptedRunner = () => holdingRunner((spec) => (spec.gpus.length > 1 ? { accepted: false, reason: 'gpus_unavailable', message: 'only one GPU is free' } : null));

const base = (id: string, gpus: number): AssignmentSpec => ({
  assignmentId: id, jobId: `job_${id}`, image: '127.0.0.1:5000/gpufarm/busybox:1', imageDigest: null, command: ['sh', '-c', 'echo hi'], env: {},
  gpus: [...Array(gpus).keys()].map((i) => ({ index: i, uuid: `GPU-sim-l4-24gb-${i}` })), cpuCores: null, ramBytes: null, maxRuntimeSeconds: 60,
  networkPolicy: { mode: 'none' }, inputs: [], outputRules: [{ path: '/output', maxBytes: 1024 }],
});

const status = (state: 'running' | 'finished') => ({
  state, imageDigest: null, startedAt: '2026-11-22T00:00:00.000Z', finishedAt: state === 'finished' ? '2026-11-22T00:00:01.000Z' : null,
  exitCode: state === 'finished' ? 0 : null, oomKilled: state === 'finished' ? false : null, timedOut: state === 'finished' ? false : null,
  failure: null, outputs: null, record: null, lastLogSeq: null,
});

t.test('behavior: accept, logs, status across a dropped link, and release once every line is acked', async (t) => {
  const peer = await TestPeer.start();
  t.teardown(() => peer.close());
  const { machineToken } = peer.addMachine('m_runner');
  const { runner, held } = scriptedRunner();
  const agent = testDaemon({ server: peer.url, machineToken, simulate: '2x l4-24gb', runner });
  t.teardown(agent.cleanup);
  await agent.daemon.start();
  await peer.waitFor(() => peer.messages('hello').length === 1, 'hello');

  peer.send({ type: 'assign', assignment: base('asg_two', 2) });
  await peer.waitFor(() => peer.messages('assignment.rejected').length === 1, 'rejection');
  t.match(peer.messages('assignment.rejected')[0], { assignmentId: 'asg_two', reason: 'gpus_unavailable', message: 'only one GPU is free' });

  peer.send({ type: 'assign', assignment: base('asg_one', 1) });
  await peer.waitFor(() => peer.messages('assignment.accepted').length === 1, 'acceptance');
  const { ctx } = held.get('asg_one')!;
  ctx.logs.write('system', 'pulling');
  ctx.logs.write('stdout', 'hi');
  ctx.report(status('running'));
  await peer.waitFor(() => peer.messages('assignment.status').length === 1 && (peer.lines.get('asg_one')?.length ?? 0) === 2, 'running and two lines');

  peer.dropAll();
  await peer.waitFor(() => peer.messages('hello').length === 2, 'second hello');
  t.match(peer.messages('hello')[1]!.running, [{ assignmentId: 'asg_one', jobId: 'job_asg_one', state: 'running', nextLogSeq: 2 }], 'hello reports the held assignment');
  await peer.waitFor(() => peer.messages('assignment.status').length === 2, 'status sent again after the reconnect');
  t.equal(peer.messages('assignment.status')[1]!.state, 'running');

  ctx.logs.write('stdout', 'bye');
  held.delete('asg_one');
  ctx.report(status('finished'));
  await peer.waitFor(() => peer.messages('assignment.status').some((m) => m.state === 'finished') && (peer.lines.get('asg_one')?.length ?? 0) === 3, 'finished');
  await ctx.logs.drained();
  await new Promise((r) => setImmediate(r));
  t.equal(agent.daemon.logs.stats('asg_one'), null, 'the assignment is forgotten once its lines are acked');
  t.same(peer.lines.get('asg_one')!.map((l) => [l.seq, l.stream, l.line]), [[0, 'system', 'pulling'], [1, 'stdout', 'hi'], [2, 'stdout', 'bye']]);
  t.equal(peer.invalid.length, 0);
});
