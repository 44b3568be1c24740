import type { Config } from '../config.js';
import type { Database } from './database.js';
/**
 * PostgreSQL when `DATABASE_URL` is set, otherwise PGlite in `<dataDir>/db`. PGlite serves one
 * process: opening it while a local control plane runs on it is refused with what to do.
 */
export declare function openDatabase(config: Pick<Config, 'databaseUrl' | 'dataDir'>): Promise<Database>;
