import type { Queryable } from '../db/database.js';
/**
 * A value generated once per deployment and shared by every replica through the database
 * (for example the salt that hashes client addresses for anonymous rate limits).
 */
export declare function deploymentSecret(db: Queryable, key: string): Promise<string>;
