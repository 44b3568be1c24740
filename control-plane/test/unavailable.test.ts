import pg from 'pg';
import t from 'tap';
import { generateApiKey } from '../src/auth/api-keys.js';
import { assertError } from './helpers/assert.js';
import { bearer, buildTestApp, buildUnreachableDatabaseApp, createTestKey } from './helpers/app.js';
import { createPostgresTestDatabase, TEST_DATABASE_URL } from './helpers/database.js';

t.test('error: unavailable when the database cannot be reached', async (t) => {
  const { app } = await buildUnreachableDatabaseApp(t);
  const res = await app.inject({ url: '/v1/billing', headers: bearer(generateApiKey('test')) });
  assertError(t, res, 'unavailable', 503);
  t.notMatch(res.body, /ECONNREFUSED|127\.0\.0\.1/, 'no connection details leak');
  assertError(t, await app.inject({ url: '/v1/capacity' }), 'unavailable', 503);
  assertError(t, await app.inject({ url: '/v1/pricing' }), 'unavailable', 503);
  t.equal((await app.inject({ url: '/v1' })).statusCode, 200, 'the index needs no database');
});

t.test('error: unavailable when the database goes away under a running app', async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  const { app } = await buildTestApp(t, { db });
  const { key } = await createTestKey(db);
  t.equal((await app.inject({ url: '/v1/billing', headers: bearer(key) })).statusCode, 200);
  // The database disappears under the running app: its connections end, new ones are refused.
  const [{ name }] = (await db.query<{ name: string }>('SELECT current_database() AS name')) as [{ name: string }];
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  await admin.query(`DROP DATABASE ${name} WITH (FORCE)`);
  await admin.end();
  const res = await app.inject({ url: '/v1/billing', headers: bearer(key) });
  assertError(t, res, 'unavailable', 503);
});
