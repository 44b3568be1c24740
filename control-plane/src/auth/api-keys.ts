import { createHash, randomBytes } from 'node:crypto';
import type { Environment } from '@gpufarm/shared';
import { z } from 'zod';

/** `gf_live_` or `gf_test_`, then 32 random bytes as base64url (43 characters). */
const KEY_FORMAT = /^gf_(live|test)_([A-Za-z0-9_-]{43})$/;

export type KeyEnvironment = 'live' | 'test';

/** mainnet takes live keys only; testnet and local take test keys only. */
export function keyEnvironmentFor(environment: Environment): KeyEnvironment {
  return environment === 'mainnet' ? 'live' : 'test';
}

export function generateApiKey(environment: KeyEnvironment): string {
  return `gf_${environment}_${randomBytes(32).toString('base64url')}`;
}

export function hashApiKey(key: string): string {
  return createHash('sha256').update(key).digest('hex');
}

/** The key's environment when it is well formed, otherwise null. */
export function parseApiKey(key: string): { environment: KeyEnvironment } | null {
  const match = KEY_FORMAT.exec(key);
  return match ? { environment: match[1] as KeyEnvironment } : null;
}

/** `:id` of a key's routes (the admin's and the dashboard's). */
export const apiKeyParams = z.object({ id: z.string().regex(/^key_[0-9a-z]{26}$/, 'is not an API key id') });
