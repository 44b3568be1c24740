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
