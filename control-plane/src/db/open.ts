import { join } from 'node:path';
import type { Config } from '../config.js';
import { readLiveLocalState } from '../local-state.js';
import type { Database } from './database.js';
import { openPglite } from './pglite.js';
import { openPostgres } from './postgres.js';

/**
 * PostgreSQL when `DATABASE_URL` is set, otherwise PGlite in `<dataDir>/db`. PGlite serves one
 * process: opening it while a local control plane runs on it is refused with what to do.
 */
export async function openDatabase(config: Pick<Config, 'databaseUrl' | 'dataDir'>): Promise<Database> {
  if (config.databaseUrl) return openPostgres(config.databaseUrl);
  const running = readLiveLocalState(config.dataDir);
  if (running && running.pid !== process.pid) {
    throw new Error(
      `the embedded database in ${join(config.dataDir, 'db')} is in use by the control plane at ${running.url} (pid ${running.pid}); ` +
        'stop it first, or run everything against PostgreSQL with DATABASE_URL',
    );
  }
  return openPglite(join(config.dataDir, 'db'));
}
