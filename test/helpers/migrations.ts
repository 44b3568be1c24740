import type { Test } from 'tap';
import { type Database, loadMigrations } from '@gpufarm/control-plane/db';

/**
 * Checks a `migrate` run on an empty database: its output names every migration of
 * `control-plane/migrations` and `schema_migrations` records them all, in order.
 */
export async function checkEveryMigrationApplied(t: Test, db: Database, migrateOutput: string): Promise<void> {
  const names = loadMigrations().map((m) => m.name);
  for (const name of names) t.match(migrateOutput, name, `it names ${name}`);
  const recorded = await db.query<{ name: string }>('SELECT name FROM schema_migrations ORDER BY version');
  t.same(
    recorded.map((r) => r.name),
    names,
    'schema_migrations records every migration',
  );
}
