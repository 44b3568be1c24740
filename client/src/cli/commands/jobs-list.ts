import { jobStatusSchema, type Job } from '@gpufarm/shared';
import { z } from 'zod';
import { openContext, parseInput } from '../context.js';
import { EXIT } from '../exit.js';
import { usd } from '../format.js';
import { showList } from '../listing.js';
import type { CommandInput } from '../program.js';

const optionsSchema = z.object({
  status: z
    .string()
    .transform((s) => s.split(',').map((x) => x.trim().toUpperCase()))
    .pipe(z.array(jobStatusSchema))
    .optional(),
  limit: z.coerce.number().int().min(1).max(100).optional(),
  cursor: z.string().min(1).optional(),
  all: z.boolean().optional(),
});

/** `gf jobs list`: the account's jobs as a table. */
export async function run({ opts, global }: CommandInput): Promise<number> {
  const o = parseInput(optionsSchema, opts, 'option');
  const ctx = await openContext(global);
  const query = { status: o.status, limit: o.limit };
  await showList(ctx, {
    all: o.all ?? false,
    page: () => ctx.client.jobs.list({ ...query, cursor: o.cursor }),
    walk: () => ctx.client.jobs.listAll(query),
    noun: 'jobs',
    columns: [
      { heading: 'JOB', cell: (j: Job) => j.id },
      { heading: 'STATUS', cell: (j) => j.status },
      { heading: 'GPU', cell: (j) => (j.assignment ? `${j.assignment.gpu.count}× ${j.assignment.gpu.model}` : '-') },
      { heading: 'COST', cell: (j) => (j.cost ? usd(j.cost.totalMicroUsd) : `≤ ${usd(j.pricing.maxCostMicroUsd)}`), right: true },
    ],
  });
  return EXIT.ok;
}
