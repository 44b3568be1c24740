import { createHash, verify } from 'node:crypto';
import { createServer } from 'node:http';
import t from 'tap';
import { docker, localImages } from './helpers/docker.js';
import { checkNumbering, e2eAgent, expected, finished, numbered, of, sha256sum, spec, until, untar } from './helpers/e2e.js';
import { LOG_LEVELS } from '@gpufarm/shared';

/**
 * End to end: the real `gf-agent run` as a child process (simulated GPUs), the test peer as the
 * control plane, the real Docker Engine and the local registry's images pinned by digest.
 */

// Five jobs run one after another: 134 s beside three page tests here, and past the 120 s
// default in a CI run at deb2218, which cut the fifth short.
t.setTimeout(300_000);

t.test('behavior: a busybox job: every line once, in order with its stream; exit code; artifacts hash as sha256sum; the record verifies with the enrolled key', async (t) => {
  const agent = await e2eAgent(t);
  const { peer } = agent;
  agent.start();
  await peer.waitFor(() => peer.messages('hello').length === 1, 'hello');

  const COUNT = 500;
  const job = spec({ command: ['sh', '-c', `${numbered(COUNT)}; echo done > /output/result.txt; exit 3`] });
  peer.assign(job);
  const final = await finished(agent, job.assignmentId);

  t.equal(final.state, 'finished', final.failure?.message ?? '');
  // `pulling` is reported only when a pull begins (the image was not on the machine), `starting` once the image is there.
  const states = peer.statuses(job.assignmentId).map((m) => m.state);
  t.same(states.filter((s) => s !== 'pulling'), ['starting', 'running', 'exited', 'uploading', 'finished']);
  const pulled = !(peer.lines.get(job.assignmentId) ?? []).some((l) => l.stream === 'system' && / present locally$/.test(l.line));
  t.same(states.slice(0, pulled ? 2 : 1), pulled ? ['pulling', 'starting'] : ['starting'], pulled ? 'the image was pulled: pulling, then starting' : 'the image was on the machine: no pulling');
  // Each status comes after the lines written before it (the server's line for it follows them).
  let sentSeq = -1;
  const behind: string[] = [];
  for (const m of peer.received) {
    if (m.type === 'logs' && m.assignmentId === job.assignmentId) sentSeq = Math.max(sentSeq, ...m.lines.map((l) => l.seq));
    if (m.type === 'assignment.status' && m.assignmentId === job.assignmentId && (m.lastLogSeq ?? -1) > sentSeq) behind.push(`${m.state} (line ${m.lastLogSeq} not yet sent, ${sentSeq} was)`);
  }
  t.same(behind, [], 'no status overtakes its lines');
  t.equal(final.exitCode, 3, 'the exit code');
  t.equal(final.oomKilled, false);
  t.equal(final.timedOut, false);
  t.equal(final.imageDigest, localImages().busybox.digest, 'ran the pinned digest');
  t.match(peer.messages('assignment.accepted'), [{ assignmentId: job.assignmentId }]);

  const lines = checkNumbering(t, agent, job.assignmentId);
  t.same(of(lines, 'stdout'), expected('out', COUNT), 'every stdout line once, in order');
  t.same(of(lines, 'stderr'), expected('err', COUNT), 'every stderr line once, in order');
  t.ok(of(lines, 'system').some((l) => /^\/output is a \d+-byte filesystem/.test(l)), 'the system lines say how /output is limited');

  // Artifacts: the peer's hash while storing, the agent's declared hash and sha256sum agree.
  const uploads = peer.storedUploads(job.assignmentId);
  t.same([...uploads.keys()].sort(), ['log', 'output-0']);
  const output = uploads.get('output-0')!;
  const log = uploads.get('log')!;
  t.equal(output.machineId, agent.machineId, 'uploaded with the machine token');
  t.equal(await sha256sum(output.body), final.outputs![0]!.sha256, 'output-0: the reported hash is sha256sum of the uploaded bytes');
  t.equal(output.declaredSha256, output.sha256, 'output-0: the hash header matches what the peer hashed');
  t.equal(final.outputs![0]!.sizeBytes, output.body.length);
  t.equal(final.outputs![0]!.path, '/output');
  t.equal(final.outputs![0]!.name, 'output-0', 'the artifact name of the upload');
  t.same(final.log, { sha256: await sha256sum(log.body), sizeBytes: log.body.length }, 'the log artifact in the report is sha256sum of the uploaded log');
  const tar = await untar(output.body, 'result.txt');
  t.same(tar.names, ['result.txt']);
  t.equal(tar.text, 'done\n');

  // The log artifact holds exactly the lines that streamed, in the same order.
  const logLines = log.body.toString('utf8').trim().split('\n').map((l) => JSON.parse(l) as { stream: string; line: string });
  t.same(logLines.map((l) => [l.stream, l.line]), lines.map((l) => [l.stream, l.line]), 'the log artifact is the streamed log');

  // The signed record, checked with node:crypto and the public key sent at enrollment.
  const publicKeyPem = peer.enrollments[0]!.publicKeyPem;
  t.ok(verify(null, Buffer.from(final.record!.json, 'utf8'), publicKeyPem, Buffer.from(final.record!.signature, 'base64')), 'the record verifies with the enrolled public key');
  const record = JSON.parse(final.record!.json) as Record<string, unknown> & { outputs: Array<{ sha256: string }>; log: { sha256: string; sizeBytes: number } };
  t.match(record, { version: 1, assignmentId: job.assignmentId, jobId: job.jobId, imageDigest: localImages().busybox.digest, exitCode: 3, oomKilled: false, timedOut: false });
  t.equal(record.argvSha256, createHash('sha256').update(JSON.stringify(job.command)).digest('hex'), 'argvSha256 is the hash of the argv as JSON');
  t.equal(record.outputs[0]!.sha256, await sha256sum(output.body));
  t.equal(record.log.sha256, await sha256sum(log.body), 'the log artifact hash is sha256sum of the uploaded log');
  t.equal(record.log.sizeBytes, log.body.length);

  await until(async () => (await agent.container(job.assignmentId)) === null, 'the container removed after the upload');
});

t.test('behavior: the link drops twice mid-job; the agent reconnects and every line arrives exactly once, in order', async (t) => {
  const agent = await e2eAgent(t);
  const { peer } = agent;
  agent.start();
  await peer.waitFor(() => peer.messages('hello').length === 1, 'hello');

  const COUNT = 200;
  const job = spec({ command: ['sh', '-c', numbered(COUNT, 30_000)] });
  peer.assign(job);
  const stored = () => peer.lines.get(job.assignmentId)?.length ?? 0;
  await peer.waitFor(() => stored() >= 40, 'some lines');

  // The container as created: no GPU device requests in simulated mode, no network.
  const container = await agent.container(job.assignmentId);
  const info = await docker.getContainer(container!.id).inspect();
  t.same(info.HostConfig.DeviceRequests ?? [], [], 'simulated GPUs: no DeviceRequests');
  t.equal(info.HostConfig.NetworkMode, 'none');

  peer.dropAll();
  await peer.waitFor(() => peer.messages('hello').length === 2, 'the second hello');
  t.match(peer.messages('hello')[1]!.running, [{ assignmentId: job.assignmentId, jobId: job.jobId, state: 'running' }], 'hello lists the running assignment');
  const before = stored();
  // A slow machine may have printed everything by now: then the second drop hits the upload phase.
  await peer.waitFor(() => stored() > before + 20 || peer.statuses(job.assignmentId).some((m) => m.state === 'exited'), 'more lines');
  peer.dropAll();

  const final = await finished(agent, job.assignmentId);
  t.equal(final.state, 'finished');
  t.equal(final.exitCode, 0);
  t.ok(peer.connections >= 3, 'reconnected after each drop');
  const lines = checkNumbering(t, agent, job.assignmentId);
  t.same(of(lines, 'stdout'), expected('out', COUNT), 'every stdout line once, in order');
  t.same(of(lines, 'stderr'), expected('err', COUNT), 'every stderr line once, in order');
});

t.test('behavior: the canary image: result.txt is uploaded and equals sha256^n(GF_JOB_ID) computed with node:crypto', async (t) => {
  const agent = await e2eAgent(t);
  const { peer } = agent;
  agent.start();
  await peer.waitFor(() => peer.messages('hello').length === 1, 'hello');

  const N = 200_000;
  const images = localImages();
  const job = spec({ image: images.canary.repository, imageDigest: images.canary.digest, command: ['sha256-chain', String(N)], outputRules: [{ path: '/output/result.txt', maxBytes: 4096 }] });
  peer.assign(job);
  const final = await finished(agent, job.assignmentId);
  t.equal(final.state, 'finished', final.failure?.message ?? '');
  t.equal(final.exitCode, 0);
  t.equal(final.imageDigest, images.canary.digest);

  // d1 = SHA-256(job id bytes), dk = SHA-256(d(k-1)) over the raw digest; d_n in hex and a newline.
  let digest = createHash('sha256').update(Buffer.from(job.jobId, 'utf8')).digest();
  for (let i = 2; i <= N; i++) digest = createHash('sha256').update(digest).digest();
  const upload = peer.storedUploads(job.assignmentId).get('output-0')!;
  t.equal(await sha256sum(upload.body), final.outputs![0]!.sha256);
  const tar = await untar(upload.body, 'result.txt');
  t.same(tar.names, ['result.txt'], 'the rule on /output/result.txt packs that file alone');
  t.equal(tar.text, `${digest.toString('hex')}\n`, 'the uploaded result equals the independent chain');
});

t.test('behavior: a cancel mid-job stops it and still uploads its outputs; the same assignment again is refused as a duplicate', async (t) => {
  const agent = await e2eAgent(t);
  const { peer } = agent;
  agent.start();
  await peer.waitFor(() => peer.messages('hello').length === 1, 'hello');

  const job = spec({ command: ['sh', '-c', 'echo so-far > /output/so-far.txt; echo started; exec sleep 600'], maxRuntimeSeconds: 3600 });
  peer.assign(job);
  await peer.waitFor(() => of(peer.lines.get(job.assignmentId) ?? [], 'stdout').includes('started'), 'the job started');
  peer.assign(job);
  await peer.waitFor(() => peer.messages('assignment.rejected').length === 1, 'the second assign answered');
  t.match(peer.messages('assignment.rejected')[0], { assignmentId: job.assignmentId, reason: 'duplicate' });

  peer.send({ type: 'cancel', assignmentId: job.assignmentId, reason: 'customer canceled' });
  const final = await finished(agent, job.assignmentId);
  t.equal(final.state, 'finished', final.failure?.message ?? '');
  t.not(final.exitCode, 0, 'stopped');
  const upload = peer.storedUploads(job.assignmentId).get('output-0')!;
  t.equal((await untar(upload.body, 'so-far.txt')).text, 'so-far\n', 'the outputs so far are uploaded');
  checkNumbering(t, agent, job.assignmentId);
});

t.test('behavior: a cancel that arrives while the job is being prepared stops its container as soon as it runs', async (t) => {
  const agent = await e2eAgent(t);
  const { peer } = agent;
  const proc = agent.start();
  await peer.waitFor(() => peer.messages('hello').length === 1, 'hello');

  // An input whose download the test holds until the cancel went out.
  const bytes = Buffer.from('input bytes\n');
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  let requested = false;
  const server = createServer((_req, res) => {
    requested = true;
    void held.then(() => res.end(bytes));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => {
    release();
    server.closeAllConnections();
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  const url = `http://127.0.0.1:${(server.address() as { port: number }).port}/input`;
  const job = spec({
    command: ['sh', '-c', 'echo started; exec sleep 600'],
    maxRuntimeSeconds: 3600,
    inputs: [{ mountName: 'data.txt', artifactId: 'art_1', url, sha256: createHash('sha256').update(bytes).digest('hex'), sizeBytes: bytes.length }],
  });
  peer.assign(job);
  await until(() => requested, 'the input download started');
  peer.send({ type: 'cancel', assignmentId: job.assignmentId, reason: 'customer canceled' });
  await until(() => proc.messages().includes(`cancel ${job.assignmentId}: customer canceled`), 'the agent took the cancel');
  // journald gets JSON lines: the job's line names its job and machine as fields, not only in its text.
  t.match(
    proc.lines().find((l) => l.msg === `cancel ${job.assignmentId}: customer canceled`),
    { level: LOG_LEVELS.info, machineId: agent.machineId, jobId: job.jobId, assignmentId: job.assignmentId },
    'the cancel line carries machineId, jobId and assignmentId',
  );
  t.match(proc.lines().find((l) => l.msg.startsWith(`assignment ${job.assignmentId} accepted`)), { machineId: agent.machineId, jobId: job.jobId }, 'so does the accept line');
  t.notOk(peer.statuses(job.assignmentId).some((m) => m.state === 'running'), 'before the container ran');
  release();

  // Without the cancel the job would sleep for 600 s; finished here means it was stopped.
  const final = await finished(agent, job.assignmentId);
  t.equal(final.state, 'finished', final.failure?.message ?? '');
  t.not(final.exitCode, 0, 'stopped');
  t.ok(peer.statuses(job.assignmentId).some((m) => m.state === 'running'), 'it did start');
  t.ok(of(checkNumbering(t, agent, job.assignmentId), 'system').some((l) => l.startsWith('canceled: stopping')));
});
