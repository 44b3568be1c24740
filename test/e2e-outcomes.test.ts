import t from 'tap';
import { generatePrivateKey, privateKeyToAddress } from 'viem/accounts';
import { enrollAgent } from './helpers/agent.js';
import { Customer, linesOf, machineNotesOf, outputOf } from './helpers/customer.js';
import { escrowJob, expectPaidOnRelease } from './helpers/escrow.js';
import { busyboxSpec } from './helpers/jobs.js';
import { Marketplace } from './helpers/marketplace.js';

/**
 * End to end, separate processes: how jobs end besides a verified canary. One agent with two
 * simulated GPUs, so the one-minute timeout job runs beside the others.
 */

// Separate processes, real containers and a chain: minutes, not the default two.
t.setTimeout(300_000);

const FARM = 'e2e-outcomes';
const PAYOUT = privateKeyToAddress(generatePrivateKey());

// The log limits, scaled down so a job passes them many times over in seconds: the service
// stores 1 MiB of a job's lines (100 MiB in production), the agent keeps 256 KiB at each end of
// the log artifact (32 MiB), the server refusing a log artifact over 1 GiB either way.
const LOG_CAP_BYTES = 1024 * 1024;
const LOG_KEEP_BYTES = 256 * 1024;

// Requests are logged (info) so the test can read what the control plane writes of signed URLs.
const market = await Marketplace.start(t, { env: { GF_LOG_CAP_BYTES: String(LOG_CAP_BYTES), GF_LOG_LEVEL: 'info' } });
const agent = await enrollAgent(market, { name: 'agent', farm: FARM, payout: PAYOUT, priceUsd: '0.60', gpus: '2x rtx-4090-24gb', env: { GF_AGENT_JOB_LOG_KEEP_BYTES: String(LOG_KEEP_BYTES) } });
agent.start();
await market.waitForCapacity(FARM, 2);
const customer = await Customer.create(market, 1);

// The shortest runtime limit the spec allows is 60 s: start that job first, check it last.
const timeoutJob = await customer.createFundedJob(busyboxSpec(market.images, 'echo started; echo partial > /output/partial.txt; exec sleep 600', { maxRuntimeSeconds: 60, title: 'sleeps past its limit' }));

t.test('error: conflict: cancel while RUNNING is 409 and the job runs on', async (t) => {
  const id = timeoutJob.created.job.id;
  await customer.waitForStatus(id, ['RUNNING'], 45_000);
  const cancel = await customer.request<{ error: { code: string } }>('POST', `/v1/jobs/${id}/cancel`, { reason: 'changed my mind' });
  t.equal(cancel.status, 409);
  t.equal(cancel.body.error?.code, 'conflict');
  t.equal((await customer.getJob(id)).status, 'RUNNING');
});

t.test('behavior: a non-canary job pinned by digest whose hashes match and whose record verifies reaches the level its simulated machine allows', async (t) => {
  const { created } = await customer.createFundedJob(busyboxSpec(market.images, 'echo hello; echo oops >&2; echo data > /output/data.txt'));
  const { lines, jobStatus } = await customer.tailLogs(created.job.id);
  t.equal(jobStatus, 'COMPLETED');
  t.same(linesOf(lines, 'stdout').map((l) => l.line), ['hello']);
  t.same(outputOf(lines, 'stderr').map((l) => l.line), ['oops']);
  const job = await customer.getJob(created.job.id);
  // EXECUTION_VERIFIED needs GPUs the service verified (control-plane/test/verification-levels.test.ts);
  // the simulated machine is the one gap left, so the real agent's signed record checked out.
  t.equal(job.verificationLevel, 'HOST_REPORTED');
  t.ok(linesOf(lines, 'system').some((l) => l.line.startsWith('verified: HOST_REPORTED (as the machine reports it: the machine is simulated')), 'every check but the machine\'s GPUs held');
  t.equal(job.result?.hashesMatch, true);
  t.equal(job.assignment?.exitCode, 0);
  const download = await customer.download(job.result!.outputArtifactId!);
  t.equal(download.sha256, download.sha256Header);
  t.equal(download.sha256, job.result!.serverHash);
  t.match(job.receipt?.status, /^(completed|released)$/, 'charged: the completion is on chain');

  // Its start, phase by phase, on the control plane's clock as it received the real agent's reports (issue 34).
  const startup = job.startup!;
  t.same([startup.attempt, startup.assignmentId], [1, lines.find((l) => l.assignmentId !== created.job.id)?.assignmentId], 'the run that made the result');
  const cached = machineNotesOf(lines).some((l) => / present locally$/.test(l));
  t.equal(startup.phases.pull.status, cached ? 'skipped' : 'done', cached ? 'the machine had the image: no pull' : 'the image was pulled');
  for (const phase of ['queued', 'dispatch', 'container', 'firstLog', 'run', 'upload'] as const) t.equal(startup.phases[phase].status, 'done', `${phase} done`);
  const chain = (['queued', 'dispatch', 'pull', 'container', 'run', 'upload'] as const).map((p) => startup.phases[p]).filter((p) => p.status === 'done');
  t.same(chain.slice(1).map((p) => p.startedAt), chain.slice(0, -1).map((p) => p.endedAt), 'in order: each phase begins where the one before ended');
  const toRunning = (['queued', 'dispatch', 'pull', 'container'] as const).reduce((sum, p) => sum + (startup.phases[p].durationMs ?? 0), 0);
  t.equal(Date.parse(startup.phases.queued.startedAt!) + toRunning, Date.parse(job.assignment!.startedAt!), 'queued through container add up to the job\'s start');
  t.equal(startup.phases.firstLog.startedAt, job.assignment!.startedAt, 'the first line is timed from running');
  t.ok(Date.parse(startup.phases.firstLog.endedAt!) <= Date.parse(startup.phases.run.endedAt!), 'and came before the end was reported');
});

t.test('behavior: an input is fetched when the agent needs it: the assignment names a route, the machine token gets a signed URL valid 120 s', async (t) => {
  const bytes = Buffer.from('weights for the job\n'.repeat(1000));
  const uploaded = await fetch(`${market.url}/v1/artifacts?filename=weights.bin`, {
    method: 'POST',
    headers: { authorization: `Bearer ${customer.apiKey}`, 'content-type': 'application/octet-stream' },
    body: bytes,
  });
  t.equal(uploaded.status, 201);
  const input = (await uploaded.json()) as { id: string; sha256: string };
  const { created } = await customer.createFundedJob(
    busyboxSpec(market.images, 'sha256sum /input/weights.bin; touch /input/weights.bin 2>/dev/null || echo read-only', { inputs: [{ artifactId: input.id, mountName: 'weights.bin' }] }),
  );
  const { lines, jobStatus } = await customer.tailLogs(created.job.id);
  t.equal(jobStatus, 'COMPLETED');
  const stdout = linesOf(lines, 'stdout').map((l) => l.line);
  t.same(stdout, [`${input.sha256}  /input/weights.bin`, 'read-only'], 'the container read the uploaded bytes from a read-only mount');
  t.ok(machineNotesOf(lines).some((l) => l.startsWith(`input weights.bin: ${bytes.length} bytes, sha256 ${input.sha256} verified`)), 'the agent checked the hash (its note, on stderr)');
  const [assignment] = (await market.query<{ id: string; spec: { inputs: Array<{ url: string }> } }>('SELECT id, spec FROM assignments WHERE job_id = $1', [created.job.id]));
  t.equal(new URL(assignment!.spec.inputs[0]!.url).pathname, `/agent/v1/assignments/${assignment!.id}/inputs/weights.bin`, 'the assignment carries no signed URL');
  const logged = market.controlPlane.output();
  t.match(logged, new RegExp(`/files/${input.id}\\?expires=\\d+&sig=redacted`), "the signed download is logged without its signature");
  t.notMatch(logged, /sig=(?!redacted)[A-Za-z0-9_-]/, "no signature reaches the control plane's log");
});

t.test('behavior: a job whose image is missing ends FAILED after its retries, with a system line saying why, no charge and the refund authorized', async (t) => {
  const { created } = await customer.createFundedJob(busyboxSpec(market.images, 'true', { image: `${market.images.busybox.repository.replace(/busybox$/, 'no-such-image')}@sha256:${'0'.repeat(64)}`, title: 'missing image' }));
  const { lines, jobStatus } = await customer.tailLogs(created.job.id, { timeoutMs: 150_000 });
  t.equal(jobStatus, 'FAILED');
  const system = linesOf(lines, 'system').map((l) => l.line);
  t.ok(system.some((l) => /pull|image|not found|manifest/i.test(l)), `a system line says why: ${JSON.stringify(system)}`);
  t.equal(system.filter((l) => l.startsWith('matched:')).length, 3, 'matched three times: the first run and two more attempts');
  t.ok(system.some((l) => /^failed: .*pull/.test(l)), 'the last system line of the job says it failed and why');
  const job = await customer.getJob(created.job.id);
  t.equal(job.status, 'FAILED');
  t.ok(job.cost === null || job.cost.totalMicroUsd === 0, `no charge: ${JSON.stringify(job.cost)}`);
  t.equal(job.receipt?.status, 'refund_authorized', 'the refund is authorized');
  t.equal((await escrowJob(market, job.payment.escrowJobKey as `0x${string}`)).statusName, 'RefundAuthorized', 'on chain too');
  // Its start phases describe the last run: the agent reported the pull it began, which never ended.
  t.equal(job.startup?.attempt, 3);
  t.match(job.startup?.phases, { dispatch: { status: 'done' }, pull: { status: 'not_reached', startedAt: /^\d{4}-/, durationMs: null }, container: { status: 'not_reached' }, run: { status: 'not_reached' } });
});

t.test('behavior: a job that writes far more log than is kept completes, billed: the log artifact keeps its first and last part with a system line at the cut, and the provider is paid on release', async (t) => {
  const count = 40_000;
  const pad = 'x'.repeat(180);
  // About 8 MiB of log: eight times what the service stores, sixteen times what the artifact keeps.
  const { created } = await customer.createFundedJob(busyboxSpec(market.images, `seq 0 ${count - 1} | sed 's/^/line-/; s/$/ ${pad}/'; echo done >&2`, { title: 'writes a lot of log' }));
  const { lines, jobStatus } = await customer.tailLogs(created.job.id, { timeoutMs: 240_000 });
  t.equal(jobStatus, 'COMPLETED');
  const system = linesOf(lines, 'system').map((l) => l.line);
  t.ok(system.some((l) => l.startsWith('log limit reached:') && l.includes('keeps the first and the last part')), `the service says it stopped storing lines: ${JSON.stringify(system)}`);
  const job = await customer.getJob(created.job.id);
  t.equal(job.assignment?.exitCode, 0);
  t.ok(job.cost && job.cost.totalMicroUsd > 0, 'billed');
  t.match(job.receipt?.status, /^(completed|released)$/, 'the completion is on chain');

  const log = await customer.download(job.result!.logArtifactId!);
  t.equal(log.sha256, log.sha256Header);
  t.ok(log.bytes.length <= 2 * LOG_KEEP_BYTES + 1024, `the log artifact keeps at most ${LOG_KEEP_BYTES} bytes at each end (${log.bytes.length} bytes)`);
  const entries = log.bytes.toString('utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as { stream: string; line: string });
  const cut = entries.findIndex((e) => e.stream === 'system' && e.line.startsWith('log cut:'));
  t.ok(cut > 0, 'a system line marks the cut');
  const numbers = entries.filter((e) => e.stream === 'stdout').map((e) => Number(/^line-(\d+) /.exec(e.line)?.[1]));
  const head = entries.slice(0, cut).filter((e) => e.stream === 'stdout').length;
  t.same(numbers.slice(0, head), Array.from({ length: head }, (_, i) => i), 'the first part from the first line');
  const tail = numbers.slice(head);
  t.same(tail, Array.from({ length: tail.length }, (_, i) => count - tail.length + i), 'the last part up to the last line');
  // Docker orders the two streams as it reads them, so `done` (stderr) may be dropped or kept.
  const kept = entries.filter((e) => e.stream !== 'system').length;
  const dropped = Number(/^log cut: (\d+) lines/.exec(entries[cut]?.line ?? '')?.[1]);
  t.equal(dropped, count + 1 - kept, `the line says how many lines were dropped: ${entries[cut]?.line}`);
  t.match(entries.at(-1)?.line, /^exited with code 0/, "the agent's last line ends the artifact");
  await expectPaidOnRelease(t, market, customer, job, PAYOUT);
});

t.test('behavior: a job that writes past its output rule completes, billed, with a system line saying the output was over its limit and not stored; the provider is paid on release', async (t) => {
  const maxBytes = 1024 * 1024;
  const { created } = await customer.createFundedJob(
    busyboxSpec(market.images, 'echo writing; dd if=/dev/zero of=/output/big.bin bs=65536 count=48; echo wrote', { title: 'writes past its output rule', outputRules: [{ path: '/output', maxBytes }] }),
  );
  const { lines, jobStatus } = await customer.tailLogs(created.job.id);
  t.equal(jobStatus, 'COMPLETED');
  const system = linesOf(lines, 'system').map((l) => l.line);
  t.ok(system.some((l) => l === `output /output passed its ${maxBytes}-byte limit (outputRules): not stored; the job is billed for the time it ran`), `a system line says why there is no output: ${JSON.stringify(system)}`);
  const job = await customer.getJob(created.job.id);
  t.equal(job.result?.outputArtifactId, null, 'no output artifact');
  t.ok(job.result?.logArtifactId, 'the log artifact is stored');
  t.ok(job.cost && job.cost.totalMicroUsd > 0, 'billed for the time it ran');
  t.match(job.receipt?.status, /^(completed|released)$/, 'the completion is on chain');
  await expectPaidOnRelease(t, market, customer, job, PAYOUT);
});

t.test('behavior: a job past maxRuntimeSeconds is stopped, TIMED_OUT and billed for its runtime', async (t) => {
  const id = timeoutJob.created.job.id;
  const { lines, jobStatus } = await customer.tailLogs(id, { timeoutMs: 150_000 });
  t.equal(jobStatus, 'TIMED_OUT');
  t.ok(linesOf(lines, 'stdout').some((l) => l.line === 'started'));
  const job = await customer.getJob(id);
  t.equal(job.status, 'TIMED_OUT');
  t.ok(job.cost, 'a cost');
  t.ok(job.cost!.billableGpuSeconds >= 60, `billed for its runtime (${job.cost!.billableGpuSeconds} s)`);
  t.ok(job.cost!.totalMicroUsd > 0);
  t.ok(BigInt(job.cost!.finalPayment) > 0n, 'a payment is due');
  t.match(job.receipt?.status, /^(completed|released)$/, 'the completion is on chain: the provider will be paid');
  t.ok(job.result?.outputArtifactId, 'what it wrote before the stop is stored');
});
