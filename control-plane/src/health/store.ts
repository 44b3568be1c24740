import type { Queryable } from '../db/database.js';

/** The cheapest statement that proves the database answers on a pooled connection. */
export async function pingDatabase(db: Queryable): Promise<void> {
  await db.query('SELECT 1');
}
