import t from 'tap';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { createJobOwner, createQueuedJobs } from '../src/testing/job-factories.js';
import { assertError } from './helpers/assert.js';
import { buildWebTestApp, devWallet, session, signIn, type SignedIn } from './helpers/web.js';

/**
 * The web app's long lists are read a page at a time: the account's API keys and a farm's
 * earnings (per job, machine or day) take `limit` (bounded) and `cursor` and answer the /v1 list
 * envelope; the earnings CSV streams the ledger in pages. Through HTTP with a session.
 */

type Row = Record<string, unknown>;

/** Every row of a paged list, following `nextCursor`; also how many pages it took. */
async function walk(app: Awaited<ReturnType<typeof buildWebTestApp>>['app'], signedIn: SignedIn, url: string): Promise<{ rows: Row[]; pages: number }> {
  const rows: Row[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const res = await app.inject({ url: `${url}${url.includes('?') ? '&' : '?'}${cursor ? `cursor=${cursor}` : ''}`, headers: session(signedIn) });
    if (res.statusCode !== 200) throw new Error(`${url} answered ${res.statusCode}: ${res.body}`);
    const body = res.json() as { data: Row[]; nextCursor: string | null };
    rows.push(...body.data);
    cursor = body.nextCursor;
    pages += 1;
  } while (cursor !== null && pages < 100);
  return { rows, pages };
}

t.test('behavior: GET /dashboard/api/keys answers a page of keys, newest first, with a cursor to the next', async (t) => {
  const { app } = await buildWebTestApp(t);
  const me = await signIn(app, devWallet(1));
  const ids: string[] = [];
  for (let i = 0; i < 25; i += 1) {
    const res = await app.inject({ method: 'POST', url: '/dashboard/api/keys', headers: session(me, { csrf: true }), payload: { label: `key ${i}`, scopes: ['jobs:read'] } });
    ids.push(res.json().apiKey.id as string);
  }
  const other = await signIn(app, devWallet(2));
  await app.inject({ method: 'POST', url: '/dashboard/api/keys', headers: session(other, { csrf: true }), payload: { scopes: ['jobs:read'] } });
  const newestFirst = [...ids].reverse();

  const first = await app.inject({ url: '/dashboard/api/keys', headers: session(me) });
  t.equal(first.statusCode, 200, first.body);
  t.equal(first.json().object, 'list');
  t.same(first.json().data.map((k: Row) => k.id), newestFirst.slice(0, 20), 'twenty by default, newest first');
  t.type(first.json().nextCursor, 'string');

  const all = await walk(app, me, '/dashboard/api/keys?limit=7');
  t.same(all.rows.map((k) => k.id), newestFirst, 'the pages hold every key of the account once, and no other account\'s');
  t.equal(all.pages, 4);

  for (const limit of ['0', '101', 'ten']) {
    const res = await app.inject({ url: `/dashboard/api/keys?limit=${limit}`, headers: session(me) });
    assertError(t, res, 'invalid_request', 400);
    t.equal(res.json().error.details[0].field, 'limit', `limit=${limit}`);
  }
  const junk = await app.inject({ url: '/dashboard/api/keys?cursor=bm90IGEgY3Vyc29y', headers: session(me) });
  assertError(t, junk, 'invalid_request', 400);
  t.equal(junk.json().error.details[0].field, 'cursor');
});

t.test('behavior: a farm\'s earnings are read a page at a time per job, machine or day, and the CSV streams the whole ledger', async (t) => {
  const { app, db } = await buildWebTestApp(t);
  const payout = devWallet(2);
  const farm = await createFarm(db, { slug: 'long-farm', payoutAddress: payout.address });
  const machines = [
    await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 }),
    await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 }),
  ];
  // 1,200 settled jobs (more than one CSV page of EARNINGS_CSV_PAGE), one completed every hour back from now, in turn pending, released and disputed.
  const JOBS = 1200;
  const owner = await createJobOwner(db);
  await createQueuedJobs(db, owner, Array.from({ length: JOBS }, () => ({})));
  await db.query(
    `WITH j AS (SELECT id, row_number() OVER (ORDER BY id) AS n FROM jobs WHERE account_id = $1),
          a AS (INSERT INTO assignments (id, job_id, machine_id, attempt, state, gpu_indices, class_id, gpu_model, price_per_gpu_hour_micro_usd, spec, offered_at, finished_at)
                SELECT 'asg_' || md5(j.id), j.id, CASE WHEN j.n % 2 = 0 THEN $2 ELSE $3 END, 1, 'finished', ARRAY[0], 'rtx-4090-24gb', 'NVIDIA GeForce RTX 4090', 400000,
                       '{}'::jsonb, now() - make_interval(hours => j.n::int), now() - make_interval(hours => j.n::int)
                  FROM j RETURNING id, job_id)
     UPDATE jobs SET assignment_id = a.id, status = 'COMPLETED', settlement_amount = 1000000, settlement_fee = 100000,
            settlement_status = (ARRAY['completed', 'released', 'disputed'])[1 + (SELECT n FROM j WHERE j.id = jobs.id) % 3]
       FROM a WHERE jobs.id = a.job_id`,
    [owner.accountId, machines[0]!.id, machines[1]!.id],
  );
  const me = await signIn(app, payout);

  const perJob = await walk(app, me, '/operator/api/earnings?limit=500');
  t.equal(perJob.pages, 3);
  t.equal(new Set(perJob.rows.map((r) => r.jobId)).size, JOBS, 'every job once');
  const completed = perJob.rows.map((r) => r.completedAt as string);
  t.same(completed, [...completed].sort().reverse(), 'newest first');

  const first = (await app.inject({ url: '/operator/api/earnings?groupBy=day&limit=30', headers: session(me) })).json();
  t.equal(first.object, 'list');
  t.equal(first.data.length, 30, 'a day-grouped page holds `limit` rows');
  t.type(first.nextCursor, 'string', 'with a cursor to the next');
  const [{ groups }] = (await db.query<{ groups: number }>(
    `SELECT count(DISTINCT (to_char(a.finished_at AT TIME ZONE 'UTC', 'YYYY-MM-DD'), j.settlement_status))::int AS groups FROM jobs j JOIN assignments a ON a.id = j.assignment_id WHERE j.account_id = $1`,
    [owner.accountId],
  )) as [{ groups: number }];
  const perDay = await walk(app, me, '/operator/api/earnings?groupBy=day&limit=30');
  t.equal(perDay.rows.length, groups, 'one row per day and state');
  t.equal(new Set(perDay.rows.map((r) => `${String(r.day)}/${String(r.state)}`)).size, groups, 'none twice');
  t.equal(perDay.rows.reduce((sum, r) => sum + BigInt(r.amount as string), 0n), BigInt(JOBS) * 900_000n, 'the sums add up to the ledger');

  const perMachine = await walk(app, me, '/operator/api/earnings?groupBy=machine&limit=4');
  t.equal(perMachine.pages, 2);
  t.same(perMachine.rows.map((r) => [r.machineId, r.state]).sort(), machines.flatMap((m) => ['disputed', 'pending', 'released'].map((s) => [m.id, s])).sort(), 'two machines, three states');

  const totals = (await app.inject({ url: '/operator/api/earnings?limit=1', headers: session(me) })).json().totals;
  const count = (state: number) => BigInt(Array.from({ length: JOBS }, (_, i) => (i + 1) % 3).filter((s) => s === state).length);
  t.same(totals, [{ token: '0x0000000000000000000000000000000000000000', symbol: 'ETH', decimals: 18, pending: (count(0) * 900_000n).toString(), released: (count(1) * 900_000n).toString(), waitingWithdrawal: '0' }], 'totals over the whole ledger, whatever the page');

  const csv = await app.inject({ url: '/operator/api/earnings.csv', headers: session(me) });
  t.equal(csv.statusCode, 200);
  t.equal(csv.headers['transfer-encoding'], 'chunked', 'streamed');
  t.notOk(csv.headers['content-length'], 'not built whole before it is sent');
  const lines = csv.body.split('\r\n');
  t.equal(lines[0], 'jobId,machineId,day,token,symbol,decimals,amount,fee,state,completedAt,challengeEndsAt,releasedAt,releaseTxHash');
  t.equal(lines.length, JOBS + 2, 'header, every job, the final line end');
  t.same(lines.slice(1, -1).map((l) => l.split(',')[0]), perJob.rows.map((r) => r.jobId), 'the rows of the paged list, in its order');
  const daysCsv = (await app.inject({ url: '/operator/api/earnings.csv?groupBy=day', headers: session(me) })).body.split('\r\n');
  t.equal(daysCsv.length, groups + 2);

  for (const limit of ['0', '501']) assertError(t, await app.inject({ url: `/operator/api/earnings?limit=${limit}`, headers: session(me) }), 'invalid_request', 400);
  const foreign = await app.inject({ url: `/operator/api/earnings?groupBy=machine&cursor=${encodeURIComponent(String((await app.inject({ url: '/operator/api/earnings?limit=1', headers: session(me) })).json().nextCursor))}`, headers: session(me) });
  assertError(t, foreign, 'invalid_request', 400);
  t.equal(foreign.json().error.details[0].field, 'cursor', 'a per-job cursor is no per-machine cursor');
});
