import { createHash, randomBytes } from 'node:crypto';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import type { Database } from '../../src/db/database.js';
import { loadMigrations, migrate, type Migration } from '../../src/db/migrate.js';
import { openPglite, PGLITE_OPTIONS, pgliteDatabase } from '../../src/db/pglite.js';
import { openPostgres } from '../../src/db/postgres.js';
import { syncCatalog } from '../../src/fleet/store.js';

/** The server `npm test` prepares (scripts/test-env.sh); each test file gets its own database in it. */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://gpufarm:gpufarm@127.0.0.1:5432/postgres';
/** Serialises the making of the migrated template across test processes. */
const TEMPLATE_LOCK_KEY = 4663_0002;

interface Teardown {
  teardown(fn: () => unknown): void;
}

export interface TestDatabase {
  db: Database;
  /** Set for PostgreSQL: the fresh database's URL, for code that opens its own connections. */
  url: string | null;
}

/** Which migrations a fresh test database gets (default: all, then the GPU class catalog). */
export interface TestDatabaseOptions {
  migrations?: Migration[];
  /** No table at all, not even `schema_migrations`: a database as an operator creates it. */
  empty?: boolean;
}

async function prepare(db: Database, options: TestDatabaseOptions): Promise<void> {
  if (options.empty) return;
  await migrate(db, options.migrations);
  if (!options.migrations) await syncCatalog(db);
}

/**
 * The name of a database holding every migration of this tree, made once on the test server and
 * cloned by `CREATE DATABASE … TEMPLATE` for each test: a clone costs a fraction of running the
 * migrations again. The name carries the migrations' checksums, so a changed migration gets a new
 * template; templates of other trees (other migrations) are dropped when a new one is made, unless
 * in use.
 */
let migratedTemplate: Promise<string> | undefined;

async function ensureMigratedTemplate(): Promise<string> {
  const migrations = loadMigrations();
  const name = `gf_tpl_${createHash('sha256').update(migrations.map((m) => `${m.name}:${m.checksum}`).join('\n')).digest('hex').slice(0, 16)}`;
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  try {
    // One maker per server: test files start four at a time and each would otherwise build its own.
    await admin.query('SELECT pg_advisory_lock($1)', [TEMPLATE_LOCK_KEY]);
    const { rowCount } = await admin.query('SELECT 1 FROM pg_database WHERE datname = $1', [name]);
    if (rowCount) return name;
    // Made under another name and renamed when complete: a half-migrated template is never cloned.
    const building = `${name}_${randomBytes(3).toString('hex')}`;
    await admin.query(`CREATE DATABASE ${building}`);
    const url = new URL(TEST_DATABASE_URL);
    url.pathname = `/${building}`;
    const db = openPostgres(url.toString());
    try {
      await migrate(db, migrations);
    } finally {
      await db.close();
    }
    await admin.query(`ALTER DATABASE ${building} RENAME TO ${name}`);
    const { rows } = await admin.query<{ datname: string }>(`SELECT datname FROM pg_database WHERE datname LIKE 'gf\\_tpl\\_%' AND datname <> $1`, [name]);
    for (const { datname } of rows) await admin.query(`DROP DATABASE IF EXISTS ${datname}`).catch(() => undefined);
    return name;
  } finally {
    await admin.end();
  }
}

/** Creates database `name` on the test server with every migration applied (the catalog not synced); the caller drops it. */
export async function createMigratedDatabase(name: string): Promise<void> {
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  try {
    const clone = async () => admin.query(`CREATE DATABASE ${name} TEMPLATE ${await (migratedTemplate ??= ensureMigratedTemplate())}`);
    await clone().catch(async (err: unknown) => {
      // Dropped meanwhile by a test run of another tree that made its own: make ours again.
      if ((err as { code?: string }).code !== '3D000') throw err;
      migratedTemplate = undefined;
      await clone();
    });
  } finally {
    await admin.end();
  }
}

/** A fresh PostgreSQL database, migrated unless `empty`, dropped when the test ends. */
export async function createPostgresTestDatabase(t: Teardown, options: TestDatabaseOptions = {}): Promise<TestDatabase> {
  const name = `gf_test_${randomBytes(6).toString('hex')}`;
  const fromTemplate = !options.empty && !options.migrations;
  if (fromTemplate) {
    await createMigratedDatabase(name);
  } else {
    const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`).finally(() => admin.end());
  }
  const url = new URL(TEST_DATABASE_URL);
  url.pathname = `/${name}`;
  const db = openPostgres(url.toString());
  t.teardown(async () => {
    await db.close();
    const dropper = new pg.Client({ connectionString: TEST_DATABASE_URL });
    await dropper.connect();
    await dropper.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    await dropper.end();
  });
  if (fromTemplate) await syncCatalog(db);
  else await prepare(db, options);
  return { db, url: url.toString() };
}

// A fully migrated PGlite, dumped once per test process: a PGlite started from that dump costs
// about a quarter of the CPU of one that runs initdb and every migration again.
let migratedPglite: Promise<Blob> | undefined;

async function dumpMigratedPglite(): Promise<Blob> {
  const raw = await PGlite.create(PGLITE_OPTIONS);
  try {
    await prepare(pgliteDatabase(raw), {});
    return await raw.dumpDataDir('none');
  } finally {
    await raw.close();
  }
}

/** A fresh, migrated in-memory PGlite database. */
export async function createPgliteTestDatabase(t: Teardown, options: TestDatabaseOptions = {}): Promise<TestDatabase> {
  const migratedFully = !options.empty && !options.migrations;
  const db = migratedFully ? pgliteDatabase(await PGlite.create({ ...PGLITE_OPTIONS, loadDataDir: await (migratedPglite ??= dumpMigratedPglite()) })) : await openPglite(undefined);
  t.teardown(() => db.close());
  if (!migratedFully) await prepare(db, options);
  return { db, url: null };
}

/** Both backends, for store suites that must pass on each. */
export const BACKENDS = [
  ['postgres', createPostgresTestDatabase],
  ['pglite', createPgliteTestDatabase],
] as const;
