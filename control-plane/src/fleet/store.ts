import { GPU_CLASSES, REGIONS, type GpuClass } from '@gpufarm/shared';
import type { Queryable } from '../db/database.js';

/** The `gpu_classes` columns of a class, as arrays for one `unnest` upsert. */
function classColumns(classes: readonly GpuClass[]) {
  return [
    classes.map((c) => c.classId),
    classes.map((c) => c.label),
    classes.map((c) => c.model),
    classes.map((c) => c.vendor),
    classes.map((c) => c.family),
    classes.map((c) => c.vramBytes),
    classes.map((c) => c.expectedMatmulGflops),
    classes.map((c) => c.expectedMemoryBandwidthMbps),
    classes.map((c) => c.origin),
    classes.map((c) => c.architecture),
    classes.map((c) => c.figureSource),
  ];
}

const CLASS_ROWS = `SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::bigint[], $8::bigint[], $9::text[], $10::text[], $11::text[])`;
const CLASS_COLUMNS = 'class_id, label, model, vendor, family, vram_bytes, expected_matmul_gflops, expected_memory_bandwidth_mbps, origin, architecture, figure_source';

/** Upserts the shared catalogs (GPU classes, regions) into their tables; run at every start. */
export async function syncCatalog(db: Queryable): Promise<void> {
  await db.query(
    `INSERT INTO regions (key, label, region_group)
     SELECT * FROM unnest($1::text[], $2::text[], $3::text[])
     ON CONFLICT (key) DO UPDATE SET label = EXCLUDED.label, region_group = EXCLUDED.region_group`,
    [REGIONS.map((r) => r.key), REGIONS.map((r) => r.label), REGIONS.map((r) => r.group)],
  );
  await db.query(
    `INSERT INTO gpu_classes (${CLASS_COLUMNS}) ${CLASS_ROWS}
     ON CONFLICT (class_id) DO UPDATE SET label = EXCLUDED.label, model = EXCLUDED.model, vendor = EXCLUDED.vendor,
       family = EXCLUDED.family, vram_bytes = EXCLUDED.vram_bytes, expected_matmul_gflops = EXCLUDED.expected_matmul_gflops,
       expected_memory_bandwidth_mbps = EXCLUDED.expected_memory_bandwidth_mbps, origin = EXCLUDED.origin,
       architecture = EXCLUDED.architecture, figure_source = EXCLUDED.figure_source`,
    classColumns(GPU_CLASSES),
  );
}

/**
 * Adds the derived classes a machine reports that `gpu_classes` lacks (`machine_gpus` rows
 * reference them). A class already there is left as it is: the first report named it, and its
 * id is derived from the same product name and memory size. Writes nothing when all are known.
 */
export async function ensureDerivedClasses(db: Queryable, classes: readonly GpuClass[]): Promise<void> {
  const derived = [...new Map(classes.filter((c) => c.origin === 'derived').map((c) => [c.classId, c])).values()];
  if (derived.length === 0) return;
  const known = await db.query<{ class_id: string }>('SELECT class_id FROM gpu_classes WHERE class_id = ANY($1::text[])', [derived.map((c) => c.classId)]);
  const missing = derived.filter((c) => !known.some((k) => k.class_id === c.classId));
  if (missing.length === 0) return;
  await db.query(`INSERT INTO gpu_classes (${CLASS_COLUMNS}) ${CLASS_ROWS} ON CONFLICT (class_id) DO NOTHING`, classColumns(missing));
}
