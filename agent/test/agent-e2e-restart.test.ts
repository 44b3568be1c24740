import { verify } from 'node:crypto';
import t from 'tap';
import { docker } from './helpers/docker.js';
import { checkNumbering, e2eAgent, expected, finished, numbered, of, spec, until, untar } from './helpers/e2e.js';
import { LOG_LEVELS } from '@gpufarm/shared';

/**
 * End to end across an agent's death and a partition: the real `gf-agent run` (child process,
 * simulated GPUs), the test peer as the control plane, real dockerd and registry images.
 */

// Four scenarios of about half a minute each (grace periods the agent waits out): past tap's
// default two minutes when the machine is busy.
t.setTimeout(300_000);

t.test('behavior: the agent is killed (SIGKILL) mid-job and started again: the job runs once and finishes, its lines complete without duplicates, its result reported', async (t) => {
  const agent = await e2eAgent(t);
  const { peer } = agent;
  const first = agent.start();
  await peer.waitFor(() => peer.messages('hello').length === 1, 'hello');

  const COUNT = 80;
  const job = spec({ command: ['sh', '-c', `${numbered(COUNT, 50_000)}; echo ran >> /output/runs.txt`] });
  peer.assign(job);
  await peer.waitFor(() => of(peer.lines.get(job.assignmentId) ?? [], 'stdout').length >= 10, 'some lines');
  first.child.kill('SIGKILL');
  t.equal(await first.exited, null, 'the agent died by the signal');
  const during = await agent.container(job.assignmentId);
  t.equal(during?.state, 'running', 'the container runs on without the agent');

  const second = agent.start();
  await peer.waitFor(() => peer.messages('hello').length === 2, 'hello from the restarted agent');
  t.match(peer.messages('hello')[1]!.running, [{ assignmentId: job.assignmentId, jobId: job.jobId }], 'hello lists the restored assignment');

  const final = await finished(agent, job.assignmentId);
  t.equal(final.state, 'finished', final.failure?.message ?? '');
  t.equal(final.exitCode, 0);
  const lines = checkNumbering(t, agent, job.assignmentId);
  t.same(of(lines, 'stdout'), expected('out', COUNT), 'every stdout line once, in order');
  t.same(of(lines, 'stderr'), expected('err', COUNT), 'every stderr line once, in order');

  const upload = peer.storedUploads(job.assignmentId).get('output-0')!;
  t.equal((await untar(upload.body, 'runs.txt')).text, 'ran\n', 'the job ran once');
  t.ok(verify(null, Buffer.from(final.record!.json), peer.enrollments[0]!.publicKeyPem, Buffer.from(final.record!.signature, 'base64')), 'the record verifies');
  const log = peer.storedUploads(job.assignmentId).get('log')!;
  const logLines = log.body.toString('utf8').trim().split('\n').map((l) => JSON.parse(l) as { stream: string; line: string });
  t.same(logLines.map((l) => [l.stream, l.line]), lines.map((l) => [l.stream, l.line]), 'the log artifact is the streamed log, once');
  await until(async () => (await agent.container(job.assignmentId)) === null, 'the container removed after the upload');
  t.ok(second.child.exitCode === null, 'the restarted agent runs on');
});

t.test('behavior: a job that finishes while the agent is down is reported at the next start with its exit code and outputs', async (t) => {
  const agent = await e2eAgent(t);
  const { peer } = agent;
  const first = agent.start();
  await peer.waitFor(() => peer.messages('hello').length === 1, 'hello');

  const job = spec({ command: ['sh', '-c', 'echo waiting; i=0; while [ $i -lt 30 ]; do echo out-$i; i=$((i+1)); usleep 100000; done; echo result > /output/result.txt; exit 7'] });
  peer.assign(job);
  await peer.waitFor(() => of(peer.lines.get(job.assignmentId) ?? [], 'stdout').length >= 1, 'the first line');
  first.child.kill('SIGKILL');
  await first.exited;
  const container = await agent.container(job.assignmentId);
  await docker.getContainer(container!.id).wait();

  agent.start();
  const final = await finished(agent, job.assignmentId);
  t.equal(final.state, 'finished', final.failure?.message ?? '');
  t.equal(final.exitCode, 7, 'the exit code of the run that ended while the agent was down');
  const lines = checkNumbering(t, agent, job.assignmentId);
  t.same(of(lines, 'stdout'), ['waiting', ...expected('out', 30)], 'the lines printed while the agent was down arrive, once');
  const upload = peer.storedUploads(job.assignmentId).get('output-0')!;
  t.equal((await untar(upload.body, 'result.txt')).text, 'result\n', 'its outputs are uploaded');
});

t.test('behavior: partition: the control plane stays unreachable past partition_grace_seconds, the job is stopped, and its outputs are uploaded once the link is back', async (t) => {
  const agent = await e2eAgent(t, { GF_AGENT_PARTITION_GRACE_SECONDS: '3' });
  const { peer } = agent;
  const proc = agent.start();
  await peer.waitFor(() => peer.messages('hello').length === 1, 'hello');

  const job = spec({ command: ['sh', '-c', 'echo partial > /output/partial.txt; echo started; exec sleep 600'], maxRuntimeSeconds: 3600 });
  peer.assign(job);
  await peer.waitFor(() => of(peer.lines.get(job.assignmentId) ?? [], 'stdout').includes('started'), 'the job started');

  peer.setOffline(true);
  await until(async () => (await agent.container(job.assignmentId))?.state === 'exited', 'the container stopped while the link is down');
  t.equal(peer.storedUploads(job.assignmentId).size, 0, 'nothing uploaded while the control plane is unreachable');
  t.equal(peer.refusedWhileOffline, 0, 'no upload was even tried');
  t.match(
    proc.lines().find((l) => /control plane unreachable for 3 s, stopping it \(outputs kept for upload\)/.test(l.msg)),
    { level: LOG_LEVELS.warn, machineId: agent.machineId, jobId: job.jobId, assignmentId: job.assignmentId },
  );

  peer.setOffline(false);
  const final = await finished(agent, job.assignmentId);
  t.equal(final.state, 'finished', final.failure?.message ?? '');
  t.not(final.exitCode, 0, 'stopped, not exited by itself');
  t.equal(final.timedOut, false, 'not the runtime limit');
  const upload = peer.storedUploads(job.assignmentId).get('output-0')!;
  t.equal((await untar(upload.body, 'partial.txt')).text, 'partial\n', 'what the job wrote before the stop is uploaded');
  t.ok(peer.storedUploads(job.assignmentId).has('log'), 'the log artifact too');
  const lines = checkNumbering(t, agent, job.assignmentId);
  t.same(of(lines, 'stdout'), ['started']);
  t.ok(of(lines, 'system').some((l) => l.startsWith('the control plane was unreachable for 3 s (the partition grace): stopping before it can give the job to another machine')), 'the job log says why it stopped');
});

t.test('behavior: the control plane goes away during the upload: the outputs wait for the link and go up once it is back', async (t) => {
  const agent = await e2eAgent(t);
  const { peer } = agent;
  agent.start();
  await peer.waitFor(() => peer.messages('hello').length === 1, 'hello');

  peer.onUpload = () => {
    peer.onUpload = null;
    peer.setOffline(true);
  };
  const job = spec({ command: ['sh', '-c', 'echo kept > /output/kept.txt; echo done'] });
  peer.assign(job);
  // Every attempt of one round of uploads is refused while the control plane is away.
  await peer.waitFor(() => peer.refusedWhileOffline >= 5, 'the upload attempts while offline');
  t.equal(peer.storedUploads(job.assignmentId).size, 0);
  peer.setOffline(false);

  const final = await finished(agent, job.assignmentId);
  t.equal(final.state, 'finished', final.failure?.message ?? '');
  t.equal(final.exitCode, 0);
  const upload = peer.storedUploads(job.assignmentId).get('output-0')!;
  t.equal((await untar(upload.body, 'kept.txt')).text, 'kept\n', 'the outputs went up after the link came back');
  checkNumbering(t, agent, job.assignmentId);
});
