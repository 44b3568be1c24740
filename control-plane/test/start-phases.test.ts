import { randomBytes } from 'node:crypto';
import { jobSchema, START_PHASES, type Job, type JobStartup } from '@gpufarm/shared';
import t, { type Test } from 'tap';
import type { ExecutionDeps } from '../src/execution/deps.js';
import { assignmentAccepted, assignmentStatus } from '../src/execution/lifecycle.js';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { matchQueuedJobs } from '../src/matching/matcher.js';
import { createControlPlaneMetrics, type ControlPlaneMetrics } from '../src/metrics/registry.js';
import { machineStartTimes } from '../src/phases/figures.js';
import { startupOf, type PhaseRun } from '../src/phases/phases.js';
import { recordPhases } from '../src/phases/record.js';
import { statusMessage } from './helpers/agent-client.js';
import { bearer, buildTestApp, createTestKey } from './helpers/app.js';

/**
 * The start phases (issue 34, item 4): the pure reading of a run's times, then a job through the
 * real matcher and the execution lifecycle on PostgreSQL, read back on `GET /v1/jobs/:id`, in the
 * machine's figures and in the Prometheus histogram.
 */

const at = (ms: number) => new Date(Date.UTC(2026, 10, 29, 6, 0, 0) + ms);
const run = (times: Partial<PhaseRun['times']>, ended = false): PhaseRun => ({
  assignmentId: 'asg_1',
  attempt: 1,
  ended,
  times: { queuedAt: at(0), matchedAt: at(1000), pullStartedAt: null, imageReadyAt: null, runningAt: null, firstLogAt: null, exitedAt: null, finishedAt: null, ...times },
});
const statuses = (s: JobStartup) => START_PHASES.map((p) => `${p}:${s.phases[p].status}`).join(' ');
const durations = (s: JobStartup) => START_PHASES.map((p) => s.phases[p].durationMs);

t.test('startupOf: each state of each phase', async (t) => {
  const pulled = startupOf(run({ pullStartedAt: at(1200), imageReadyAt: at(5200), runningAt: at(5500), firstLogAt: at(5600), exitedAt: at(9500), finishedAt: at(9900) }));
  t.equal(statuses(pulled), 'queued:done dispatch:done pull:done container:done firstLog:done run:done upload:done');
  t.same(durations(pulled), [1000, 200, 4000, 300, 100, 4000, 400]);
  t.same(pulled.phases.pull, { status: 'done', startedAt: at(1200).toISOString(), endedAt: at(5200).toISOString(), durationMs: 4000 });

  const cached = startupOf(run({ imageReadyAt: at(1300), runningAt: at(1500) }));
  t.equal(statuses(cached), 'queued:done dispatch:done pull:skipped container:done firstLog:in_progress run:in_progress upload:pending', 'no pulling: the image was on the machine');
  t.equal(cached.phases.dispatch.durationMs, 300, 'dispatch runs to the container phase');
  t.equal(cached.phases.pull.startedAt, null);

  t.equal(statuses(startupOf(run({}))), 'queued:done dispatch:in_progress pull:pending container:pending firstLog:pending run:pending upload:pending', 'offered, nothing heard');
  t.equal(statuses(startupOf(run({ pullStartedAt: at(1100) }, true))), 'queued:done dispatch:done pull:not_reached container:not_reached firstLog:not_reached run:not_reached upload:not_reached', 'the pull failed');
  t.equal(
    statuses(startupOf(run({ pullStartedAt: at(1100), runningAt: at(3000) }))),
    'queued:done dispatch:done pull:done container:skipped firstLog:in_progress run:in_progress upload:pending',
    'an agent without `starting`: its pull runs to the start',
  );
  t.equal(
    statuses(startupOf(run({ imageReadyAt: at(1100), runningAt: at(1200), exitedAt: at(2000), finishedAt: at(2100) }))),
    'queued:done dispatch:done pull:skipped container:done firstLog:skipped run:done upload:done',
    'a job that wrote no line',
  );

  // The database's clock wrote the offer 5 ms after the server received the pull: boundaries keep their order.
  const skewed = startupOf(run({ matchedAt: at(1005), pullStartedAt: at(1000), imageReadyAt: at(2000), runningAt: at(2500), firstLogAt: at(2400) }));
  t.same(durations(skewed).slice(0, 5), [1005, 0, 995, 500, 0], 'never negative; a line received before running counts at running');
  t.equal(durations(skewed).slice(0, 4).reduce((a, b) => a! + b!, 0), 2500, 'queued through container add up to running − queued');
});

async function setup(t: Test, metrics: ControlPlaneMetrics) {
  const test = await buildTestApp(t);
  const { db, app, config } = test;
  const farm = await createFarm(db);
  const machine = await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 });
  // An enrolled agent: a machine token and GPU UUIDs, as the matcher requires.
  await db.query(`UPDATE machine_gpus SET uuid = 'GPU-' || md5(machine_id || ':' || gpu_index) WHERE machine_id = $1`, [machine.id]);
  await db.query('UPDATE machines SET token_hash = $2 WHERE id = $1', [machine.id, randomBytes(32).toString('hex')]);
  await test.offerIndex.refresh();
  const { key } = await createTestKey(db);
  let clock = Date.now();
  const deps: ExecutionDeps = { db, escrow: null, config: config.execution, blobs: test.blobs, now: () => new Date(clock), metrics };
  const advance = (ms: number) => {
    clock += ms;
    return new Date(clock);
  };
  const create = async () => {
    const res = await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: { image: '127.0.0.1:5000/gpufarm/busybox:1', command: ['true'], gpu: { count: 1 } } });
    const id = res.json().job.id as string;
    // Funded and queued, as the escrow scan leaves it.
    await db.query(`UPDATE jobs SET status = 'QUEUED' WHERE id = $1`, [id]);
    return id;
  };
  const job = async (id: string): Promise<Job> => jobSchema.parse((await app.inject({ url: `/v1/jobs/${id}?include=startup`, headers: bearer(key) })).json());
  const match = async (id: string) => {
    const result = await matchQueuedJobs({ db });
    const matched = result.matched.find((m) => m.jobId === id);
    if (!matched) throw new Error('the job was not matched');
    // The server's clock from the offer on (the database wrote it).
    const [{ offered_at }] = (await db.query<{ offered_at: Date }>('SELECT offered_at FROM assignments WHERE id = $1', [matched.assignmentId])) as [{ offered_at: Date }];
    clock = offered_at.getTime();
    return matched.assignmentId;
  };
  return { ...test, machine, deps, advance, create, job, match };
}

/** A histogram's observation count for one phase (undefined: none observed). */
async function observed(metrics: ControlPlaneMetrics, phase: string): Promise<number | undefined> {
  const metric = (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === 'gf_job_start_phase_seconds');
  return metric?.values.find((v) => (v as { metricName?: string }).metricName === 'gf_job_start_phase_seconds_count' && v.labels.phase === phase)?.value;
}

t.test('behavior: a job queued, matched, started from a cached image, logging, exited and uploaded: its phases in order on GET /v1/jobs/:id, adding up to its start', async (t) => {
  const metrics = createControlPlaneMetrics();
  const s = await setup(t, metrics);
  const id = await s.create();
  const queued = (await s.job(id)).startup!;
  t.equal(statuses(queued), 'queued:in_progress dispatch:pending pull:pending container:pending firstLog:pending run:pending upload:pending', 'waiting in QUEUED');
  t.same([queued.assignmentId, queued.attempt], [null, null]);
  const [{ status_changed_at }] = (await s.db.query<{ status_changed_at: Date }>('SELECT status_changed_at FROM jobs WHERE id = $1', [id])) as [{ status_changed_at: Date }];
  t.equal(queued.phases.queued.startedAt, status_changed_at.toISOString(), 'since the job entered QUEUED');

  const asg = await s.match(id);
  const matched = (await s.job(id)).startup!;
  t.equal(statuses(matched), 'queued:done dispatch:in_progress pull:pending container:pending firstLog:pending run:pending upload:pending');
  t.same([matched.assignmentId, matched.attempt], [asg, 1]);
  t.equal(matched.phases.queued.startedAt, queued.phases.queued.startedAt, 'the queue entry the matcher found, kept past the move to MATCHING');

  await assignmentAccepted(s.deps, s.machine.id, asg);
  s.advance(300);
  await assignmentStatus(s.deps, s.machine.id, statusMessage(asg, 'starting'));
  s.advance(700);
  await assignmentStatus(s.deps, s.machine.id, statusMessage(asg, 'running', { startedAt: new Date().toISOString() }));
  // The gateway passes the job's first own line on (agent-gateway/link.ts).
  await recordPhases({ db: s.db, metrics }, asg, ['firstLogAt'], s.advance(150));
  s.advance(2000);
  const exit = { startedAt: new Date().toISOString(), finishedAt: new Date().toISOString(), exitCode: 0, oomKilled: false, timedOut: false };
  await assignmentStatus(s.deps, s.machine.id, statusMessage(asg, 'exited', exit));
  s.advance(100);
  await assignmentStatus(s.deps, s.machine.id, statusMessage(asg, 'uploading', exit));
  s.advance(400);
  await assignmentStatus(s.deps, s.machine.id, statusMessage(asg, 'finished', { ...exit, outputs: [], log: null }));

  const job = await s.job(id);
  const startup = job.startup!;
  t.equal(statuses(startup), 'queued:done dispatch:done pull:skipped container:done firstLog:done run:done upload:done');
  t.same(durations(startup).slice(1), [300, null, 700, 150, 2150, 500], 'each phase as the server received its reports');
  const order = START_PHASES.filter((p) => p !== 'firstLog' && startup.phases[p].status === 'done').map((p) => startup.phases[p]);
  order.forEach((phase, i) => i > 0 && t.equal(phase.startedAt, order[i - 1]!.endedAt, 'each phase starts where the one before ended'));
  const toRunning = ['queued', 'dispatch', 'pull', 'container'].reduce((sum, p) => sum + (startup.phases[p as 'queued'].durationMs ?? 0), 0);
  t.equal(Date.parse(startup.phases.queued.startedAt!) + toRunning, Date.parse(job.assignment!.startedAt!), 'queued through container add up to the start the job reports');

  t.equal(await observed(metrics, 'dispatch'), 1);
  t.equal(await observed(metrics, 'pull'), undefined, 'a skipped pull is not observed');
  for (const phase of ['container', 'firstLog', 'run', 'upload']) t.equal(await observed(metrics, phase), 1, `${phase} observed once`);
  await assignmentStatus(s.deps, s.machine.id, statusMessage(asg, 'finished', { ...exit, outputs: [], log: null }));
  t.equal(await observed(metrics, 'upload'), 1, 'a repeated report observes nothing again');

  const figures = await machineStartTimes(s.db, s.machine.id);
  t.same(figures.toRunningMs, { runs: 1, p50: 1000, p95: 1000 }, 'the machine: from the offer to running');
  t.same(figures.toFirstLogMs, { runs: 1, p50: 1150, p95: 1150 }, 'and to the first line');
});

t.test('behavior: a pull that fails leaves the rest not reached; the job queued again shows its new wait, then its second run', async (t) => {
  const metrics = createControlPlaneMetrics();
  const s = await setup(t, metrics);
  const id = await s.create();
  const first = await s.match(id);
  await assignmentStatus(s.deps, s.machine.id, statusMessage(first, 'pulling'));
  s.advance(2500);
  const [{ status: before }] = (await s.db.query<{ status: string }>('SELECT status FROM jobs WHERE id = $1', [id])) as [{ status: string }];
  t.equal(before, 'MATCHING');
  const running = (await s.job(id)).startup!;
  t.equal(statuses(running), 'queued:done dispatch:done pull:in_progress container:pending firstLog:pending run:pending upload:pending', 'pulling');
  t.equal(await observed(metrics, 'dispatch'), 1);

  await assignmentStatus(s.deps, s.machine.id, statusMessage(first, 'failed', { failure: { code: 'pull_failed', message: 'the registry refused' } }));
  const requeued = await s.job(id);
  t.equal(requeued.status, 'QUEUED', 'retried');
  t.equal(statuses(requeued.startup!), 'queued:in_progress dispatch:pending pull:pending container:pending firstLog:pending run:pending upload:pending', 'the new wait');
  t.equal(await observed(metrics, 'pull'), undefined, 'an unfinished pull is not observed');

  // The machine that failed it is excluded: another one takes the second run.
  const farm = await createFarm(s.db);
  const other = await createMachine(s.db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 });
  await s.db.query(`UPDATE machine_gpus SET uuid = 'GPU-' || md5(machine_id || ':' || gpu_index) WHERE machine_id = $1`, [other.id]);
  await s.db.query('UPDATE machines SET token_hash = $2 WHERE id = $1', [other.id, randomBytes(32).toString('hex')]);
  const second = await s.match(id);
  const again = (await s.job(id)).startup!;
  t.same([again.assignmentId, again.attempt], [second, 2], 'the last run is described');
  t.equal(statuses(again), 'queued:done dispatch:in_progress pull:pending container:pending firstLog:pending run:pending upload:pending');

  // The failed run on the first machine is in no figure: it never ran.
  t.same((await machineStartTimes(s.db, s.machine.id)).toRunningMs, { runs: 0, p50: null, p95: null });
});
