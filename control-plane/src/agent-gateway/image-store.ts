import { imageCacheKey, type ImageCacheReport } from '@gpufarm/shared';
import type { Queryable } from '../db/database.js';

/**
 * The gateway's SQL for the images a machine's agent holds (`machine_images`, migration 034):
 * the only writer of that table. A report arrives only when the agent's cache changed (and in
 * the first heartbeat of a link), so each one is a single upsert and a heartbeat without one
 * writes nothing here.
 */

/** Every name of every listed image, reduced as matching compares them (`imageCacheKey`), sorted and once each. */
export function reportedImageNames(report: ImageCacheReport): string[] {
  const names = new Set<string>();
  for (const image of report.images) {
    for (const name of [...image.repoDigests, ...image.repoTags]) {
      const key = imageCacheKey(name);
      if (key !== null) names.add(key);
    }
  }
  return [...names].sort();
}

/** Replaces the machine's stored report with `report` (the whole of it: a report is never a delta). */
export async function writeImageReport(db: Queryable, machineId: string, report: ImageCacheReport): Promise<void> {
  await db.query(
    `INSERT INTO machine_images (machine_id, budget_bytes, used_bytes, omitted, image_names, layer_digests, report, reported_at)
     VALUES ($1, $2, $3, $4, $5::text[], $6::text[], $7::jsonb, now())
     ON CONFLICT (machine_id) DO UPDATE SET budget_bytes = excluded.budget_bytes, used_bytes = excluded.used_bytes, omitted = excluded.omitted,
       image_names = excluded.image_names, layer_digests = excluded.layer_digests, report = excluded.report, reported_at = excluded.reported_at`,
    [machineId, report.budgetBytes, report.usedBytes, report.omitted, reportedImageNames(report), report.layers.map((l) => l.digest), JSON.stringify(report)],
  );
}

/** Forgets the machine's report: its agent now speaks a protocol without one, so the last one would only grow stale. */
export async function deleteImageReport(db: Queryable, machineId: string): Promise<void> {
  await db.query('DELETE FROM machine_images WHERE machine_id = $1', [machineId]);
}
