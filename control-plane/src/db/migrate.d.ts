import type { Database } from './database.js';
export interface Migration {
    version: number;
    name: string;
    sql: string;
    checksum: string;
}
/** The migrations in `control-plane/migrations`, named `NNN_description.sql`, in order. */
export declare function loadMigrations(dir?: string): Migration[];
/**
 * Applies the migrations not yet recorded in `schema_migrations`, each in its own transaction,
 * under an advisory lock so replicas starting together apply each once. Safe to run twice.
 * A recorded migration whose file changed stops the start: migrations are append-only.
 */
export declare function migrate(db: Database, migrations?: Migration[]): Promise<{
    applied: string[];
}>;
