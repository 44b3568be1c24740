import { openContext, printJson } from '../context.js';
import { EXIT } from '../exit.js';
import { gib, usd } from '../format.js';
import type { CommandInput } from '../program.js';
import { renderTable } from '../table.js';

/** `gf pricing`: the platform fee, minimum billing, payment tokens and each GPU class's price spread. */
export async function run({ global }: CommandInput): Promise<number> {
  const ctx = await openContext(global);
  const pricing = await ctx.client.pricing();
  if (ctx.json) {
    printJson(pricing);
    return EXIT.ok;
  }
  const fee = `${Math.floor(pricing.platformFeeBps / 100)}.${String(pricing.platformFeeBps % 100).padStart(2, '0')}%`;
  const price = (micro: number | null) => (micro === null ? '-' : usd(micro));
  process.stdout.write(
    renderTable(
      [
        { heading: 'GPU CLASS', cell: (c) => c.label },
        { heading: 'VRAM', cell: (c) => gib(c.vramBytes), right: true },
        { heading: 'AVAIL', cell: (c) => `${c.gpusAvailable}/${c.gpusOnline}`, right: true },
        { heading: 'MIN', cell: (c) => price(c.minPerGpuHourMicroUsd), right: true },
        { heading: 'MEDIAN', cell: (c) => price(c.medianPerGpuHourMicroUsd), right: true },
        { heading: 'MAX', cell: (c) => price(c.maxPerGpuHourMicroUsd), right: true },
      ],
      pricing.classes,
    ) +
      `Prices in ${pricing.currency} ${pricing.unit}; platform fee ${fee}; minimum billing ${pricing.minBillingSeconds.min}-${pricing.minBillingSeconds.max} s; ` +
      `pay in ${pricing.paymentAssets.map((p) => p.symbol).join(' or ')} (chain ${pricing.chainId}).\n`,
  );
  return EXIT.ok;
}
