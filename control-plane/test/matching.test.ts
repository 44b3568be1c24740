import { randomBytes } from 'node:crypto';
import { assignmentSpecSchema } from '@gpufarm/shared';
import t from 'tap';
import type { Database } from '../src/db/database.js';
import { openPostgres } from '../src/db/postgres.js';
import { createFarm, createMachine, type MachineInput } from '../src/testing/factories.js';
import { createJobOwner, createQueuedJobs, type QueuedJobInput } from '../src/testing/job-factories.js';
import { JOBS_QUEUED_CHANNEL, startMatcher } from '../src/matching/loop.js';
import { matchQueuedJobs, type MatcherDeps } from '../src/matching/matcher.js';
import { createQueueFigures } from '../src/matching/queue-figures.js';
import { createPgliteTestDatabase, createPostgresTestDatabase } from './helpers/database.js';
import { captureLog, LEVEL } from './helpers/logger.js';
import { silentLogger } from '../src/logger.js';

const GiB = 1024 ** 3;
const quiet: MatcherDeps['log'] = silentLogger;

type Owner = { accountId: string; apiKeyId: string };

/** A machine with an enrolled agent: a machine token and GPU UUIDs, as enrollment leaves it. */
async function agentMachine(db: Database, input: Omit<MachineInput, 'farmId'> & { farmId: string; agent?: boolean }) {
  const machine = await createMachine(db, input);
  await db.query(`UPDATE machine_gpus SET uuid = 'GPU-' || md5(machine_id || ':' || gpu_index) WHERE machine_id = $1`, [machine.id]);
  if (input.agent !== false) await db.query('UPDATE machines SET token_hash = $2 WHERE id = $1', [machine.id, randomBytes(32).toString('hex')]);
  return machine;
}

async function jobs(db: Database, owner: Owner, inputs: QueuedJobInput[]) {
  return createQueuedJobs(db, owner, inputs);
}

async function statusOf(db: Database, jobId: string) {
  const [row] = await db.query<{ status: string; assignment_id: string | null; attempts: number }>('SELECT status, assignment_id, attempts FROM jobs WHERE id = $1', [jobId]);
  return row!;
}

async function assignmentOf(db: Database, jobId: string) {
  const [row] = await db.query<{ id: string; machine_id: string; attempt: number; state: string; gpu_indices: number[]; class_id: string; gpu_model: string; price_per_gpu_hour_micro_usd: number; spec: unknown }>(
    `SELECT id, machine_id, attempt, state, gpu_indices, class_id, gpu_model, price_per_gpu_hour_micro_usd, spec FROM assignments WHERE job_id = $1 AND state = 'offered'`,
    [jobId],
  );
  return row ?? null;
}

/** Takes every earlier machine and job out of play, so each case sees only its own. */
async function reset(db: Database) {
  await db.query(`UPDATE jobs SET status = 'CANCELED' WHERE status IN ('QUEUED', 'MATCHING')`);
  await db.query(`UPDATE machines SET status = 'offline'`);
}

t.test('default: a job is matched, its GPUs reserved by index, the assignment offered, the agent told and the log written', async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  const owner = await createJobOwner(db);
  const farm = await createFarm(db, { slug: 'alpha-gpu', name: 'Alpha GPU' });
  const machine = await agentMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'a100-80gb', gpuCount: 4, busyGpus: 1, pricePerGpuHourMicroUsd: 1_500_000 });
  const notices: string[] = [];
  await db.listen('agent_dispatch', (payload) => notices.push(payload));
  const [jobId] = await jobs(db, owner, [
    { gpuCount: 2, spec: { image: 'busybox', command: ['sh', '-c', 'echo hi'], env: { MODE: 'fast' }, cpuCores: 4, gpu: { count: 2, minimumVramGb: 40 } } },
  ]);

  const result = await matchQueuedJobs({ db, log: quiet });
  t.equal(result.matched.length, 1);
  const job = await statusOf(db, jobId!);
  t.equal(job.status, 'MATCHING');
  t.equal(job.attempts, 1);
  const a = await assignmentOf(db, jobId!);
  t.ok(a);
  t.equal(job.assignment_id, a!.id);
  t.match(a!.id, /^asg_/);
  t.equal(a!.machine_id, machine.id);
  t.equal(a!.attempt, 1);
  t.equal(a!.state, 'offered');
  t.same(a!.gpu_indices, [1, 2], 'the first free GPUs by index (GPU 0 is busy)');
  t.equal(a!.class_id, 'a100-80gb');
  t.equal(a!.gpu_model, 'NVIDIA A100-SXM4-80GB');
  t.equal(Number(a!.price_per_gpu_hour_micro_usd), 1_500_000);

  const gpus = await db.query<{ gpu_index: number; uuid: string; busy: boolean; assignment_id: string | null }>(
    'SELECT gpu_index, uuid, busy, assignment_id FROM machine_gpus WHERE machine_id = $1 ORDER BY gpu_index',
    [machine.id],
  );
  t.same(gpus.map((g) => [g.busy, g.assignment_id]), [[true, null], [true, a!.id], [true, a!.id], [false, null]]);

  const spec = assignmentSpecSchema.parse(a!.spec);
  t.same(spec, {
    assignmentId: a!.id,
    jobId,
    image: 'busybox',
    imageDigest: null,
    command: ['sh', '-c', 'echo hi'],
    env: { MODE: 'fast' },
    gpus: [{ index: 1, uuid: gpus[1]!.uuid }, { index: 2, uuid: gpus[2]!.uuid }],
    cpuCores: 4,
    ramBytes: null,
    maxRuntimeSeconds: 3600,
    networkPolicy: { mode: 'none' },
    inputs: [],
    outputRules: [{ path: '/output', maxBytes: GiB }],
  });

  const lines = await db.query<{ stream: string; line: string; assignment_id: string }>('SELECT stream, line, assignment_id FROM log_lines WHERE job_id = $1', [jobId!]);
  t.same(lines, [{ stream: 'system', line: 'matched: 2x A100 80GB on farm Alpha GPU (us-east) at $1.50/GPU-hour, attempt 1', assignment_id: jobId }]);
  t.notOk(lines[0]!.line.includes(machine.id), 'no machine id in the line');

  // NOTIFY arrives at commit, through the listener's own connection.
  for (let i = 0; i < 50 && notices.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
  t.same(notices.map((n) => JSON.parse(n)), [{ machineId: machine.id, assignmentId: a!.id, kind: 'assign' }]);

  t.equal((await matchQueuedJobs({ db, log: quiet })).matched.length, 0, 'a second pass finds nothing to do');
});

t.test('behavior: each fit rule keeps a job QUEUED, and the job is matched once the rule is met', async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  const owner = await createJobOwner(db);

  interface Case {
    name: string;
    machine: Partial<MachineInput> & { agent?: boolean };
    job: QueuedJobInput;
    farmStatus?: 'suspended';
    /** Applied after the first pass: makes the machine and the job fit. */
    fix: (ids: { machineId: string; jobId: string; farmId: string }) => Promise<void>;
    /** Before the first pass (exclusions). */
    before?: (ids: { machineId: string; jobId: string }) => Promise<void>;
  }
  const cases: Case[] = [
    {
      name: 'count: all GPUs on one machine',
      machine: { gpuCount: 2 },
      job: { gpuCount: 3 },
      fix: async ({ machineId }) => {
        await db.query(`INSERT INTO machine_gpus (machine_id, gpu_index, uuid, class_id, vram_bytes) VALUES ($1, 2, 'GPU-extra', 'a100-80gb', $2)`, [machineId, 80 * GiB]);
      },
    },
    {
      name: 'VRAM per GPU',
      machine: { classId: 'rtx-4090-24gb' },
      job: { spec: { image: 'busybox', gpu: { count: 1, minimumVramBytes: 40 * GiB } } },
      fix: async ({ jobId }) => {
        await db.query(`UPDATE jobs SET spec = jsonb_set(spec, '{gpu,minimumVramBytes}', to_jsonb($2::bigint)) WHERE id = $1`, [jobId, 24 * GiB]);
      },
    },
    {
      name: 'model allowlist',
      machine: { classId: 'rtx-4090-24gb' },
      job: { spec: { image: 'busybox', gpu: { count: 1, modelAllowlist: ['a100-80gb', 'h100-80gb-sxm'] } } },
      fix: async ({ jobId }) => {
        await db.query(`UPDATE jobs SET spec = jsonb_set(spec, '{gpu,modelAllowlist}', '["a100-80gb", "rtx-4090-24gb"]') WHERE id = $1`, [jobId]);
      },
    },
    {
      name: 'price at or under the cap',
      machine: { pricePerGpuHourMicroUsd: 1_000_001 },
      job: { capMicroUsd: 1_000_000 },
      fix: async ({ machineId }) => {
        await db.query('UPDATE machines SET price_per_gpu_hour_micro_usd = 1000000 WHERE id = $1', [machineId]);
      },
    },
    {
      name: 'free GPUs',
      machine: { gpuCount: 2, busyGpus: 1 },
      job: { gpuCount: 2 },
      fix: async ({ machineId }) => {
        await db.query('UPDATE machine_gpus SET busy = false WHERE machine_id = $1', [machineId]);
      },
    },
    {
      name: 'a GPU held by an assignment',
      machine: { gpuCount: 1 },
      job: { gpuCount: 1 },
      before: async ({ machineId }) => {
        await db.query(`UPDATE machine_gpus SET assignment_id = 'asg_other' WHERE machine_id = $1`, [machineId]);
      },
      fix: async ({ machineId }) => {
        await db.query('UPDATE machine_gpus SET assignment_id = NULL WHERE machine_id = $1', [machineId]);
      },
    },
    {
      name: 'draining',
      machine: {},
      job: {},
      before: async ({ machineId }) => {
        await db.query('UPDATE machines SET draining = true WHERE id = $1', [machineId]);
      },
      fix: async ({ machineId }) => {
        await db.query('UPDATE machines SET draining = false WHERE id = $1', [machineId]);
      },
    },
    {
      name: 'offline',
      machine: { status: 'offline' },
      job: {},
      fix: async ({ machineId }) => {
        await db.query(`UPDATE machines SET status = 'online' WHERE id = $1`, [machineId]);
      },
    },
    {
      name: 'unpriced',
      machine: { pricePerGpuHourMicroUsd: null },
      job: {},
      fix: async ({ machineId }) => {
        await db.query('UPDATE machines SET price_per_gpu_hour_micro_usd = 500000 WHERE id = $1', [machineId]);
      },
    },
    {
      name: 'farm suspended',
      machine: {},
      farmStatus: 'suspended',
      job: {},
      fix: async ({ farmId }) => {
        await db.query(`UPDATE farms SET status = 'active' WHERE id = $1`, [farmId]);
      },
    },
    {
      name: 'no agent (a seeded machine)',
      machine: { agent: false },
      job: {},
      fix: async ({ machineId }) => {
        await db.query(`UPDATE machines SET token_hash = 'h-' || id WHERE id = $1`, [machineId]);
      },
    },
    {
      name: 'excluded for the job',
      machine: {},
      job: {},
      before: async ({ machineId, jobId }) => {
        await db.query(`INSERT INTO job_exclusions (job_id, machine_id, reason) VALUES ($1, $2, 'rejected')`, [jobId, machineId]);
      },
      fix: async ({ jobId }) => {
        await db.query('DELETE FROM job_exclusions WHERE job_id = $1', [jobId]);
      },
    },
    {
      name: 'funding hold',
      machine: {},
      job: { fundingHold: 'reorg' },
      fix: async ({ jobId }) => {
        await db.query('UPDATE jobs SET funding_hold = NULL WHERE id = $1', [jobId]);
      },
    },
    {
      name: 'not QUEUED (FUNDED)',
      machine: {},
      job: { status: 'FUNDED' },
      fix: async ({ jobId }) => {
        await db.query(`UPDATE jobs SET status = 'QUEUED' WHERE id = $1`, [jobId]);
      },
    },
    {
      name: 'proven GPUs (gpu.proven)',
      machine: {},
      job: { spec: { image: 'busybox', gpu: { count: 1, proven: true } } },
      fix: async ({ machineId }) => {
        await db.query('UPDATE machines SET proven_at = now() WHERE id = $1', [machineId]);
      },
    },
    {
      name: 'workload type',
      machine: { workloads: ['inference'] },
      job: { workloadType: 'training' },
      fix: async ({ machineId }) => {
        await db.query(`UPDATE machines SET workloads = ARRAY['inference', 'training'] WHERE id = $1`, [machineId]);
      },
    },
  ];

  for (const c of cases) {
    await reset(db);
    const farm = await createFarm(db, { status: c.farmStatus ?? 'active' });
    const machine = await agentMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'a100-80gb', gpuCount: 1, pricePerGpuHourMicroUsd: 500_000, ...c.machine });
    const [jobId] = await jobs(db, owner, [c.job]);
    const ids = { machineId: machine.id, jobId: jobId!, farmId: farm.id };
    await c.before?.(ids);
    await matchQueuedJobs({ db, log: quiet });
    t.equal((await statusOf(db, jobId!)).status, c.job.status ?? 'QUEUED', `${c.name}: not matched`);
    t.equal(await assignmentOf(db, jobId!), null, `${c.name}: no assignment`);
    await c.fix(ids);
    await matchQueuedJobs({ db, log: quiet });
    t.equal((await statusOf(db, jobId!)).status, 'MATCHING', `${c.name}: matched once it fits`);
    t.equal((await assignmentOf(db, jobId!))?.machine_id, machine.id, `${c.name}: on that machine`);
  }
});

t.test('behavior: preference is the region (key, then group), then price, tier, uptime, then the machine id', async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  const owner = await createJobOwner(db);
  const farm = await createFarm(db);
  const base = { farmId: farm.id, classId: 'l4-24gb', gpuCount: 1, benchmarkTier: 'A', uptimePct: 95 } as const;

  const pick = async (machines: Array<Partial<MachineInput> & { name: string }>, job: QueuedJobInput = {}) => {
    await reset(db);
    const made = new Map<string, string>();
    for (const m of machines) made.set((await agentMachine(db, { ...base, regionKey: 'us-east', pricePerGpuHourMicroUsd: 700_000, ...m })).id, m.name);
    const [jobId] = await jobs(db, owner, [job]);
    await matchQueuedJobs({ db, log: quiet });
    const a = await assignmentOf(db, jobId!);
    return a ? made.get(a.machine_id) : null;
  };

  const regions = [
    { name: 'us-east cheap', regionKey: 'us-east', pricePerGpuHourMicroUsd: 300_000 },
    { name: 'europe-central', regionKey: 'europe-central', pricePerGpuHourMicroUsd: 600_000 },
    { name: 'europe-west dear', regionKey: 'europe-west', pricePerGpuHourMicroUsd: 900_000 },
  ];
  t.equal(await pick(regions, { spec: { image: 'busybox', gpu: { count: 1 }, regionPreference: 'europe-west' } }), 'europe-west dear', 'the requested key first');
  t.equal(await pick(regions, { spec: { image: 'busybox', gpu: { count: 1 }, regionPreference: 'europe-north' } }), 'europe-central', 'then its group');
  t.equal(await pick(regions, { spec: { image: 'busybox', gpu: { count: 1 }, regionPreference: 'asia-east' } }), 'us-east cheap', 'then any region, cheapest');
  t.equal(await pick(regions), 'us-east cheap', 'no preference: cheapest');
  t.equal(
    await pick([{ name: 'europe-west over cap', regionKey: 'europe-west', pricePerGpuHourMicroUsd: 2_000_000 }, ...regions.slice(0, 2)], {
      capMicroUsd: 1_000_000,
      spec: { image: 'busybox', gpu: { count: 1 }, regionPreference: 'europe-west' },
    }),
    'europe-central',
    'a preferred region over the cap does not count',
  );
  t.equal(await pick([{ name: 'dear S', benchmarkTier: 'S', pricePerGpuHourMicroUsd: 800_000 }, { name: 'cheap C', benchmarkTier: 'C', pricePerGpuHourMicroUsd: 790_000 }]), 'cheap C', 'price before tier');
  t.equal(await pick([{ name: 'B', benchmarkTier: 'B', uptimePct: 100 }, { name: 'S', benchmarkTier: 'S', uptimePct: 80 }, { name: 'none', benchmarkTier: null, uptimePct: 100 }]), 'S', 'tier before uptime');
  t.equal(await pick([{ name: '90 %', uptimePct: 90 }, { name: '99 %', uptimePct: 99 }, { name: '95 %', uptimePct: 95 }]), '99 %', 'uptime');
  const tied = await pick([{ name: 'one' }, { name: 'two' }, { name: 'three' }]);
  const [lowest] = await db.query<{ id: string }>(`SELECT min(id) AS id FROM machines WHERE status = 'online'`);
  t.equal((await db.query<{ id: string }>('SELECT machine_id AS id FROM assignments ORDER BY offered_at DESC, id DESC LIMIT 1'))[0]!.id, lowest!.id, `tie (${tied}): the lowest machine id`);
  t.equal(await pick([{ name: 'one free of 24GB', gpuCount: 1 }, { name: 'dear 80GB', classId: 'a100-80gb', pricePerGpuHourMicroUsd: 900_000 }], { spec: { image: 'busybox', gpu: { count: 1, minimumVramGb: 48 } } }), 'dear 80GB', 'only fitting machines are ranked');
});

t.test('behavior: a job queue is matched in order, a later job cannot take what an earlier one fits', async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  const owner = await createJobOwner(db);
  const farm = await createFarm(db);
  await agentMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'a100-80gb', gpuCount: 2, pricePerGpuHourMicroUsd: 1_000_000 });
  const ids = await jobs(db, owner, [{ gpuCount: 2 }, { gpuCount: 1 }, { gpuCount: 1 }]);
  const result = await matchQueuedJobs({ db, log: quiet, now: () => new Date() }, { batchSize: 2 });
  t.equal(result.batches, 2);
  t.same(result.matched.map((m) => m.jobId), [ids[0]]);
  t.same(await Promise.all(ids.map(async (id) => (await statusOf(db, id)).status)), ['MATCHING', 'QUEUED', 'QUEUED']);
});

t.test('behavior: a requeued job gets attempt 2 on another machine; its excluded machine is skipped', async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  const owner = await createJobOwner(db);
  const farm = await createFarm(db);
  const cheap = await agentMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'l4-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 300_000 });
  const dear = await agentMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'l4-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 });
  const [jobId] = await jobs(db, owner, [{}]);
  await matchQueuedJobs({ db, log: quiet });
  const first = (await assignmentOf(db, jobId!))!;
  t.equal(first.machine_id, cheap.id);
  // What the lifecycle does on a rejection: the assignment ends, the GPU is freed, the machine excluded, the job requeued.
  await db.query(`UPDATE assignments SET state = 'rejected' WHERE id = $1`, [first.id]);
  await db.query('UPDATE machine_gpus SET busy = false, assignment_id = NULL WHERE assignment_id = $1', [first.id]);
  await db.query(`INSERT INTO job_exclusions (job_id, machine_id, reason) VALUES ($1, $2, 'rejected')`, [jobId!, cheap.id]);
  await db.query(`UPDATE jobs SET status = 'QUEUED', assignment_id = NULL WHERE id = $1`, [jobId!]);
  await matchQueuedJobs({ db, log: quiet });
  const second = (await assignmentOf(db, jobId!))!;
  t.equal(second.machine_id, dear.id);
  t.equal(second.attempt, 2);
  t.equal((await statusOf(db, jobId!)).attempts, 2);
  const lines = await db.query<{ line: string }>('SELECT line FROM log_lines WHERE job_id = $1 ORDER BY seq', [jobId!]);
  t.same(lines.map((l) => l.line.replace(/farm \S+ \S+/, 'farm F')), [
    'matched: 1x L4 24GB on farm F (us-east) at $0.30/GPU-hour, attempt 1',
    'matched: 1x L4 24GB on farm F (us-east) at $0.40/GPU-hour, attempt 2',
  ]);
});

t.test('behavior: a capped log gets no system line; a job still holding a live assignment is not matched again', async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  const owner = await createJobOwner(db);
  const farm = await createFarm(db);
  const machine = await agentMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'l4-24gb', gpuCount: 2, pricePerGpuHourMicroUsd: 300_000 });
  const [capped, stuck] = await jobs(db, owner, [{}, {}]);
  await db.query('UPDATE jobs SET log_capped = true, service_log_seq = 5 WHERE id = $1', [capped!]);
  await db.query(
    `INSERT INTO assignments (id, job_id, machine_id, attempt, state, gpu_indices, class_id, gpu_model, price_per_gpu_hour_micro_usd, spec)
     VALUES ('asg_stuck', $1, $2, 1, 'accepted', '{}', 'l4-24gb', 'NVIDIA L4', 300000, '{}')`,
    [stuck!, machine.id],
  );
  const { log, lines } = captureLog();
  const result = await matchQueuedJobs({ db, log });
  t.same(result.matched.map((m) => m.jobId), [capped]);
  t.equal((await statusOf(db, capped!)).status, 'MATCHING');
  t.same(await db.query('SELECT line FROM log_lines WHERE job_id = $1', [capped!]), [], 'no line past the cap');
  t.same(await db.query('SELECT service_log_seq FROM jobs WHERE id = $1', [capped!]), [{ service_log_seq: 5 }]);
  t.equal((await statusOf(db, stuck!)).status, 'QUEUED');
  t.match(lines, [{ level: LEVEL.warn, jobId: stuck, msg: /still holds a live assignment/ }], 'the line names the job as a field');
});

t.test('behavior: inputs are resolved through the port; without it a job with inputs waits', async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  const owner = await createJobOwner(db);
  const farm = await createFarm(db);
  await agentMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'l4-24gb', gpuCount: 2, pricePerGpuHourMicroUsd: 300_000 });
  const [withInputs, plain] = await jobs(db, owner, [{ spec: { image: 'busybox', gpu: { count: 1 }, inputs: [{ artifactId: 'art_1', mountName: 'data' }] } }, {}]);
  await matchQueuedJobs({ db, log: quiet });
  t.equal((await statusOf(db, withInputs!)).status, 'QUEUED');
  t.equal((await statusOf(db, plain!)).status, 'MATCHING', 'a job without inputs needs no resolver');

  const calls: unknown[] = [];
  await matchQueuedJobs({
    db,
    log: quiet,
    resolveInputs: async (_db, job, inputs) => {
      calls.push({ job, inputs });
      return inputs.map((i) => ({ mountName: i.mountName, artifactId: i.artifactId, url: `https://cp.example/a/${i.artifactId}?sig=x`, sha256: 'a'.repeat(64), sizeBytes: 5 }));
    },
  });
  const a = (await assignmentOf(db, withInputs!))!;
  t.same(calls, [{ job: { id: withInputs, accountId: owner.accountId, assignmentId: a.id }, inputs: [{ artifactId: 'art_1', mountName: 'data' }] }], 'the resolver is told the assignment the inputs are for');
  t.same(assignmentSpecSchema.parse(a.spec).inputs, [{ mountName: 'data', artifactId: 'art_1', url: 'https://cp.example/a/art_1?sig=x', sha256: 'a'.repeat(64), sizeBytes: 5 }]);

  // A resolver that fails leaves the job QUEUED and the batch's other jobs matched.
  const [failing] = await jobs(db, owner, [{ spec: { image: 'busybox', gpu: { count: 1 }, inputs: [{ artifactId: 'art_gone', mountName: 'data' }] } }]);
  await db.query(`UPDATE machine_gpus SET busy = false, assignment_id = NULL`);
  const [after] = await jobs(db, owner, [{}]);
  const { log, lines } = captureLog();
  await matchQueuedJobs({ db, log, resolveInputs: async () => Promise.reject(new Error('artifact expired')) });
  t.equal((await statusOf(db, failing!)).status, 'QUEUED');
  t.equal((await statusOf(db, after!)).status, 'MATCHING');
  t.match(lines, [{ level: LEVEL.warn, jobId: failing, assignmentId: /^asg_/, machineId: String, err: { message: 'artifact expired' }, msg: /not matched/ }], 'job, assignment, machine and error as fields');
});

t.test('behavior: two matchers (two connection pools) racing over the last GPU: exactly one job wins', async (t) => {
  const { db, url } = await createPostgresTestDatabase(t);
  const other = openPostgres(url!);
  t.teardown(() => other.close());
  const owner = await createJobOwner(db);
  const farm = await createFarm(db);
  for (let round = 0; round < 8; round++) {
    await reset(db);
    const machine = await agentMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'h100-80gb-sxm', gpuCount: 2, busyGpus: 1, pricePerGpuHourMicroUsd: 2_000_000 });
    const ids = await jobs(db, owner, [{}, {}]);
    // Batches of one: each matcher claims a different job and both plan the same GPU.
    const [a, b] = await Promise.all([matchQueuedJobs({ db, log: quiet }, { batchSize: 1 }), matchQueuedJobs({ db: other, log: quiet }, { batchSize: 1 })]);
    t.equal(a.matched.length + b.matched.length, 1, `round ${round}: one match in all`);
    const statuses = await Promise.all(ids.map(async (id) => (await statusOf(db, id)).status));
    t.same(statuses.sort(), ['MATCHING', 'QUEUED'], `round ${round}: one job wins`);
    const holders = await db.query<{ assignment_id: string | null }>('SELECT assignment_id FROM machine_gpus WHERE machine_id = $1 AND gpu_index = 1', [machine.id]);
    const winner = [...a.matched, ...b.matched][0]!;
    t.equal(holders[0]!.assignment_id, winner.assignmentId, `round ${round}: the GPU names the winner`);
    t.equal((await db.query('SELECT 1 FROM assignments WHERE machine_id = $1', [machine.id])).length, 1);
  }
});

t.test('behavior: three matchers over a random fleet never give one GPU twice, and every match fits', async (t) => {
  const { db, url } = await createPostgresTestDatabase(t);
  const pools = [db, openPostgres(url!), openPostgres(url!)];
  t.teardown(() => Promise.all(pools.slice(1).map((p) => p.close())));
  const owner = await createJobOwner(db);
  let seed = 7;
  const random = () => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
  const classes = ['a100-80gb', 'rtx-4090-24gb', 'l4-24gb', 'h100-80gb-sxm'];
  const regionKeys = ['us-east', 'europe-west', 'asia-east'];
  const farms = [await createFarm(db), await createFarm(db)];
  for (let i = 0; i < 120; i++) {
    const gpuCount = [1, 2, 4, 8][Math.floor(random() * 4)]!;
    await agentMachine(db, {
      farmId: farms[i % 2]!.id,
      regionKey: regionKeys[Math.floor(random() * 3)]!,
      classId: classes[Math.floor(random() * classes.length)]!,
      gpuCount,
      busyGpus: Math.floor(random() * gpuCount),
      pricePerGpuHourMicroUsd: 200_000 + Math.floor(random() * 20) * 100_000,
      uptimePct: null,
    });
  }
  const inputs: QueuedJobInput[] = [];
  for (let i = 0; i < 500; i++) {
    const allow = random() < 0.5 ? [classes[Math.floor(random() * classes.length)]!] : undefined;
    const count = [1, 1, 2, 3, 4][Math.floor(random() * 5)]!;
    inputs.push({
      gpuCount: count,
      capMicroUsd: 500_000 + Math.floor(random() * 20) * 100_000,
      spec: { image: 'busybox', gpu: { count, ...(allow ? { modelAllowlist: allow } : {}) }, ...(random() < 0.3 ? { regionPreference: regionKeys[Math.floor(random() * 3)]! } : {}) },
    });
  }
  await jobs(db, owner, inputs);

  let contended = 1;
  for (let pass = 0; pass < 10 && contended > 0; pass++) {
    const results = await Promise.all(pools.map((p, i) => matchQueuedJobs({ db: p, log: quiet }, { batchSize: [7, 13, 50][i]! })));
    contended = results.reduce((n, r) => n + r.contended, 0);
  }

  const assignments = await db.query<{ id: string; job_id: string; machine_id: string; gpu_indices: number[]; class_id: string; price: number; gpu_count: number; cap: number; spec: { gpu: { modelAllowlist?: string[] } } }>(
    `SELECT a.id, a.job_id, a.machine_id, a.gpu_indices, a.class_id, a.price_per_gpu_hour_micro_usd AS price, j.gpu_count,
       j.max_price_per_gpu_hour_micro_usd AS cap, j.spec
     FROM assignments a JOIN jobs j ON j.id = a.job_id`,
  );
  t.ok(assignments.length > 100, `many matches (${assignments.length})`);
  const seen = new Set<string>();
  let twice = 0;
  let misfits = 0;
  for (const a of assignments) {
    for (const i of a.gpu_indices) {
      const key = `${a.machine_id}/${i}`;
      if (seen.has(key)) twice++;
      seen.add(key);
    }
    if (a.gpu_indices.length !== a.gpu_count || Number(a.price) > Number(a.cap)) misfits++;
    if (a.spec.gpu.modelAllowlist && !a.spec.gpu.modelAllowlist.includes(a.class_id)) misfits++;
  }
  t.equal(twice, 0, 'no GPU in two assignments');
  t.equal(misfits, 0, 'every match fits its job');
  const [held] = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM machine_gpus g JOIN assignments a ON a.id = g.assignment_id AND a.machine_id = g.machine_id AND g.gpu_index = ANY(a.gpu_indices)');
  t.equal(held!.n, seen.size, 'every reserved GPU names its assignment');
  const [jobsMatched] = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM jobs WHERE status = 'MATCHING'`);
  t.equal(jobsMatched!.n, assignments.length, 'one assignment per MATCHING job');
  // Nothing left that fits: one more pass by a single matcher finds nothing.
  t.equal((await matchQueuedJobs({ db, log: quiet })).matched.length, 0, 'the matchers left nothing that fits');
});

t.test('behavior: queue figures count QUEUED and MATCHING jobs per class', async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  const owner = await createJobOwner(db);
  await jobs(db, owner, [
    { matchedClasses: ['a100-80gb', 'l4-24gb'] },
    { matchedClasses: ['a100-80gb'], status: 'MATCHING' },
    { matchedClasses: [], spec: { image: 'busybox', gpu: { count: 1, modelAllowlist: ['rtx-4090-24gb'] } } },
    { matchedClasses: ['l4-24gb'], status: 'CREATED' },
    { matchedClasses: [] },
  ]);
  const figures = createQueueFigures(db);
  t.same(figures.queuedByClass(), new Map(), 'empty before the first refresh');
  await figures.refresh();
  t.same(Object.fromEntries(figures.queuedByClass()), { 'a100-80gb': 2, 'l4-24gb': 1, 'rtx-4090-24gb': 1 });
});

t.test('behavior: the loop matches at start, on NOTIFY jobs_queued, and closes', async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  const owner = await createJobOwner(db);
  const farm = await createFarm(db);
  await agentMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'l4-24gb', gpuCount: 4, pricePerGpuHourMicroUsd: 300_000 });
  const [early] = await jobs(db, owner, [{}]);
  const queue = createQueueFigures(db);
  const passes: number[] = [];
  const loop = startMatcher({ db, log: quiet }, { intervalMs: 60_000, queue, onPass: (r) => passes.push(r.matched.length) });
  t.teardown(() => loop.close());
  const waitFor = async (jobId: string) => {
    for (let i = 0; i < 200; i++) {
      if ((await statusOf(db, jobId)).status === 'MATCHING') return true;
      await new Promise((r) => setTimeout(r, 25));
    }
    return false;
  };
  t.ok(await waitFor(early!), 'matched by the first pass');
  // Let the listener connect before notifying.
  await new Promise((r) => setTimeout(r, 200));
  const [late] = await jobs(db, owner, [{}]);
  await db.query('SELECT pg_notify($1, $2)', [JOBS_QUEUED_CHANNEL, late!]);
  t.ok(await waitFor(late!), 'matched after the notification, long before the next tick');
  await loop.close();
  t.ok(passes.length >= 2);
  t.ok(queue.queuedByClass() instanceof Map);
});

t.test('error: a failed matcher pass is logged with its loop, error and streak as fields', async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  // The database answers LISTEN but every statement fails, as when it is restarting.
  const down = new Proxy(db, {
    get: (target, prop, receiver) => {
      if (prop === 'query') return () => Promise.reject(Object.assign(new Error('the database is restarting'), { code: '57P03' }));
      const value: unknown = Reflect.get(target, prop, receiver);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
  const { log, lines } = captureLog();
  const loop = startMatcher({ db: down, log }, { intervalMs: 60_000 });
  t.teardown(() => loop.close());
  for (let i = 0; i < 200 && lines.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
  t.match(
    lines,
    [{ level: LEVEL.warn, loop: 'matcher', failures: 1, retryInMs: 60_000, err: { type: 'Error', message: 'the database is restarting', code: '57P03' }, msg: 'matcher pass failed' }],
    'the line carries the loop, the error (pino serialized) and the streak as fields',
  );
});

t.test('pglite: the same statements work on the embedded database', async (t) => {
  const { db } = await createPgliteTestDatabase(t);
  const owner = await createJobOwner(db);
  const farm = await createFarm(db, { name: 'Embedded Farm' });
  await agentMachine(db, { farmId: farm.id, regionKey: 'canada', classId: 'rtx-4090-24gb', gpuCount: 2, pricePerGpuHourMicroUsd: 450_000 });
  const ids = await jobs(db, owner, [{ gpuCount: 2 }, {}]);
  const result = await matchQueuedJobs({ db, log: quiet });
  t.equal(result.matched.length, 1);
  t.equal((await statusOf(db, ids[0]!)).status, 'MATCHING');
  t.equal((await statusOf(db, ids[1]!)).status, 'QUEUED');
  const lines = await db.query<{ line: string }>('SELECT line FROM log_lines WHERE job_id = $1', [ids[0]!]);
  t.same(lines.map((l) => l.line), ['matched: 2x RTX 4090 24GB on farm Embedded Farm (canada) at $0.45/GPU-hour, attempt 1']);
});
