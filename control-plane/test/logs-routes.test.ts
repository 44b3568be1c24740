import { logListSchema, type LogList } from '@gpufarm/shared';
import t, { type Test } from 'tap';
import { logRoutes } from '../src/logs/routes.js';
import { appendServiceLine, insertAgentLines } from '../src/logs/store.js';
import { bearer, buildTestApp, createOfferedJob, createTestKey, type TestApp } from './helpers/app.js';
import { assertError } from './helpers/assert.js';

interface Setup extends TestApp {
  key: string;
  jobId: string;
}

/** The real app with the logs route (unless already wired) and one job created through the API. */
async function setup(t: Test): Promise<Setup> {
  const test = await buildTestApp(t);
  if (!test.app.hasRoute({ method: 'GET', url: '/v1/jobs/:id/logs' })) await test.app.register(logRoutes, { db: test.db });
  const { key } = await createTestKey(test.db);
  return { ...test, key, jobId: await createOfferedJob(test, key) };
}

async function page(s: Setup, query: string, key = s.key): Promise<LogList> {
  const res = await s.app.inject({ method: 'GET', url: `/v1/jobs/${s.jobId}/logs${query}`, headers: bearer(key) });
  if (res.statusCode !== 200) throw new Error(`logs answered ${res.statusCode}: ${res.body}`);
  return logListSchema.parse(res.json());
}

const agentLines = (from: number, count: number, stream: 'stdout' | 'stderr' = 'stdout') =>
  Array.from({ length: count }, (_, i) => ({ seq: from + i, stream, line: `${stream} line ${from + i}`, atMs: Date.UTC(2026, 10, 22, 12, 0, from + i) }));

t.test('default: a job without lines yet answers an empty page and cursor 0', async (t) => {
  const s = await setup(t);
  const res = await s.app.inject({ method: 'GET', url: `/v1/jobs/${s.jobId}/logs`, headers: bearer(s.key) });
  t.equal(res.statusCode, 200);
  t.same(logListSchema.parse(res.json()), { object: 'list', jobStatus: 'CREATED', nextCursor: '0', data: [] });
});

t.test('behavior: pages follow the cursor, and the cursor stays put until new lines arrive', async (t) => {
  const s = await setup(t);
  await appendServiceLine(s.db, s.jobId, 'queued');
  await insertAgentLines(s.db, { jobId: s.jobId, assignmentId: 'asg_1', lines: [...agentLines(0, 2), ...agentLines(2, 2, 'stderr')], capBytes: 1 << 20 });
  await appendServiceLine(s.db, s.jobId, 'exited with code 0');

  const first = await page(s, '?limit=2');
  t.same(first.data.map((l) => l.line), ['queued', 'stdout line 0']);
  t.equal(first.nextCursor, String(first.data[1]!.id), 'nextCursor is the last line id');
  t.match(first.data[0], { assignmentId: s.jobId, seq: 0, stream: 'system' });
  t.match(first.data[1], { assignmentId: 'asg_1', seq: 0, stream: 'stdout', at: '2026-11-22T12:00:00.000Z' });
  const second = await page(s, `?limit=2&cursor=${first.nextCursor}`);
  t.same(second.data.map((l) => l.line), ['stdout line 1', 'stderr line 2']);
  const rest = await page(s, `?cursor=${second.nextCursor}`);
  t.same(rest.data.map((l) => l.line), ['stderr line 3', 'exited with code 0']);
  const ids = [...first.data, ...second.data, ...rest.data].map((l) => l.id);
  t.same(ids, [...ids].sort((a, b) => a - b), 'ids only grow');

  const idle = await page(s, `?cursor=${rest.nextCursor}`);
  t.same(idle.data, []);
  t.equal(idle.nextCursor, rest.nextCursor, 'no new lines: the same cursor');
  t.equal((await page(s, `?cursor=${idle.nextCursor}`)).nextCursor, rest.nextCursor, 'and again');

  await insertAgentLines(s.db, { jobId: s.jobId, assignmentId: 'asg_1', lines: agentLines(4, 1), capBytes: 1 << 20 });
  const tail = await page(s, `?cursor=${idle.nextCursor}`);
  t.same(tail.data.map((l) => l.line), ['stdout line 4'], 'a tail sees exactly the new line');
  t.not(tail.nextCursor, idle.nextCursor);
  await insertAgentLines(s.db, { jobId: s.jobId, assignmentId: 'asg_1', lines: agentLines(4, 1), capBytes: 1 << 20 });
  t.same((await page(s, `?cursor=${tail.nextCursor}`)).data, [], 'a resent line is not stored twice');
});

t.test('behavior: the stream filter', async (t) => {
  const s = await setup(t);
  await appendServiceLine(s.db, s.jobId, 'pulling');
  await insertAgentLines(s.db, { jobId: s.jobId, assignmentId: 'asg_1', lines: [...agentLines(0, 3), ...agentLines(3, 2, 'stderr')], capBytes: 1 << 20 });
  t.same((await page(s, '?stream=stderr')).data.map((l) => l.line), ['stderr line 3', 'stderr line 4']);
  t.same((await page(s, '?stream=system')).data.map((l) => l.line), ['pulling']);
  const stdout = await page(s, '?stream=stdout&limit=2');
  t.same(stdout.data.map((l) => l.line), ['stdout line 0', 'stdout line 1']);
  t.same((await page(s, `?stream=stdout&cursor=${stdout.nextCursor}`)).data.map((l) => l.line), ['stdout line 2']);
  const none = await page(s, `?stream=stderr&cursor=${(await page(s, '?stream=stderr')).nextCursor}`);
  t.same(none.data, []);
});

t.test('args: limit defaults to 500 and goes up to 1000', async (t) => {
  const s = await setup(t);
  await insertAgentLines(s.db, { jobId: s.jobId, assignmentId: 'asg_1', lines: agentLines(0, 1100), capBytes: 1 << 24 });
  t.equal((await page(s, '')).data.length, 500);
  t.equal((await page(s, '?limit=1000')).data.length, 1000);
  t.equal((await page(s, '?limit=1')).data.length, 1);
});

t.test('error: invalid_request for bad cursor, limit, stream and parameters', async (t) => {
  const s = await setup(t);
  const cases: [string, string][] = [
    ['?cursor=abc', 'cursor'],
    ['?cursor=-1', 'cursor'],
    ['?cursor=01', 'cursor'],
    ['?cursor=1.5', 'cursor'],
    ['?cursor=9999999999999999', 'cursor'],
    ['?limit=0', 'limit'],
    ['?limit=1001', 'limit'],
    ['?limit=ten', 'limit'],
    ['?stream=stdin', 'stream'],
    ['?follow=true', 'follow'],
    ['?cursor=1&cursor=2', 'cursor'],
  ];
  for (const [query, field] of cases) {
    const res = await s.app.inject({ method: 'GET', url: `/v1/jobs/${s.jobId}/logs${query}`, headers: bearer(s.key) });
    assertError(t, res, 'invalid_request', 400);
    t.equal(res.json().error.details[0]?.field, field, `${query} names ${field}`);
    t.match(res.json().error.message, field);
  }
  assertError(t, await s.app.inject({ method: 'GET', url: '/v1/jobs/nope/logs', headers: bearer(s.key) }), 'invalid_request', 400);
});

t.test('error: another account, an unknown job, no key, no jobs:read', async (t) => {
  const s = await setup(t);
  await appendServiceLine(s.db, s.jobId, 'private line');
  const other = await createTestKey(s.db);
  const foreign = await s.app.inject({ method: 'GET', url: `/v1/jobs/${s.jobId}/logs`, headers: bearer(other.key) });
  assertError(t, foreign, 'not_found', 404);
  t.notMatch(foreign.body, /private line/);
  assertError(t, await s.app.inject({ method: 'GET', url: `/v1/jobs/job_${'0'.repeat(26)}/logs`, headers: bearer(s.key) }), 'not_found', 404);
  assertError(t, await s.app.inject({ method: 'GET', url: `/v1/jobs/${s.jobId}/logs` }), 'missing_api_key', 401);
  const writer = await createTestKey(s.db, { scopes: ['jobs:create', 'artifacts:read'] });
  assertError(t, await s.app.inject({ method: 'GET', url: `/v1/jobs/${s.jobId}/logs`, headers: bearer(writer.key) }), 'insufficient_scope', 403);
});
