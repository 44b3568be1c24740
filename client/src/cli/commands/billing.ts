import { billingSums, type BillingEntry } from '@gpufarm/shared';
import { z } from 'zod';
import { openContext, parseInput } from '../context.js';
import { EXIT } from '../exit.js';
import { usd } from '../format.js';
import { showList } from '../listing.js';
import type { CommandInput } from '../program.js';

const optionsSchema = z.object({
  limit: z.coerce.number().int().min(1).max(200).optional(),
  cursor: z.string().min(1).optional(),
  all: z.boolean().optional(),
});

/** The entries shown, summed as the dashboard sums them: what was funded, charged and returned to the wallet. */
function summary(entries: readonly BillingEntry[]): string {
  const sums = billingSums(entries);
  return `${entries.length} entries · funded ${usd(sums.funded)} · charged ${usd(sums.charged)} · returned ${usd(sums.returned)}`;
}

/** `gf billing`: the account's billing entries, newest first. */
export async function run({ opts, global }: CommandInput): Promise<number> {
  const o = parseInput(optionsSchema, opts, 'option');
  const ctx = await openContext(global);
  await showList(ctx, {
    all: o.all ?? false,
    page: () => ctx.client.billing.list({ limit: o.limit, cursor: o.cursor }),
    walk: () => ctx.client.billing.listAll({ limit: o.limit }),
    noun: 'billing entries',
    summary,
    columns: [
      { heading: 'WHEN', cell: (e) => e.createdAt },
      { heading: 'TYPE', cell: (e) => e.type },
      { heading: 'AMOUNT', cell: (e) => usd(e.amountMicroUsd), right: true },
      { heading: 'JOB', cell: (e) => e.jobId ?? '-' },
      { heading: 'TX', cell: (e) => e.txHash ?? '-' },
    ],
  });
  return EXIT.ok;
}
