import { type Database } from './database.js';
/**
 * PGlite, a real PostgreSQL compiled to WASM, in-process: the embedded default. `dataDir`
 * undefined keeps the database in memory. It serves one connection, so one process only.
 */
export declare function openPglite(dataDir: string | undefined): Promise<Database>;
