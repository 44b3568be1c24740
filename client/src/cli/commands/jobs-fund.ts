import { z } from 'zod';
import { openContext, parseInput, printJson } from '../context.js';
import { EXIT } from '../exit.js';
import type { CommandInput } from '../program.js';
import { createStatusLine } from '../spinner.js';

const optionsSchema = z.object({ walletKeyFile: z.string().min(1).optional(), rpcUrl: z.url().optional() });

/** `gf jobs fund JOB`: sends the job's funding calls from the wallet and confirms them; prints the confirmation. */
export async function run({ args, opts, global }: CommandInput): Promise<number> {
  const o = parseInput(optionsSchema, opts, 'option');
  const ctx = await openContext(global);
  const { prepareFunding } = await import('../funding.js');
  const fund = await prepareFunding(ctx, { keyFile: o.walletKeyFile, rpcUrl: o.rpcUrl });
  const status = createStatusLine(ctx.interactive);
  const confirmation = await fund(ctx.client, args[0]!, status).finally(() => status.clear());
  if (ctx.json) printJson(confirmation);
  else process.stdout.write(`Job ${confirmation.job.id} is funded and ${confirmation.job.status}. ${confirmation.message}\n`);
  return EXIT.ok;
}
