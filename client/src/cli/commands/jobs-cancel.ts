import { z } from 'zod';
import { openContext, parseInput, printJson } from '../context.js';
import { EXIT } from '../exit.js';
import type { CommandInput } from '../program.js';

const optionsSchema = z.object({ reason: z.string().min(1).max(500).optional() });

/** `gf jobs cancel JOB [--reason TEXT]`. */
export async function run({ args, opts, global }: CommandInput): Promise<number> {
  const o = parseInput(optionsSchema, opts, 'option');
  const ctx = await openContext(global);
  const job = await ctx.client.jobs.cancel(args[0]!, { reason: o.reason });
  if (ctx.json) printJson(job);
  else process.stdout.write(`Job ${job.id} is ${job.status}.${job.receipt?.status === 'refund_authorized' ? ' Its escrow refund is authorized: claim it from your wallet.' : ''}\n`);
  return EXIT.ok;
}
