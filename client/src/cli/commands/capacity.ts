import { parseUsdToMicroUsd, formatMicroUsd, type CapacityOffer } from '@gpufarm/shared';
import { z } from 'zod';
import { openContext, parseInput } from '../context.js';
import { EXIT } from '../exit.js';
import { gib, usd } from '../format.js';
import { showList } from '../listing.js';
import type { CommandInput } from '../program.js';

const count = (max?: number) => z.coerce.number().int().min(1).max(max ?? Number.MAX_SAFE_INTEGER);
const usdText = z.string().transform((text, ctx) => {
  const parsed = parseUsdToMicroUsd(text);
  if (parsed.ok) return formatMicroUsd(parsed.microUsd);
  ctx.addIssue({ code: 'custom', message: `${parsed.message}` });
  return z.NEVER;
});

const optionsSchema = z.object({
  model: z.string().min(1).optional(),
  region: z.string().min(1).optional(),
  minVram: z.coerce.number().int().min(0).optional(),
  maxPrice: usdText.optional(),
  farm: z.string().min(1).optional(),
  minUptime: z.coerce.number().min(0).max(100).optional(),
  workload: z.string().min(1).optional(),
  cuda: z.string().regex(/^\d+(\.\d+)*$/, 'must be a version such as 12.2').optional(),
  tier: z.enum(['S', 'A', 'B', 'C']).optional(),
  sort: z.enum(['available', 'price_asc', 'price_desc', 'vram', 'uptime', 'count']).optional(),
  available: z.boolean().optional(),
  proven: z.boolean().optional(),
  limit: count(500).optional(),
  cursor: z.string().min(1).optional(),
  all: z.boolean().optional(),
});

/** `N offers · A of T GPUs available · $x to $y per GPU-hour`, from the offers shown. */
function summary(offers: readonly CapacityOffer[]): string {
  const gpus = offers.reduce((n, o) => n + o.count, 0);
  const available = offers.reduce((n, o) => n + o.available, 0);
  const prices = offers.map((o) => o.price.perGpuHourMicroUsd);
  const low = Math.min(...prices);
  const high = Math.max(...prices);
  return `${offers.length} offer${offers.length === 1 ? '' : 's'} · ${available} of ${gpus} GPUs available · ${low === high ? usd(low) : `${usd(low)} to ${usd(high)}`} per GPU-hour`;
}

/** The PROOF cell: `proven 2026-03-01` (the oldest proof of the offer's machines, UTC day), `not proven` or `simulated`. */
export function proofText(offer: Pick<CapacityOffer, 'proof' | 'simulated'>): string {
  if (offer.proof.proven && offer.proof.provenAt !== null) return `proven ${offer.proof.provenAt.slice(0, 10)}`;
  return offer.simulated ? 'simulated' : 'not proven';
}

/** `gf capacity`: the offers as a table with a summary line. */
export async function run({ opts, global }: CommandInput): Promise<number> {
  const o = parseInput(optionsSchema, opts, 'option');
  const ctx = await openContext(global);
  const query = {
    model: o.model,
    region: o.region,
    minVram: o.minVram,
    maxPrice: o.maxPrice,
    farm: o.farm,
    minUptime: o.minUptime,
    workload: o.workload,
    cuda: o.cuda,
    tier: o.tier,
    sort: o.sort,
    availability: o.available ? ('available' as const) : undefined,
    proven: o.proven ? true : undefined,
    limit: o.limit,
  };
  await showList(ctx, {
    all: o.all ?? false,
    page: () => ctx.client.capacity.list({ ...query, cursor: o.cursor }),
    walk: () => ctx.client.capacity.listAll(query),
    noun: 'offers',
    summary,
    columns: [
      { heading: 'GPU', cell: (x) => x.gpu.label },
      { heading: 'VRAM', cell: (x) => gib(x.gpu.vramBytes), right: true },
      { heading: 'AVAIL', cell: (x) => `${x.available}/${x.count}`, right: true },
      { heading: 'PER GPU-H', cell: (x) => usd(x.price.perGpuHourMicroUsd), right: true },
      { heading: 'TIER', cell: (x) => x.benchmarkTier },
      { heading: 'UPTIME', cell: (x) => `${x.uptimePct}%`, right: true },
      { heading: 'PROOF', cell: proofText },
      { heading: 'REGION', cell: (x) => x.region.key },
      { heading: 'FARM', cell: (x) => x.farm.slug },
      { heading: 'QUEUE', cell: (x) => String(x.queue), right: true },
    ],
  });
  return EXIT.ok;
}
