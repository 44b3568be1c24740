import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import t from 'tap';
import { loadMigrations, migrate } from '../src/db/migrate.js';
import { BACKENDS } from './helpers/database.js';

for (const [name, create] of BACKENDS) t.test(name, async (t) => {
  // One database per backend for these subtests: a PGlite takes seconds to create.
  const { db } = await create(t); // already migrated once by the helper

  await t.test('migrations apply once, are recorded, and a second run is a no-op', async (t) => {
    const recorded = await db.query<{ version: number; name: string }>('SELECT version, name FROM schema_migrations ORDER BY version');
    t.same(recorded.map((r) => r.name), loadMigrations().map((m) => m.name));
    t.same(await migrate(db), { applied: [] }, 'nothing left to apply');
    const tables = await db.query<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' ORDER BY table_name`,
    );
    const names = tables.map((r) => r.table_name);
    for (const table of ['accounts', 'api_keys', 'billing_entries', 'farms', 'gpu_classes', 'idempotency_keys', 'jobs', 'machine_gpus', 'machine_uptime_days', 'machines']) {
      t.ok(names.includes(table), `table ${table} exists`);
    }
    const classes = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM gpu_classes');
    t.ok((classes[0]?.n ?? 0) >= 10, 'the GPU class catalog is synced');
  });

  await t.test('a changed migration stops the start; a new one is applied in order', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'gf-migrations-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    const current = loadMigrations();
    for (const m of current) writeFileSync(join(dir, `${m.name}.sql`), m.sql);
    writeFileSync(join(dir, '900_extra.sql'), 'CREATE TABLE extra_probe (id integer PRIMARY KEY);\nINSERT INTO extra_probe VALUES (1);\n');
    t.same(await migrate(db, loadMigrations(dir)), { applied: ['900_extra'] });
    t.same(await db.query('SELECT id FROM extra_probe'), [{ id: 1 }]);
    writeFileSync(join(dir, '900_extra.sql'), 'CREATE TABLE extra_probe (id bigint PRIMARY KEY);\n');
    await t.rejects(migrate(db, loadMigrations(dir)), /900_extra changed after it was applied/);
  });

  await t.test('a failing migration rolls back whole and is not recorded', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'gf-migrations-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, '901_broken.sql'), 'CREATE TABLE half_done (id integer);\nSELECT no_such_function();\n');
    await t.rejects(migrate(db, loadMigrations(dir)));
    t.same(await db.query(`SELECT to_regclass('half_done')::text AS t`), [{ t: null }]);
    t.same(await db.query('SELECT version FROM schema_migrations WHERE version = 901'), []);
  });

  await t.test('int8 comes back as a number, a bigint past 2^53', async (t) => {
    const [row] = await db.query<{ small: unknown; big: unknown }>('SELECT 85899345920::int8 AS small, 9007199254740993::int8 AS big');
    t.equal(row?.small, 85899345920);
    t.equal(row?.big, 9007199254740993n);
  });
});

t.test('concurrent starts on PostgreSQL apply each migration once', async (t) => {
  const [, createPostgres] = BACKENDS[0];
  const { db } = await createPostgres(t);
  await db.query('DELETE FROM schema_migrations WHERE version = 901');
  const dir = mkdtempSync(join(tmpdir(), 'gf-migrations-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  writeFileSync(join(dir, '902_counter.sql'), 'CREATE TABLE IF NOT EXISTS counter_probe (n integer);\nINSERT INTO counter_probe VALUES (1);\n');
  const results = await Promise.all([migrate(db, loadMigrations(dir)), migrate(db, loadMigrations(dir)), migrate(db, loadMigrations(dir))]);
  t.equal(results.flatMap((r) => r.applied).length, 1, 'applied by exactly one');
  t.same(await db.query('SELECT n FROM counter_probe'), [{ n: 1 }]);
});
