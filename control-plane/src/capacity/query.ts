import {
  ApiError,
  BENCHMARK_TIERS,
  fieldDetail,
  REGIONS,
  WORKLOAD_TYPES,
  gpuClassIds,
  isGpuClassIdShape,
  parseUsdToMicroUsd,
  regionGroups,
  regionKeysFor,
  type BenchmarkTier,
  type WorkloadType,
} from '@gpufarm/shared';
import { z } from 'zod';
import { decodeCursor, encodeCursor } from '../http/cursor.js';
import { intParam, numericParam, parseQuery } from '../http/parse.js';
import { VERSION_PARAMETER, versionRank } from './versions.js';

/**
 * The query of `GET /v1/capacity`: parsing and validating its parameters, and the keyset
 * cursor. Pure: no I/O.
 */

/** Sort orders. Every one ends with the offer id, ascending, so the order is total. */
export const CAPACITY_SORTS = ['available', 'price_asc', 'price_desc', 'vram', 'uptime', 'count'] as const;
export type CapacitySort = (typeof CAPACITY_SORTS)[number];
export const DEFAULT_CAPACITY_SORT: CapacitySort = 'price_asc';
export const DEFAULT_CAPACITY_LIMIT = 200;
export const MAX_CAPACITY_LIMIT = 500;

/** Where a page starts: after the offer with this sort key and id. */
export interface CapacityCursor {
  sort: CapacitySort;
  key: number;
  id: string;
}

/** A validated capacity query. Absent filters are `undefined`. */
export interface CapacityQuery {
  /** GPU class id. */
  model?: string;
  /** Minimum memory per GPU, bytes (the `minVram` GB times 2^30, rounded up). */
  minVramBytes?: number;
  /** Highest price per GPU-hour, micro-USD. */
  maxPriceMicroUsd?: number;
  /** Farm slug; an unknown slug matches nothing. */
  farm?: string;
  /** Region keys selected by the `region` key or group. */
  regionKeys?: readonly string[];
  /** Minimum 30-day uptime in hundredths of a percent (`99.5` is 9950). */
  minUptimeCentiPct?: number;
  workload?: WorkloadType;
  /** Minimum CUDA version as a rank from `versionRank`. */
  minCudaRank?: number;
  /** `available`: only machines with at least one idle GPU. */
  availability: 'available' | 'all';
  /** Minimum benchmark tier (S > A > B > C). */
  minTier?: BenchmarkTier;
  /** `proven=true`: only machines that proved their GPUs with a GPU challenge. Absent (or `proven=false`): every machine. */
  provenOnly?: true;
  sort: CapacitySort;
  limit: number;
  after?: CapacityCursor;
}

/** The default query: every offer, cheapest first. */
export const DEFAULT_CAPACITY_QUERY: CapacityQuery = Object.freeze({ availability: 'all', sort: DEFAULT_CAPACITY_SORT, limit: DEFAULT_CAPACITY_LIMIT });

const OFFER_ID = /^off_[0-9a-f]{16}$/;
const cursorSchema = z.strictObject({
  s: z.enum(CAPACITY_SORTS),
  k: z.int().min(0),
  i: z.string().regex(OFFER_ID),
});

export function encodeCapacityCursor(cursor: CapacityCursor): string {
  return encodeCursor({ s: cursor.sort, k: cursor.key, i: cursor.id });
}

/** Reads a cursor back; a malformed one, or one issued for another sort, is 400 `invalid_request`. */
export function decodeCapacityCursor(text: string, sort: CapacitySort): CapacityCursor {
  const raw = decodeCursor(text, cursorSchema);
  if (raw.s !== sort) {
    throw new ApiError('invalid_request', `cursor belongs to sort=${raw.s}, not sort=${sort}; keep the sort while paging, or start over without cursor.`, {
      details: [fieldDetail('cursor', `was issued for sort=${raw.s}, not sort=${sort}`, { subject: true })],
    });
  }
  return { sort: raw.s, key: raw.k, id: raw.i };
}

/** Exact decimal digits → an integer scaled by 10^decimals, rounded up (no floats). */
function scaledCeil(intPart: string, fracPart: string, decimals: number): number {
  const kept = fracPart.slice(0, decimals).padEnd(decimals, '0');
  const roundUp = /[1-9]/.test(fracPart.slice(decimals)) ? 1 : 0;
  return Number(intPart) * 10 ** decimals + Number(kept) + roundUp;
}

const DECIMAL = /^(\d{1,6})(?:\.(\d{1,12}))?$/;

const GiB = 2n ** 30n;

/**
 * GB per GPU as the catalog and vendors count them (GiB: a request for 24 fits a 24 GB card),
 * the same unit as a job's `gpu.minimumVramGb`; exact, rounded up to whole bytes.
 */
const minVramParam = z
  .string()
  .regex(DECIMAL, 'must be a number of GB per GPU, such as 24 or 40.5')
  .transform((text) => {
    const [, whole = '0', frac = ''] = DECIMAL.exec(text) ?? [];
    const scale = 10n ** BigInt(frac.length);
    const bytesTimesScale = (BigInt(whole) * scale + BigInt(frac || '0')) * GiB;
    return Number((bytesTimesScale + scale - 1n) / scale);
  });

const maxPriceParam = z.string().transform((text, ctx) => {
  const parsed = parseUsdToMicroUsd(text);
  if (!parsed.ok) {
    ctx.addIssue({ code: 'custom', message: `must be a USD amount per GPU-hour such as 2.5; it ${parsed.message}` });
    return z.NEVER;
  }
  return parsed.microUsd;
});

const minUptimeParam = z
  .string()
  .regex(DECIMAL, 'must be a percentage from 0 to 100, such as 99.5')
  .transform((text, ctx) => {
    const [, whole = '0', frac = ''] = DECIMAL.exec(text) ?? [];
    const centi = scaledCeil(whole, frac, 2);
    if (centi > 10_000) {
      ctx.addIssue({ code: 'custom', message: 'must be a percentage from 0 to 100, such as 99.5' });
      return z.NEVER;
    }
    return centi;
  });

/** The message for a `model` that names no class; derived classes exist once a farm brings such a GPU. */
export const MODEL_PARAMETER_MESSAGE = `must be a GPU class id: ${gpuClassIds.join(', ')}, or a derived class id (derived-…) that GET /v1/pricing lists`;
const regionChoices = [...REGIONS.map((r) => r.key), ...regionGroups];

export const querySchema = z.strictObject({
  model: z.string().refine((id) => isGpuClassIdShape(id), MODEL_PARAMETER_MESSAGE).optional(),
  minVram: numericParam(minVramParam, { type: 'number', minimum: 0, exclusiveMaximum: 1_000_000, description: 'Minimum VRAM per GPU in GB as the catalog counts them (GiB: 24 matches a 24 GB card); a plain decimal, at most 12 decimal places' }).optional(),
  maxPrice: numericParam(maxPriceParam, { type: 'number', minimum: 0, maximum: Number.MAX_SAFE_INTEGER / 1_000_000, description: 'Highest USD per GPU-hour; a plain decimal, at most 6 decimal places' }).optional(),
  farm: z.string().max(63, 'must be a farm slug').optional(),
  region: z
    .string()
    .transform((value, ctx) => {
      const keys = regionKeysFor(value);
      if (keys.length === 0) {
        ctx.addIssue({ code: 'custom', message: `must be a region key or group: ${regionChoices.join(', ')}` });
        return z.NEVER;
      }
      return keys;
    })
    .optional(),
  minUptime: numericParam(minUptimeParam, { type: 'number', minimum: 0, maximum: 100, description: 'Minimum 30-day uptime percent' }).optional(),
  workload: z.enum(WORKLOAD_TYPES, `must be one of ${WORKLOAD_TYPES.join(', ')}`).optional(),
  cuda: z.string().regex(VERSION_PARAMETER, 'must be a CUDA version such as 12.4').transform((v) => versionRank(v)).optional(),
  availability: z.enum(['available', 'all'], 'must be available or all').default('all'),
  tier: z.enum(BENCHMARK_TIERS, `must be one of ${BENCHMARK_TIERS.join(', ')}`).optional(),
  proven: z.enum(['true', 'false'], 'must be true or false').optional(),
  sort: z.enum(CAPACITY_SORTS, `must be one of ${CAPACITY_SORTS.join(', ')}`).default(DEFAULT_CAPACITY_SORT),
  limit: intParam(1, MAX_CAPACITY_LIMIT, DEFAULT_CAPACITY_LIMIT),
  cursor: z.string().max(512, 'is not a cursor this endpoint issued').optional(),
});

/**
 * Parses the raw query string object of `GET /v1/capacity`. Unknown, repeated and malformed
 * parameters, a cursor from another sort or a garbled one: 400 `invalid_request` with one
 * detail per parameter.
 */
export function parseCapacityQuery(raw: unknown): CapacityQuery {
  const q = parseQuery(querySchema, raw, 'GET /v1/capacity');
  const query: CapacityQuery = { availability: q.availability, sort: q.sort, limit: q.limit };
  if (q.model !== undefined) query.model = q.model;
  if (q.minVram !== undefined) query.minVramBytes = q.minVram;
  if (q.maxPrice !== undefined) query.maxPriceMicroUsd = q.maxPrice;
  if (q.farm !== undefined) query.farm = q.farm;
  if (q.region !== undefined) query.regionKeys = q.region;
  if (q.minUptime !== undefined) query.minUptimeCentiPct = q.minUptime;
  if (q.workload !== undefined) query.workload = q.workload;
  if (q.cuda !== undefined) query.minCudaRank = q.cuda;
  if (q.tier !== undefined) query.minTier = q.tier;
  if (q.proven === 'true') query.provenOnly = true;
  if (q.cursor !== undefined) query.after = decodeCapacityCursor(q.cursor, q.sort);
  return query;
}
