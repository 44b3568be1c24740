import { mkdirSync } from 'node:fs';
import { PGlite, type PGliteOptions } from '@electric-sql/pglite';
import { INT8_OID, parseInt8, type Database, type SqlParam } from './database.js';

/**
 * PGlite, a real PostgreSQL compiled to WASM, in-process: the embedded default. `dataDir`
 * undefined keeps the database in memory. It serves one connection, so one process only.
 */
export async function openPglite(dataDir: string | undefined): Promise<Database> {
  if (dataDir) mkdirSync(dataDir, { recursive: true });
  return pgliteDatabase(await PGlite.create(dataDir, PGLITE_OPTIONS));
}

/** How every PGlite of ours is opened: int8 read as our `Database` reads it. */
export const PGLITE_OPTIONS = { parsers: { [INT8_OID]: parseInt8 } } satisfies PGliteOptions;

/** A PGlite opened with `PGLITE_OPTIONS` as a `Database`; closing it closes the PGlite. */
export function pgliteDatabase(db: PGlite): Database {
  const toParams = (params?: readonly SqlParam[]) => params as unknown[] | undefined;
  return {
    kind: 'pglite',
    async query<Row>(sql: string, params?: readonly SqlParam[]) {
      const result = await db.query<Row>(sql, toParams(params));
      return result.rows;
    },
    async exec(sql) {
      await db.exec(sql);
    },
    transaction(fn) {
      return db.transaction((tx) =>
        fn({
          async query<Row>(sql: string, params?: readonly SqlParam[]) {
            const result = await tx.query<Row>(sql, toParams(params));
            return result.rows;
          },
          async exec(sql: string) {
            await tx.exec(sql);
          },
        }),
      );
    },
    async listen(channel, onNotify) {
      const unlisten = await db.listen(channel, onNotify);
      return () => unlisten();
    },
    async close() {
      await db.close();
    },
  };
}
