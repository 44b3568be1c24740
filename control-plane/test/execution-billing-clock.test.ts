import { jobCreatedSchema, jobSchema, type AssignmentStatusMessage } from '@gpufarm/shared';
import t, { type Test } from 'tap';
import { newId } from '../src/ids.js';
import { AgentSocket, assignmentSpec, enrollMachine, hello, startGatewayApp, statusMessage, testInventory, uploadOutput } from './helpers/agent-client.js';
import { bearer, createTestKey } from './helpers/app.js';

/**
 * A run is billed on the server's clock: when the control plane received its start and its end,
 * or the machine's own duration when that is shorter, never above maxRuntimeSeconds. Through the
 * real gateway: a scripted agent on a real WebSocket reports the times of its own clock, and the
 * server's clock (the execution slice's `now`) is set by the test, so the window the server
 * measures can be longer than the test takes. Settlement with the escrow on anvil and the wall
 * clock: test/e2e-billing-clock.test.ts.
 */

const PRICE = 450_000;
const T0 = Date.parse('2026-11-22T10:00:00.000Z');
const at = (seconds: number) => new Date(T0 + seconds * 1000).toISOString();
const DAY = 86_400;

async function setup(t: Test) {
  let clock: Date | null = null;
  const s = await startGatewayApp(t, { now: () => clock ?? new Date() });
  const serverAt = (seconds: number) => {
    clock = new Date(T0 + seconds * 1000);
  };
  const { machineId, machineToken } = await enrollMachine(s.app, s.db);
  const key = await createTestKey(s.db);
  let agent = await AgentSocket.connect(s.url, machineToken);
  t.teardown(() => agent.close());
  agent.send(hello());
  await agent.next('welcome');

  /** A customer's job through `POST /v1/jobs`, put on the machine's GPU 0 as the matcher does. */
  const placeJob = async (maxRuntimeSeconds: number) => {
    const res = await s.app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key.key), payload: { image: 'ghcr.io/acme/job:1', gpu: { count: 1 }, maxRuntimeSeconds, maxPricePerGpuHour: '1' } });
    if (res.statusCode !== 201) throw new Error(`job creation answered ${res.statusCode}: ${res.body}`);
    const jobId = jobCreatedSchema.parse(res.json()).job.id;
    const assignmentId = newId('asg');
    await s.db.query(
      `INSERT INTO assignments (id, job_id, machine_id, attempt, gpu_indices, class_id, gpu_model, price_per_gpu_hour_micro_usd, spec)
       VALUES ($1, $2, $3, 1, '{0}', 'rtx-4090-24gb', 'NVIDIA GeForce RTX 4090', $4, $5::jsonb)`,
      [assignmentId, jobId, machineId, PRICE, JSON.stringify({ ...assignmentSpec(assignmentId, jobId), maxRuntimeSeconds })],
    );
    await s.db.query('UPDATE machine_gpus SET busy = true, assignment_id = $2 WHERE machine_id = $1 AND gpu_index = 0', [machineId, assignmentId]);
    await s.db.query(`UPDATE jobs SET status = 'MATCHING', assignment_id = $2, attempts = 1 WHERE id = $1`, [jobId, assignmentId]);
    return { jobId, assignmentId };
  };
  const status = (assignmentId: string, state: AssignmentStatusMessage['state'], times: { startedAt: string | null; finishedAt?: string | null }, extra: Partial<AssignmentStatusMessage> = {}) =>
    statusMessage(assignmentId, state, { startedAt: times.startedAt, finishedAt: times.finishedAt ?? null, ...extra });
  /** Sends `message` once the server's clock reads `seconds` past T0, and waits until the gateway handled it. */
  const report = async (seconds: number, message: AssignmentStatusMessage) => {
    serverAt(seconds);
    agent.send(message);
    await agent.barrier();
  };
  /** Uploads the run's output, then reports it finished at `seconds` with the machine's own times. */
  const finish = async (assignmentId: string, seconds: number, times: { startedAt: string | null; finishedAt: string | null }) => {
    const output = await uploadOutput({ url: s.url, machineToken, assignmentId, files: { 'a.txt': 'done\n' } });
    await report(seconds, status(assignmentId, 'finished', times, { exitCode: 0, oomKilled: false, timedOut: false, outputs: [output] }));
  };
  /** The agent restarts: the link closes and a new one says hello with the assignment it holds. */
  const reconnect = async (running: { assignmentId: string; jobId: string }) => {
    agent.close();
    await agent.closed;
    agent = await AgentSocket.connect(s.url, machineToken);
    agent.send(hello(testInventory(), [{ ...running, state: 'exited', nextLogSeq: 0 }]));
    await agent.next('welcome');
  };
  const job = async (jobId: string) => jobSchema.parse((await s.app.inject({ url: `/v1/jobs/${jobId}`, headers: bearer(key.key) })).json());
  const completedLine = async (jobId: string) =>
    (await s.db.query<{ line: string }>(`SELECT line FROM log_lines WHERE job_id = $1 AND stream = 'system' AND line LIKE 'completed:%'`, [jobId]))[0]?.line;
  return { ...s, status, report, finish, reconnect, placeJob, job, completedLine };
}

/** A run the server sees start at `serverStart` and end at `serverEnd` (seconds past T0), with the machine reporting `reported`. */
async function run(s: Awaited<ReturnType<typeof setup>>, params: { serverStart: number; serverEnd: number; reported: { startedAt: string | null; finishedAt: string | null }; maxRuntimeSeconds?: number }) {
  const { jobId, assignmentId } = await s.placeJob(params.maxRuntimeSeconds ?? 3600);
  await s.report(params.serverStart, s.status(assignmentId, 'running', { startedAt: params.reported.startedAt }));
  await s.report(params.serverEnd, s.status(assignmentId, 'exited', params.reported, { exitCode: 0, oomKilled: false, timedOut: false }));
  await s.finish(assignmentId, params.serverEnd + 30, params.reported);
  return { jobId, assignmentId, job: await s.job(jobId) };
}

t.test('behavior: a machine reporting a start a day ago, or a finish a day ahead, is billed the time the server saw, and the customer sees the server\'s times', async (t) => {
  const s = await setup(t);
  const past = await run(s, { serverStart: 0, serverEnd: 120, reported: { startedAt: at(120 - DAY), finishedAt: at(120) } });
  t.equal(past.job.status, 'COMPLETED');
  t.equal(past.job.cost?.billableGpuSeconds, 120, 'a start a day ago: billed the 120 s the server saw, not the day (or the 3600 s maximum)');
  t.same([past.job.assignment?.startedAt, past.job.assignment?.finishedAt], [at(0), at(120)], 'startedAt and finishedAt are when the server received them');
  t.match(await s.completedLine(past.jobId), /runtime 120 s: the shorter of 120 s from the start to the end as the service received them and 86400 s as the machine reports them$/);

  const ahead = await run(s, { serverStart: 1000, serverEnd: 1120, reported: { startedAt: at(1000), finishedAt: at(1120 + DAY) } });
  t.equal(ahead.job.cost?.billableGpuSeconds, 120, 'a finish a day ahead: billed the 120 s the server saw');
  t.same([ahead.job.assignment?.startedAt, ahead.job.assignment?.finishedAt], [at(1000), at(1120)]);

  const [kept] = await s.db.query<{ reported_started_at: Date; reported_finished_at: Date }>('SELECT reported_started_at, reported_finished_at FROM assignments WHERE id = $1', [ahead.assignmentId]);
  t.same([kept?.reported_started_at.toISOString(), kept?.reported_finished_at.toISOString()], [at(1000), at(1120 + DAY)], 'the machine\'s own times are kept');
});

t.test('behavior: the machine\'s own duration is billed when shorter; never above maxRuntimeSeconds', async (t) => {
  const s = await setup(t);
  // The server's window holds the network's delays: the machine's clock says 90 s of the 120.
  const shorter = await run(s, { serverStart: 0, serverEnd: 120, reported: { startedAt: at(5000), finishedAt: at(5090) } });
  t.equal(shorter.job.cost?.billableGpuSeconds, 90);
  // Clocks that say nothing: the server's window alone.
  const silent = await run(s, { serverStart: 1000, serverEnd: 1120, reported: { startedAt: null, finishedAt: null } });
  t.equal(silent.job.cost?.billableGpuSeconds, 120);
  const long = await run(s, { serverStart: 2000, serverEnd: 3000, reported: { startedAt: at(2000), finishedAt: at(2900) }, maxRuntimeSeconds: 600 });
  t.equal(long.job.cost?.billableGpuSeconds, 600, 'both clocks past the limit: billed maxRuntimeSeconds');
  t.match(await s.completedLine(long.jobId), /runtime 600 s: the shorter of 1000 s .* and 900 s as the machine reports them, capped at maxRuntimeSeconds$/);
});

t.test('behavior: a finish reported after the agent reconnects bills no more than the machine reports, not the time the link was down', async (t) => {
  const s = await setup(t);
  const { jobId, assignmentId } = await s.placeJob(3600);
  await s.report(0, s.status(assignmentId, 'running', { startedAt: at(0) }));
  // The container exits at 100 s on the machine, with the link down; the agent comes back at 400 s.
  await s.reconnect({ assignmentId, jobId });
  const times = { startedAt: at(0), finishedAt: at(100) };
  await s.report(400, s.status(assignmentId, 'exited', times, { exitCode: 0, oomKilled: false, timedOut: false }));
  await s.finish(assignmentId, 410, times);
  const job = await s.job(jobId);
  t.equal(job.status, 'COMPLETED');
  t.equal(job.cost?.billableGpuSeconds, 100, 'the machine\'s 100 s, not the 400 s until the server heard of the end');
  t.same([job.assignment?.startedAt, job.assignment?.finishedAt], [at(0), at(400)], 'the times the server received');
});
