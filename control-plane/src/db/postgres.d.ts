import { type Database } from './database.js';
/** PostgreSQL through a `pg` pool. */
export declare function openPostgres(connectionString: string, options?: {
    max?: number;
}): Database;
