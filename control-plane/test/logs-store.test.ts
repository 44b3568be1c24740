import t, { type Test } from 'tap';
import type { LogBatchLine } from '@gpufarm/shared';
import { appendServiceLine, insertAgentLines, lastStoredSeqs, LOG_CAP_LINE } from '../src/logs/store.js';
import { createJobOwner, createQueuedJobs } from '../src/testing/job-factories.js';
import { createPostgresTestDatabase } from './helpers/database.js';

/** The log store on PostgreSQL: each (assignment, seq) once, the per-job cap and its one system line. */

const lines = (from: number, count: number, text = (seq: number) => `line ${seq}`): LogBatchLine[] =>
  Array.from({ length: count }, (_, i) => ({ seq: from + i, stream: 'stdout' as const, atMs: Date.now(), line: text(from + i) }));

async function setup(t: Test) {
  const { db } = await createPostgresTestDatabase(t);
  const [jobId] = await createQueuedJobs(db, await createJobOwner(db), [{}]);
  const stored = async () => db.query<{ assignment_id: string; seq: number; stream: string; line: string }>('SELECT assignment_id, seq, stream, line FROM log_lines WHERE job_id = $1 ORDER BY id', [jobId!]);
  return { db, jobId: jobId!, stored };
}

t.test('a resent batch is stored once; lastStoredSeqs reports each assignment', async (t) => {
  const { db, jobId, stored } = await setup(t);
  t.same(await insertAgentLines(db, { jobId, assignmentId: 'asg_a', lines: lines(0, 5), capBytes: 1 << 20 }), { inserted: 5, bytes: 30, capped: false });
  t.same(await insertAgentLines(db, { jobId, assignmentId: 'asg_a', lines: lines(3, 4), capBytes: 1 << 20 }), { inserted: 2, bytes: 12, capped: false }, 'seq 3 and 4 again, 5 and 6 new');
  t.same((await stored()).map((l) => l.seq), [0, 1, 2, 3, 4, 5, 6]);
  t.same(Object.fromEntries(await lastStoredSeqs(db, ['asg_a', 'asg_none'])), { asg_a: 6 });
  const [job] = await db.query<{ log_bytes: number }>('SELECT log_bytes FROM jobs WHERE id = $1', [jobId]);
  t.equal(Number(job!.log_bytes), 7 * 'line 0'.length, 'bytes count the stored lines once');
});

t.test('the cap: lines past it are dropped, one system line says so, service lines stop too', async (t) => {
  const { db, jobId, stored } = await setup(t);
  const cap = 25; // five 5-byte lines
  const first = await insertAgentLines(db, { jobId, assignmentId: 'asg_b', lines: lines(0, 8, () => 'abcde'), capBytes: cap });
  t.same(first, { inserted: 5, bytes: 25, capped: true });
  const again = await insertAgentLines(db, { jobId, assignmentId: 'asg_b', lines: lines(8, 3, () => 'x'), capBytes: cap });
  t.same(again, { inserted: 0, bytes: 0, capped: true }, 'nothing more once capped');
  await appendServiceLine(db, jobId, 'verified: …');
  const all = await stored();
  t.same(all.filter((l) => l.stream === 'stdout').map((l) => l.seq), [0, 1, 2, 3, 4]);
  const system = all.filter((l) => l.stream === 'system');
  t.same(system.map((l) => l.line), [LOG_CAP_LINE(cap)], 'one cap line and no later service line');
  t.equal(system[0]!.assignment_id, jobId, "the service's lines carry the job id");
});
