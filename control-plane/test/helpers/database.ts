import { randomBytes } from 'node:crypto';
import { PGlite } from '@electric-sql/pglite';
import pg from 'pg';
import type { Database } from '../../src/db/database.js';
import { migrate, type Migration } from '../../src/db/migrate.js';
import { openPglite, PGLITE_OPTIONS, pgliteDatabase } from '../../src/db/pglite.js';
import { openPostgres } from '../../src/db/postgres.js';
import { syncCatalog } from '../../src/fleet/store.js';

/** The server `npm test` prepares (scripts/test-env.sh); each test file gets its own database in it. */
export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://gpufarm:gpufarm@127.0.0.1:5432/postgres';

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

/** A fresh PostgreSQL database, migrated unless `empty`, dropped when the test ends. */
export async function createPostgresTestDatabase(t: Teardown, options: TestDatabaseOptions = {}): Promise<TestDatabase> {
  const name = `gf_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: TEST_DATABASE_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
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
  await prepare(db, options);
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
