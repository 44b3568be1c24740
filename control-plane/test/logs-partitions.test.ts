import t from 'tap';
import type { LogBatchLine } from '@gpufarm/shared';
import type { Database } from '../src/db/database.js';
import { loadMigrations, migrate } from '../src/db/migrate.js';
import { openPostgres } from '../src/db/postgres.js';
import { LOG_PARTITION_DAYS_AHEAD, maintainLogPartitions } from '../src/logs/partitions.js';
import { insertAgentLines, listLogLines, type LogLineRow } from '../src/logs/store.js';
import { createJobOwner, createQueuedJobs } from '../src/testing/job-factories.js';
import { BACKENDS } from './helpers/database.js';

/** Log lines in day partitions of the job's creation: the migration from 010, the upkeep loop, retention. */

const DAY_MS = 86_400_000;
const partitionOf = (ms: number) => `log_lines_p${new Date(ms).toISOString().slice(0, 10).replaceAll('-', '')}`;
const lines = (from: number, count: number): LogBatchLine[] =>
  Array.from({ length: count }, (_, i) => ({ seq: from + i, stream: 'stdout' as const, atMs: Date.now(), line: `line ${from + i}` }));

async function partitionsOfLines(db: Database, jobId: string): Promise<string[]> {
  const rows = await db.query<{ part: string }>('SELECT DISTINCT tableoid::regclass::text AS part FROM log_lines WHERE job_id = $1', [jobId]);
  return rows.map((r) => r.part);
}

async function tableExists(db: Database, name: string): Promise<boolean> {
  const rows = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_class WHERE relname = $1', [name]);
  return rows[0]?.n === 1;
}

async function createJob(db: Database, createdAtMs: number): Promise<string> {
  const [jobId] = await createQueuedJobs(db, await createJobOwner(db), [{}]);
  await db.query('UPDATE jobs SET created_at = $2 WHERE id = $1', [jobId!, new Date(createdAtMs).toISOString()]);
  return jobId!;
}

for (const [backend, create] of BACKENDS) {
  t.test(`${backend}: migrating from 010 keeps every line, its id and its cursors; new lines follow`, async (t) => {
    const { db } = await create(t, { migrations: loadMigrations().filter((m) => m.version <= 10) });
    const nowMs = Date.now();
    const older = await createJob(db, nowMs - 3 * DAY_MS);
    const recent = await createJob(db, nowMs);
    await db.query(
      `INSERT INTO log_lines (job_id, assignment_id, seq, stream, line, at)
       SELECT $1, 'asg_old', n, 'stdout', 'old ' || n, now() FROM generate_series(0, 4) AS n`,
      [older],
    );
    await db.query(`INSERT INTO log_lines (job_id, assignment_id, seq, stream, line, at) VALUES ($1, $1, 0, 'system', 'queued', now())`, [recent]);
    // Read as the 010 schema's store did (no partition key yet).
    const before = await db.query<LogLineRow>('SELECT id, assignment_id, seq, stream, line, at FROM log_lines WHERE job_id = $1 ORDER BY id', [older]);
    const cursor = before[1]!.id;
    const [{ max } = { max: 0 }] = await db.query<{ max: number }>('SELECT max(id)::int AS max FROM log_lines');

    t.same((await migrate(db, loadMigrations().filter((m) => m.version <= 11))).applied, ['011_log_partitions']);
    const [kind] = await db.query<{ relkind: string }>(`SELECT relkind::text FROM pg_class WHERE relname = 'log_lines'`);
    t.equal(kind?.relkind, 'p', 'log_lines is partitioned');
    t.same(await listLogLines(db, { jobId: older, afterId: 0, limit: 100, stream: null }), before, 'the same lines with the same ids');
    t.same(await listLogLines(db, { jobId: older, afterId: cursor, limit: 100, stream: null }), before.slice(2), 'a cursor given out before still pages on');
    t.same(await partitionsOfLines(db, older), [partitionOf(nowMs - 3 * DAY_MS)], "the older job's lines sit in the partition of its creation day");
    t.same(await partitionsOfLines(db, recent), [partitionOf(nowMs)]);

    t.same(await insertAgentLines(db, { jobId: older, assignmentId: 'asg_old', lines: lines(3, 4), capBytes: 1 << 20 }), { inserted: 2, bytes: 12, capped: false }, 'lines stored before the migration count as stored');
    const after = await listLogLines(db, { jobId: older, afterId: before.at(-1)!.id, limit: 100, stream: null });
    t.same(after.map((l) => l.seq), [5, 6]);
    t.ok(after.every((l) => l.id > max), 'new ids continue past the migrated ones');
  });

  t.test(`${backend}: the upkeep creates the coming days and drops days past retention, nothing else`, async (t) => {
    const { db, url } = await create(t);
    const nowMs = Date.now();
    const oldDayMs = nowMs - 40 * DAY_MS;
    // A pass as of 40 days ago made that day's partition, as a server running then would have.
    const then = await maintainLogPartitions(db, { nowMs: oldDayMs, retentionDays: 30 });
    t.ok(then?.created.includes(partitionOf(oldDayMs)));
    const oldJob = await createJob(db, oldDayMs);
    const keptJob = await createJob(db, nowMs);
    await insertAgentLines(db, { jobId: oldJob, assignmentId: 'asg_old', lines: lines(0, 3), capBytes: 1 << 20 });
    await insertAgentLines(db, { jobId: keptJob, assignmentId: 'asg_new', lines: lines(0, 3), capBytes: 1 << 20 });
    t.same(await partitionsOfLines(db, oldJob), [partitionOf(oldDayMs)], 'lines land in the partition of the job creation day');
    t.same(await partitionsOfLines(db, keptJob), [partitionOf(nowMs)]);

    const owner = await db.query<{ account_id: string }>('SELECT account_id FROM jobs WHERE id = $1', [oldJob]);
    await db.query(`INSERT INTO billing_entries (id, account_id, type, job_id, amount_micro_usd) VALUES ('bill_old', $1, 'job_charge', $2, 1234)`, [owner[0]!.account_id, oldJob]);
    await db.query(
      `INSERT INTO escrow_credits (chain_id, tx_hash, log_index, job_id, job_key, customer, token, amount, block_number, block_hash)
       VALUES (4663, '0xaa', 0, $1, '0xkey', '0xcustomer', '0xtoken', 1000, 1, '0xblock')`,
      [oldJob],
    );
    const records = async () => ({
      billing: await db.query('SELECT id, job_id, amount_micro_usd FROM billing_entries ORDER BY id'),
      escrow: await db.query('SELECT job_id, amount::text AS amount, status FROM escrow_credits ORDER BY job_id'),
      jobs: await db.query('SELECT id, status FROM jobs ORDER BY id'),
    });
    const recordsBefore = await records();

    // Two replicas run a pass at once (on PostgreSQL through two pools): neither fails.
    const other = url ? openPostgres(url) : db;
    if (url) t.teardown(() => other.close());
    const later = nowMs + 10 * DAY_MS;
    const passes = await Promise.all([maintainLogPartitions(db, { nowMs: later, retentionDays: 30 }), maintainLogPartitions(other, { nowMs: later, retentionDays: 30 })]);
    const ran = passes.filter((p) => p !== null);
    t.ok(ran.length >= 1, 'at least one replica ran the pass');
    const oldDays = Array.from({ length: LOG_PARTITION_DAYS_AHEAD + 1 }, (_, n) => partitionOf(oldDayMs + n * DAY_MS));
    t.same(ran.flatMap((p) => p.dropped).sort(), oldDays, 'the old day and those made ahead of it, all past retention, are dropped once');
    for (let n = 0; n <= LOG_PARTITION_DAYS_AHEAD; n += 1) t.ok(await tableExists(db, partitionOf(later + n * DAY_MS)), `the partition ${n} days ahead exists`);
    t.notOk(await tableExists(db, partitionOf(oldDayMs)), 'the old partition is gone from pg_class');
    t.ok(await tableExists(db, partitionOf(nowMs)), 'a day within retention stays');

    t.same(await listLogLines(db, { jobId: oldJob, afterId: 0, limit: 100, stream: null }), [], "the dropped job's log reads as empty");
    t.equal((await listLogLines(db, { jobId: keptJob, afterId: 0, limit: 100, stream: null })).length, 3);
    t.same(await records(), recordsBefore, 'billing, escrow and job records are untouched');
    t.equal(recordsBefore.billing.length, 1);
    t.equal(recordsBefore.escrow.length, 1);

    const again = await maintainLogPartitions(db, { nowMs: later, retentionDays: 30 });
    t.same(again, { created: [], dropped: [], blocked: [] }, 'a second pass has nothing to do');
  });

  t.test(`${backend}: a day whose lines already sit in the default partition is left to it`, async (t) => {
    const { db } = await create(t);
    const farMs = Date.now() + 20 * DAY_MS;
    const job = await createJob(db, farMs);
    await insertAgentLines(db, { jobId: job, assignmentId: 'asg_far', lines: lines(0, 2), capBytes: 1 << 20 });
    t.same(await partitionsOfLines(db, job), ['log_lines_default'], 'no partition yet: the default takes the lines');
    const pass = await maintainLogPartitions(db, { nowMs: farMs, retentionDays: 30 });
    t.same(pass?.blocked, [new Date(farMs).toISOString().slice(0, 10)]);
    t.equal(pass?.created.length, LOG_PARTITION_DAYS_AHEAD, 'the other days are created');
    t.equal((await listLogLines(db, { jobId: job, afterId: 0, limit: 100, stream: null })).length, 2);
  });
}
