import { randomBytes } from 'node:crypto';
import { JOB_SPEC_DEFAULTS, type JobCreateRequest } from '@gpufarm/shared';
import type { Queryable } from '../db/database.js';
import { newId, randomId } from '../ids.js';

/**
 * Factories that insert funded, QUEUED jobs directly (no API, no chain), for the matcher's
 * tests and its bench. The stored spec has the server's defaults written in, as
 * `POST /v1/jobs` stores it.
 */

export interface QueuedJobInput {
  /** `gpu` and anything else of the creation request; default image `busybox`. */
  spec?: Partial<JobCreateRequest>;
  /** Default 1. */
  gpuCount?: number;
  /** Micro-USD per GPU-hour. Default USD 100 (above every seeded price). */
  capMicroUsd?: number;
  /** Default `custom`. */
  workloadType?: string;
  /** Set: the job has a funding hold (it must never be matched). */
  fundingHold?: string | null;
  /** Default `QUEUED`. */
  status?: 'QUEUED' | 'FUNDED' | 'CREATED' | 'MATCHING';
  matchedClasses?: string[];
}

/** Inserts an account and an API key to own test jobs; returns their ids. */
export async function createJobOwner(db: Queryable): Promise<{ accountId: string; apiKeyId: string }> {
  const accountId = newId('acct');
  const apiKeyId = newId('key');
  await db.query('INSERT INTO accounts (id, wallet_address) VALUES ($1, $2)', [accountId, `0x${randomBytes(20).toString('hex')}`]);
  await db.query(
    `INSERT INTO api_keys (id, account_id, key_hash, environment, last_four, scopes) VALUES ($1, $2, $3, 'test', 'abcd', ARRAY['jobs:read'])`,
    [apiKeyId, accountId, randomBytes(32).toString('hex')],
  );
  return { accountId, apiKeyId };
}

/**
 * Inserts jobs in one statement, `seq` in the order given (rows are produced in array order); returns their ids.
 */
export async function createQueuedJobs(db: Queryable, owner: { accountId: string; apiKeyId: string }, inputs: readonly QueuedJobInput[]): Promise<string[]> {
  const rows = inputs.map((input) => {
    const gpuCount = input.gpuCount ?? input.spec?.gpu?.count ?? 1;
    const cap = input.capMicroUsd ?? 100_000_000;
    const spec = {
      image: 'busybox',
      workloadType: input.workloadType ?? JOB_SPEC_DEFAULTS.workloadType,
      maxRuntimeSeconds: JOB_SPEC_DEFAULTS.maxRuntimeSeconds,
      networkPolicy: JOB_SPEC_DEFAULTS.networkPolicy,
      outputRules: JOB_SPEC_DEFAULTS.outputRules,
      paymentToken: 'eth',
      maxPricePerGpuHourMicroUsd: cap,
      ...input.spec,
      gpu: { ...input.spec?.gpu, count: gpuCount },
    };
    return {
      id: randomId('job'),
      status: input.status ?? 'QUEUED',
      spec,
      gpu_count: gpuCount,
      workload_type: spec.workloadType,
      max_runtime_seconds: spec.maxRuntimeSeconds,
      cap,
      matched_classes: input.matchedClasses ?? [],
      funding_hold: input.fundingHold ?? null,
    };
  });
  await db.query(
    `INSERT INTO jobs (id, account_id, api_key_id, status, spec, spec_hash, gpu_count, workload_type, max_runtime_seconds,
       max_price_per_gpu_hour_micro_usd, min_billing_seconds, platform_fee_bps, estimate_low_micro_usd, estimate_high_micro_usd,
       max_cost_micro_usd, matched_classes, payment_kind, payment_token, payment_symbol, payment_decimals, max_payment, escrow_job_key,
       funding_hold)
     SELECT x.id, $2, $3, x.status, x.spec, md5(x.spec::text), x.gpu_count, x.workload_type, x.max_runtime_seconds,
       x.cap, 60, 1000, 0, 0, 0, x.matched_classes, 'eth', '0x0000000000000000000000000000000000000000', 'ETH', 18, 0,
       '0x' || md5(x.id) || md5(x.id), x.funding_hold
     FROM jsonb_to_recordset($1::jsonb) AS x(id text, status text, spec jsonb, gpu_count int, workload_type text,
       max_runtime_seconds int, cap bigint, matched_classes text[], funding_hold text)`,
    [JSON.stringify(rows), owner.accountId, owner.apiKeyId],
  );
  return rows.map((r) => r.id);
}
