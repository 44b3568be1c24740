import type { RouteRateBucket } from './route-config.js';

export interface Limit {
  name: string;
  max: number;
  windowMs: number;
}

/** The spec's Limits table, and our bucket for input uploads (the spec names none). */
export const LIMITS = {
  perKey: { name: 'key', max: 300, windowMs: 60_000 },
  anonymous: { name: 'anonymous', max: 60, windowMs: 60_000 },
  jobs_create: { name: 'jobs_create', max: 30, windowMs: 60_000 },
  fund_confirm: { name: 'fund_confirm', max: 30, windowMs: 60_000 },
  artifact_download: { name: 'artifact_download', max: 120, windowMs: 60_000 },
  input_upload: { name: 'input_upload', max: 30, windowMs: 60_000 },
} as const satisfies Record<'perKey' | 'anonymous' | RouteRateBucket, Limit>;

/**
 * An account's ceiling is this many times a key's limit, in every bucket: the spec's limits stay
 * per key, and more keys or sessions do not multiply what one account may spend
 * (docs/decisions.md, "Per-account limits").
 */
export const ACCOUNT_CEILING_FACTOR = 2;

/** The account-wide ceiling of a per-key limit (`account` for the key's own bucket). */
export function accountCeiling(limit: Limit): Limit {
  return { name: limit === LIMITS.perKey ? 'account' : limit.name, max: limit.max * ACCOUNT_CEILING_FACTOR, windowMs: limit.windowMs };
}

/**
 * A machine token's calls (`/agent/v1/…` over HTTP: input downloads, output uploads and their
 * plans, the `gf-agent` commands): a busy 8-GPU machine makes a few per job, far below this.
 */
export const MACHINE_LIMIT: Limit = { name: 'machine', max: 600, windowMs: 60_000 };
