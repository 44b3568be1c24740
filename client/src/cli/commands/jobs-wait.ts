import { z } from 'zod';
import { openContext, parseInput, printJson } from '../context.js';
import { describeJob, outcomeExitCode } from '../jobview.js';
import type { CommandInput } from '../program.js';
import { createStatusLine } from '../spinner.js';

const optionsSchema = z.object({ timeout: z.coerce.number().int().min(1).optional() });

/** `gf jobs wait JOB`: waits for the job's end; exits 0 when it COMPLETED with exit code 0, else 1. */
export async function run({ args, opts, global }: CommandInput): Promise<number> {
  const o = parseInput(optionsSchema, opts, 'option');
  const ctx = await openContext(global);
  const status = createStatusLine(ctx.interactive);
  const job = await ctx.client
    .waitForJob(args[0]!, {
      timeoutMs: o.timeout === undefined ? undefined : o.timeout * 1000,
      onPoll: (j) => status.set(`job ${j.id} is ${j.status}`),
    })
    .finally(() => status.clear());
  if (ctx.json) printJson(job);
  else process.stdout.write(describeJob(job));
  return outcomeExitCode(job);
}
