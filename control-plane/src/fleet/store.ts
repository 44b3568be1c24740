import { GPU_CLASSES, REGIONS } from '@gpufarm/shared';
import type { Queryable } from '../db/database.js';

/** Upserts the shared catalogs (GPU classes, regions) into their tables; run at every start. */
export async function syncCatalog(db: Queryable): Promise<void> {
  await db.query(
    `INSERT INTO regions (key, label, region_group)
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
     ON CONFLICT (key) DO UPDATE SET label = EXCLUDED.label, region_group = EXCLUDED.region_group`,
    [REGIONS.map((r) => r.key), REGIONS.map((r) => r.label), REGIONS.map((r) => r.group)],
  );
  await db.query(
    `INSERT INTO gpu_classes (class_id, label, model, vendor, family, vram_bytes, expected_matmul_gflops, expected_memory_bandwidth_mbps)
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[], $8::bigint[])
     ON CONFLICT (class_id) DO UPDATE SET label = EXCLUDED.label, model = EXCLUDED.model, vendor = EXCLUDED.vendor,
       family = EXCLUDED.family, vram_bytes = EXCLUDED.vram_bytes, expected_matmul_gflops = EXCLUDED.expected_matmul_gflops,
       expected_memory_bandwidth_mbps = EXCLUDED.expected_memory_bandwidth_mbps`,
    [
      GPU_CLASSES.map((c) => c.classId),
      GPU_CLASSES.map((c) => c.label),
      GPU_CLASSES.map((c) => c.model),
      GPU_CLASSES.map((c) => c.vendor),
      GPU_CLASSES.map((c) => c.family),
      GPU_CLASSES.map((c) => c.vramBytes),
      GPU_CLASSES.map((c) => c.expectedMatmulGflops),
      GPU_CLASSES.map((c) => c.expectedMemoryBandwidthMbps),
    ],
  );
}
