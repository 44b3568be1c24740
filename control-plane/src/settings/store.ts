import { randomBytes } from 'node:crypto';
import type { Queryable } from '../db/database.js';

/**
 * A value generated once per deployment and shared by every replica through the database
 * (for example the salt that hashes client addresses for anonymous rate limits).
 */
export async function deploymentSecret(db: Queryable, key: string): Promise<string> {
  await db.query('INSERT INTO service_settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING', [key, randomBytes(32).toString('hex')]);
  const [row] = await db.query<{ value: string }>('SELECT value FROM service_settings WHERE key = $1', [key]);
  if (!row) throw new Error(`setting ${key} missing right after it was written`);
  return row.value;
}
