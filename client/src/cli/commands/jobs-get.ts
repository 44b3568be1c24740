import { openContext, printJson } from '../context.js';
import { EXIT } from '../exit.js';
import { describeJob } from '../jobview.js';
import type { CommandInput } from '../program.js';

/** `gf jobs get JOB`. */
export async function run({ args, global }: CommandInput): Promise<number> {
  const ctx = await openContext(global);
  const job = await ctx.client.jobs.get(args[0]!);
  if (ctx.json) printJson(job);
  else process.stdout.write(describeJob(job));
  return EXIT.ok;
}
