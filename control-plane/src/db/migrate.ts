import { createHash } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { GpufarmError } from '@gpufarm/shared';
import { MIGRATIONS_DIR } from '../package-files.js';
import type { Database } from './database.js';

/** Any constant shared by all replicas: serialises concurrent starts. */
const MIGRATION_LOCK_KEY = 4663_0001;

export interface Migration {
  version: number;
  name: string;
  sql: string;
  checksum: string;
}

/** The migrations in `control-plane/migrations`, named `NNN_description.sql`, in order. */
export function loadMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .filter((file) => /^\d+_[\w-]+\.sql$/.test(file))
    .sort()
    .map((file) => {
      const sql = readFileSync(join(dir, file), 'utf8');
      return {
        version: Number.parseInt(file, 10),
        name: file.replace(/\.sql$/, ''),
        sql,
        checksum: createHash('sha256').update(sql).digest('hex'),
      };
    });
}

/**
 * Applies the migrations not yet recorded in `schema_migrations`, each in its own transaction,
 * under an advisory lock so replicas starting together apply each once. Safe to run twice.
 * A recorded migration whose file changed stops the start: migrations are append-only.
 */
export async function migrate(db: Database, migrations = loadMigrations()): Promise<{ applied: string[] }> {
  await db.exec(`CREATE TABLE IF NOT EXISTS schema_migrations (
    version integer PRIMARY KEY,
    name text NOT NULL,
    checksum text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
  )`);
  const applied: string[] = [];
  for (const migration of migrations) {
    await db.transaction(async (tx) => {
      await tx.query('SELECT pg_advisory_xact_lock($1)', [MIGRATION_LOCK_KEY]);
      const [done] = await tx.query<{ checksum: string }>('SELECT checksum FROM schema_migrations WHERE version = $1', [migration.version]);
      if (done) {
        if (done.checksum !== migration.checksum) {
          throw new Error(`migration ${migration.name} changed after it was applied; add a new migration instead`);
        }
        return;
      }
      await tx.exec(migration.sql);
      await tx.query('INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)', [
        migration.version,
        migration.name,
        migration.checksum,
      ]);
      applied.push(migration.name);
    });
  }
  return { applied };
}

/** The start found migrations not applied while GF_MIGRATE_ON_START is false. */
export class MigrationsPendingError extends GpufarmError<'migrations_pending'> {
  constructor(readonly pending: string[]) {
    super(
      'migrations_pending',
      `the database lacks ${pending.length} migration(s) (${pending.join(', ')}); run \`gpufarm-control-plane migrate\` (node dist/main.js migrate) with the same environment, or set GF_MIGRATE_ON_START=true`,
    );
  }
}

/** The migrations not yet recorded in `schema_migrations` (all of them on an empty database). */
export async function pendingMigrations(db: Database, migrations = loadMigrations()): Promise<string[]> {
  const [table] = await db.query<{ exists: boolean }>("SELECT to_regclass('schema_migrations') IS NOT NULL AS exists");
  if (!table?.exists) return migrations.map((m) => m.name);
  const done = new Set((await db.query<{ version: number }>('SELECT version FROM schema_migrations')).map((row) => row.version));
  return migrations.filter((m) => !done.has(m.version)).map((m) => m.name);
}
