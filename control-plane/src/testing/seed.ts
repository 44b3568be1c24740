import { findGpuClass, REGIONS, type BenchmarkTier, type WorkloadType } from '@gpufarm/shared';
import type { Database, Queryable } from '../db/database.js';
import { newId } from '../ids.js';
import { insertUptimeDays, type MachineStatus, type UptimeTarget } from './factories.js';

/**
 * A realistic simulated fleet (`simulated: true`) for local runs, demos and benchmarks:
 * consumer, workstation and datacenter farms over every region, market-like prices with a
 * spread, some GPUs busy, a few machines offline or unpriced, 30-day uptimes between 85 and
 * 100 %. The content is a pure function of `machines` and `seed` (ids are fresh each run);
 * four bulk statements insert it, in one transaction.
 */

export interface SeedOptions {
  machines: number;
  /** PRNG seed; the same seed gives the same fleet. Default 4663. */
  seed?: number;
  /** The clock the creation times and uptimes are relative to. */
  now?: Date;
}

export interface SeedResult {
  farms: number;
  machines: number;
  gpus: number;
  busyGpus: number;
  /** Machines not online (offline, unhealthy, draining, disabled). */
  offline: number;
  /** Online machines without a price. */
  unpriced: number;
  uptimeDays: number;
  regions: number;
}

/** mulberry32: a small, fast, deterministic PRNG; returns floats in [0, 1). */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

type Random = () => number;
type Weighted<T> = readonly (readonly [T, number])[];

function pick<T>(random: Random, items: Weighted<T>): T {
  const total = items.reduce((sum, [, w]) => sum + w, 0);
  let r = random() * total;
  for (const [item, w] of items) {
    r -= w;
    if (r < 0) return item;
  }
  return items[items.length - 1]![0];
}

function pickDistinct<T>(random: Random, items: Weighted<T>, count: number): T[] {
  const left = [...items];
  const out: T[] = [];
  while (out.length < count && left.length > 0) {
    const item = pick(random, left);
    out.push(item);
    left.splice(left.findIndex(([i]) => i === item), 1);
  }
  return out;
}

const between = (random: Random, lo: number, hi: number) => lo + (hi - lo) * random();
const intBetween = (random: Random, lo: number, hi: number) => lo + Math.floor(random() * (hi - lo + 1));

type FarmKind = 'consumer' | 'workstation' | 'datacenter';

/** Market-like prices per GPU-hour in USD (low, high) and the GPU counts hosts come with. */
const CLASS_PROFILES: Record<string, { usd: [number, number]; gpus: Weighted<number> }> = {
  'h100-80gb-sxm': { usd: [2.0, 3.2], gpus: [[8, 9], [4, 1]] },
  'h100-80gb-pcie': { usd: [1.8, 2.6], gpus: [[1, 2], [2, 2], [4, 3], [8, 3]] },
  'a100-80gb': { usd: [1.1, 1.8], gpus: [[8, 7], [4, 3]] },
  'a100-40gb': { usd: [0.8, 1.3], gpus: [[8, 6], [4, 4]] },
  'l40s-48gb': { usd: [0.7, 1.1], gpus: [[2, 2], [4, 4], [8, 4]] },
  'l4-24gb': { usd: [0.35, 0.6], gpus: [[1, 3], [2, 3], [4, 2], [8, 2]] },
  'a10-24gb': { usd: [0.4, 0.75], gpus: [[1, 4], [2, 3], [4, 3]] },
  'rtx-6000-ada-48gb': { usd: [0.7, 1.0], gpus: [[1, 3], [2, 3], [4, 4]] },
  'rtx-a6000-48gb': { usd: [0.45, 0.8], gpus: [[1, 3], [2, 4], [4, 3]] },
  'rtx-4090-24gb': { usd: [0.3, 0.6], gpus: [[1, 4], [2, 4], [4, 3], [8, 2]] },
  'rtx-3090-24gb': { usd: [0.15, 0.3], gpus: [[1, 4], [2, 4], [4, 3], [8, 1]] },
  'rtx-4080-16gb': { usd: [0.18, 0.32], gpus: [[1, 5], [2, 3], [4, 2]] },
  'rtx-3080-10gb': { usd: [0.08, 0.18], gpus: [[1, 5], [2, 3], [4, 2]] },
};

const FARM_KINDS: Weighted<FarmKind> = [['consumer', 45], ['datacenter', 35], ['workstation', 20]];
const CLASSES_BY_KIND: Record<FarmKind, Weighted<string>> = {
  consumer: [['rtx-4090-24gb', 5], ['rtx-3090-24gb', 4], ['rtx-4080-16gb', 3], ['rtx-3080-10gb', 2]],
  datacenter: [['h100-80gb-sxm', 4], ['h100-80gb-pcie', 2], ['a100-80gb', 4], ['a100-40gb', 2], ['l40s-48gb', 3], ['l4-24gb', 3], ['a10-24gb', 2]],
  workstation: [['rtx-6000-ada-48gb', 3], ['rtx-a6000-48gb', 3], ['rtx-4090-24gb', 2], ['l40s-48gb', 1]],
};

/** Weighted toward the big markets. */
const REGION_WEIGHTS: Weighted<string> = [
  ['us-east', 22], ['us-west', 18], ['europe-west', 16], ['us-central', 8], ['europe-central', 8], ['asia-east', 6],
  ['canada', 5], ['europe-north', 5], ['asia-southeast', 5], ['south-america', 4], ['oceania', 3],
];
const LEGAL_FORMS: Record<string, readonly string[]> = {
  'us-east': ['LLC', 'Inc.'], 'us-west': ['LLC', 'Inc.'], 'us-central': ['LLC', 'Inc.'], canada: ['Inc.', 'Ltd.'],
  'europe-west': ['Ltd', 'B.V.', 'SAS'], 'europe-central': ['GmbH', 'sp. z o.o.'], 'europe-north': ['AB', 'Oy', 'AS'],
  'asia-east': ['K.K.', 'Co., Ltd.'], 'asia-southeast': ['Pte. Ltd.'], oceania: ['Pty Ltd'], 'south-america': ['Ltda.', 'S.A.'],
};

const NAME_PREFIXES = [
  'northwind', 'bluepeak', 'ironbridge', 'silverline', 'redwood', 'coldstream', 'brightforge', 'harborlight', 'stonefield', 'clearwater',
  'highland', 'lakeside', 'tidewater', 'granite', 'aurora', 'cedar', 'summit', 'riverbend', 'oakridge', 'blackrock',
  'sunvale', 'frostline', 'meridian', 'polaris', 'keystone', 'driftwood', 'emberfall', 'westgate', 'kestrel', 'larkspur',
];
const NAME_SUFFIXES = ['compute', 'gpu', 'labs', 'cloud', 'systems', 'datacenters', 'render', 'ai', 'hpc', 'grid'];

/** CUDA versions with the driver branches that ship them. */
const CUDA_DRIVERS: readonly (readonly [string, readonly string[]])[] = [
  ['12.2', ['535.104.05', '535.129.03', '535.183.01']],
  ['12.3', ['545.23.08', '545.29.06']],
  ['12.4', ['550.54.15', '550.90.07', '550.127.05']],
  ['12.5', ['555.42.06', '555.58.02']],
  ['12.6', ['560.35.03', '560.28.03']],
  ['12.8', ['570.86.10', '570.124.06']],
];
/** A farm's usual benchmark tier: machines of one farm are alike, a few score a tier lower. */
const FARM_TIERS: Weighted<BenchmarkTier> = [['S', 10], ['A', 45], ['B', 35], ['C', 10]];
const DATACENTER_FARM_TIERS: Weighted<BenchmarkTier> = [['S', 20], ['A', 50], ['B', 25], ['C', 5]];
const LOWER_TIER: Record<BenchmarkTier, BenchmarkTier> = { S: 'A', A: 'B', B: 'C', C: 'C' };
const NOT_ONLINE: Weighted<MachineStatus> = [['offline', 6], ['unhealthy', 2], ['draining', 1], ['disabled', 1]];
const WORKLOAD_SETS: Weighted<WorkloadType[]> = [
  [['inference', 'image_generation', 'video', 'rendering', 'batch', 'development', 'custom'], 3],
  [['inference', 'fine_tuning', 'batch', 'development'], 2],
  [['inference', 'image_generation', 'rendering'], 2],
  [['rendering', 'video', 'image_generation'], 1],
];

interface FarmPlan {
  id: string;
  slug: string;
  name: string;
  provider: string;
  kind: FarmKind;
  classes: { classId: string; priceUsd: number }[];
  sites: string[];
  minBillingSeconds: number;
  cudaIndex: number;
  workloads: WorkloadType[] | null;
  tier: BenchmarkTier;
  weight: number;
}

const titleCase = (slug: string) => slug.split('-').map((w) => (w === 'ai' || w === 'hpc' || w === 'gpu' ? w.toUpperCase() : w.charAt(0).toUpperCase() + w.slice(1))).join(' ');

function planFarms(random: Random, count: number): FarmPlan[] {
  // Every prefix/suffix pair, shuffled: distinct names for up to 300 farms, then numbered.
  const names = NAME_PREFIXES.flatMap((p) => NAME_SUFFIXES.map((s) => `${p}-${s}`));
  for (let i = names.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [names[i], names[j]] = [names[j]!, names[i]!];
  }
  const farms: FarmPlan[] = [];
  for (let i = 0; i < count; i++) {
    const slug = i < names.length ? names[i]! : `${names[i % names.length]!}-${Math.floor(i / names.length) + 1}`;
    // The first three farms are one of each kind, so small fleets still show all three.
    const kind: FarmKind = i < 3 ? (['consumer', 'datacenter', 'workstation'] as const)[i]! : pick(random, FARM_KINDS);
    const classCount = kind === 'workstation' ? intBetween(random, 1, 2) : pick(random, [[1, 4], [2, 4], [3, 2]]);
    const classes = pickDistinct(random, CLASSES_BY_KIND[kind], classCount).map((classId) => {
      const [lo, hi] = CLASS_PROFILES[classId]!.usd;
      return { classId, priceUsd: between(random, lo, hi) };
    });
    const sites = pickDistinct(random, REGION_WEIGHTS, pick(random, [[1, 6], [2, 3], [3, 1]]));
    const legal = LEGAL_FORMS[sites[0]!] ?? ['Ltd'];
    const name = titleCase(slug);
    farms.push({
      id: newId('farm'),
      slug,
      name,
      provider: `${name} ${legal[Math.floor(random() * legal.length)]!}`,
      kind,
      classes,
      sites,
      minBillingSeconds: pick(random, kind === 'datacenter' ? [[60, 3], [120, 2], [300, 3]] : [[60, 6], [120, 2], [300, 1]]),
      cudaIndex: intBetween(random, 0, CUDA_DRIVERS.length - 1),
      workloads: random() < 0.7 ? null : pick(random, WORKLOAD_SETS),
      tier: pick(random, kind === 'datacenter' ? DATACENTER_FARM_TIERS : FARM_TIERS),
      weight: 0.25 + random() * random() * 3,
    });
  }
  // Every region gets a site somewhere.
  const used = new Set(farms.flatMap((f) => f.sites));
  let next = 0;
  for (const region of REGIONS) {
    if (used.has(region.key)) continue;
    farms[next % farms.length]!.sites.push(region.key);
    next++;
  }
  return farms;
}

/** Splits `total` machines over the farms by weight (largest remainder), at least one each when possible. */
function machinesPerFarm(farms: readonly FarmPlan[], total: number): number[] {
  const base = total >= farms.length ? 1 : 0;
  const rest = total - base * farms.length;
  const weightSum = farms.reduce((s, f) => s + f.weight, 0);
  const exact = farms.map((f) => (rest * f.weight) / weightSum);
  const counts = exact.map((x) => Math.floor(x));
  let left = rest - counts.reduce((s, c) => s + c, 0);
  const order = exact.map((x, i) => [x - Math.floor(x), i] as const).sort((a, b) => b[0] - a[0] || a[1] - b[1]);
  for (const [, i] of order) {
    if (left === 0) break;
    counts[i]! += 1;
    left--;
  }
  return counts.map((c) => c + base);
}

/** Inserts a simulated fleet of `options.machines` machines and returns what it inserted. */
export async function seedFleet(db: Database, options: SeedOptions): Promise<SeedResult> {
  const total = options.machines;
  if (!Number.isInteger(total) || total < 0 || total > 1_000_000) throw new RangeError('machines must be an integer from 0 to 1000000');
  const random = mulberry32(options.seed ?? 4663);
  const now = options.now ?? new Date();
  const farms = planFarms(random, Math.max(3, Math.round(total / 40)));
  const counts = machinesPerFarm(farms, total);

  const m = {
    id: [] as string[], farmId: [] as string[], region: [] as string[], status: [] as string[], price: [] as (number | null)[],
    minBilling: [] as number[], tier: [] as (string | null)[], cuda: [] as string[], driver: [] as string[], workloads: [] as (string | null)[],
    cpu: [] as number[], ram: [] as number[], disk: [] as number[], heartbeat: [] as (string | null)[], created: [] as string[],
    classId: [] as string[], gpus: [] as number[], busy: [] as number[], vram: [] as number[],
  };
  const uptime: UptimeTarget[] = [];
  const result: SeedResult = { farms: farms.length, machines: total, gpus: 0, busyGpus: 0, offline: 0, unpriced: 0, uptimeDays: 0, regions: 0 };
  const regionsUsed = new Set<string>();

  farms.forEach((farm, f) => {
    for (let k = 0; k < counts[f]!; k++) {
      const site = k < farm.sites.length ? farm.sites[k]! : pick(random, farm.sites.map((s, i) => [s, i === 0 ? 3 : 1] as const));
      const cls = pick(random, farm.classes.map((c, i) => [c, i === 0 ? 3 : 2] as const));
      const gpuClass = findGpuClass(cls.classId)!;
      const gpus = pick(random, CLASS_PROFILES[cls.classId]!.gpus);
      const busy = random() < 0.55 ? 0 : intBetween(random, 1, gpus);
      const notOnline = random() < 0.05;
      const status = notOnline ? pick(random, NOT_ONLINE) : 'online';
      const unpriced = !notOnline && random() < 0.03;
      // Prices vary a few percent around the farm's price, in whole tenths of a cent.
      const priceMicro = Math.round((cls.priceUsd * (0.96 + 0.08 * random()) * 1_000_000) / 1000) * 1000;
      const cudaIndex = Math.min(CUDA_DRIVERS.length - 1, farm.cudaIndex + (random() < 0.25 ? 1 : 0));
      const [cuda, drivers] = CUDA_DRIVERS[cudaIndex]!;
      const ageDays = random() < 0.08 ? between(random, 1, 29) : between(random, 30, 400);
      const createdAt = new Date(now.getTime() - Math.round(ageDays * 86_400_000));
      const id = newId('mach');

      m.id.push(id);
      m.farmId.push(farm.id);
      m.region.push(site);
      m.status.push(status);
      m.price.push(unpriced ? null : priceMicro);
      m.minBilling.push(farm.minBillingSeconds);
      // A few machines score a tier lower than their farm; one in a hundred has no benchmark yet.
      const tierRoll = random();
      m.tier.push(tierRoll < 0.01 ? null : tierRoll < 0.1 ? LOWER_TIER[farm.tier] : farm.tier);
      m.cuda.push(cuda);
      m.driver.push(drivers[Math.floor(random() * drivers.length)]!);
      m.workloads.push(farm.workloads === null ? null : `{${farm.workloads.join(',')}}`);
      m.cpu.push(gpus * pick(random, [[8, 2], [12, 1], [16, 2]]));
      m.ram.push(gpus * pick(random, [[32, 1], [64, 3], [128, 2]]) * 1024 ** 3);
      m.disk.push(Math.round(between(random, 200, 4000)) * 1024 ** 3);
      m.heartbeat.push(status === 'online' ? new Date(now.getTime() - Math.round(random() * 20_000)).toISOString() : null);
      m.created.push(createdAt.toISOString());
      m.classId.push(gpuClass.classId);
      m.gpus.push(gpus);
      m.busy.push(status === 'online' ? busy : 0);
      m.vram.push(gpuClass.vramBytes);

      uptime.push({ machineId: id, uptimePct: Math.round((100 - 15 * random() ** 2.5) * 100) / 100, createdAt, jitter: 0.03, phase: uptime.length });
      result.gpus += gpus;
      if (status === 'online') result.busyGpus += busy;
      if (notOnline) result.offline++;
      if (unpriced) result.unpriced++;
      regionsUsed.add(site);
    }
  });
  result.regions = regionsUsed.size;

  await db.transaction(async (tx) => {
    const slugs = await uniqueSlugs(tx, farms.map((f) => f.slug));
    await tx.query(
      `INSERT INTO farms (id, slug, name, provider, status, created_at)
       SELECT id, slug, name, provider, 'active', $5 FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) AS f(id, slug, name, provider)`,
      [farms.map((f) => f.id), slugs, farms.map((f) => f.name), farms.map((f) => f.provider), new Date(now.getTime() - 400 * 86_400_000)],
    );
    await tx.query(
      `INSERT INTO machines (id, farm_id, region_key, status, price_per_gpu_hour_micro_usd, min_billing_seconds, benchmark_tier,
         cuda_version, driver_version, workloads, cpu_cores, ram_bytes, disk_free_bytes, simulated, last_heartbeat_at, created_at, updated_at,
         verification, verified_at)
       SELECT id, farm_id, region_key, status, price, min_billing, tier, cuda, driver, workloads::text[], cpu, ram, disk, true, heartbeat, created, $16,
         'verified', created
       FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::bigint[], $6::int[], $7::text[], $8::text[], $9::text[], $10::text[],
                   $11::int[], $12::bigint[], $13::bigint[], $14::timestamptz[], $15::timestamptz[])
         AS m(id, farm_id, region_key, status, price, min_billing, tier, cuda, driver, workloads, cpu, ram, disk, heartbeat, created)`,
      [
        m.id, m.farmId, m.region, m.status, m.price as unknown as number[], m.minBilling, m.tier as unknown as string[], m.cuda, m.driver,
        m.workloads as unknown as string[], m.cpu, m.ram, m.disk, m.heartbeat as unknown as string[], m.created, now,
      ],
    );
    await tx.query(
      `INSERT INTO machine_gpus (machine_id, gpu_index, uuid, class_id, vram_bytes, busy)
       SELECT m.id, i, 'GPU-sim-' || substr(md5(m.id || ':' || i), 1, 24), m.class_id, m.vram, i < m.busy
       FROM unnest($1::text[], $2::text[], $3::int[], $4::int[], $5::bigint[]) AS m(id, class_id, gpus, busy, vram)
       CROSS JOIN LATERAL generate_series(0, m.gpus - 1) AS i`,
      [m.id, m.classId, m.gpus, m.busy, m.vram],
    );
    await insertUptimeDays(tx, uptime, now);
    const [days] = await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM machine_uptime_days WHERE machine_id = ANY($1::text[])', [m.id]);
    result.uptimeDays = days?.n ?? 0;
  });
  // Fresh statistics, so the planner does not plan for empty tables.
  await db.exec('ANALYZE farms, machines, machine_gpus, machine_uptime_days');
  return result;
}

/** The planned slugs, with a numeric suffix where the database already has one. */
async function uniqueSlugs(db: Queryable, wanted: readonly string[]): Promise<string[]> {
  const rows = await db.query<{ slug: string }>(`SELECT slug FROM farms WHERE slug LIKE ANY($1::text[])`, [wanted.map((s) => `${s}%`)]);
  const taken = new Set(rows.map((r) => r.slug));
  return wanted.map((slug) => {
    let candidate = slug;
    for (let n = 2; taken.has(candidate); n++) candidate = `${slug}-${n}`;
    taken.add(candidate);
    return candidate;
  });
}
