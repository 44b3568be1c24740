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

/** A setting's value, or null when it was never written. */
export async function readSetting(db: Queryable, key: string): Promise<string | null> {
  const [row] = await db.query<{ value: string }>('SELECT value FROM service_settings WHERE key = $1', [key]);
  return row?.value ?? null;
}

/** Writes a setting, replacing its value. */
export async function writeSetting(db: Queryable, key: string, value: string): Promise<void> {
  await db.query('INSERT INTO service_settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value', [key, value]);
}
