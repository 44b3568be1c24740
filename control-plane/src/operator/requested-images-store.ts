import type { Queryable } from '../db/database.js';

/**
 * The SQL of the operators' most requested images: the images of the market's recent jobs and
 * who holds them (`machine_images`, written by the gateway's image store).
 */

/** One image reference as jobs asked for it (`spec.image`, `spec.imageDigest`), with how many jobs did. */
export interface RequestedImageRow {
  image: string;
  digest: string | null;
  jobs: number;
  last: Date;
}

/**
 * The image references of the jobs created in the last `days` that were funded (a job left
 * CREATED or EXPIRED asked for nothing to run), most asked first, at most `limit`.
 */
export async function recentJobImages(db: Queryable, params: { days: number; limit: number }): Promise<RequestedImageRow[]> {
  return db.query<RequestedImageRow>(
    `SELECT spec ->> 'image' AS image, spec ->> 'imageDigest' AS digest, count(*)::int AS jobs, max(created_at) AS last
     FROM jobs WHERE created_at > now() - make_interval(days => $1) AND status NOT IN ('CREATED', 'EXPIRED')
     GROUP BY 1, 2 ORDER BY 3 DESC, 1 LIMIT $2`,
    [params.days, params.limit],
  );
}

/** For each image key (`imageCacheKey`): the online machines holding it, and those of `farmIds` (any state). */
export async function holdersOf(db: Queryable, params: { keys: readonly string[]; farmIds: readonly string[] }): Promise<Map<string, { market: number; yours: number }>> {
  if (params.keys.length === 0) return new Map();
  const rows = await db.query<{ key: string; market: number; yours: number }>(
    `SELECT k.key, count(*) FILTER (WHERE m.status = 'online')::int AS market, count(*) FILTER (WHERE m.farm_id = ANY($2::text[]))::int AS yours
     FROM unnest($1::text[]) AS k(key)
     JOIN machine_images i ON i.image_names @> ARRAY[k.key]
     JOIN machines m ON m.id = i.machine_id
     GROUP BY k.key`,
    [params.keys, params.farmIds],
  );
  return new Map(rows.map((r) => [r.key, { market: r.market, yours: r.yours }]));
}
