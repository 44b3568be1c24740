import { logCursorSchema, type LogLine } from '@gpufarm/shared';
import { z } from 'zod';
import { openContext, parseInput, printJson } from '../context.js';
import { EXIT } from '../exit.js';
import { printLogLine } from '../logview.js';
import type { CommandInput } from '../program.js';

const optionsSchema = z.object({
  follow: z.boolean().optional(),
  stream: z.enum(['stdout', 'stderr', 'system']).optional(),
  since: logCursorSchema.optional(),
});

/**
 * `gf logs JOB`: the lines written so far (every page from `--since`); with `-f`, then the new
 * ones as they come until the job ends. `--json` prints the API's log list object with every
 * line gathered, or with `-f` one JSON log line per output line.
 */
export async function run({ args, opts, global }: CommandInput): Promise<number> {
  const o = parseInput(optionsSchema, opts, 'option');
  const ctx = await openContext(global);
  const jobId = args[0]!;
  if (o.follow) {
    const controller = new AbortController();
    const stop = () => controller.abort();
    process.once('SIGINT', stop);
    try {
      const lines = ctx.client.followLogs(jobId, { stream: o.stream, cursor: o.since, signal: controller.signal });
      for (;;) {
        const next = await lines.next();
        if (next.done) {
          if (!ctx.json) process.stderr.write(`job ${jobId} is ${next.value.jobStatus}; last cursor ${next.value.nextCursor}\n`);
          break;
        }
        printLogLine(next.value, ctx.json);
      }
    } catch (err) {
      if (!controller.signal.aborted) throw err;
    } finally {
      process.off('SIGINT', stop);
    }
    return EXIT.ok;
  }
  const lines: LogLine[] = [];
  let cursor = o.since ?? '0';
  for (;;) {
    const page = await ctx.client.jobs.logs(jobId, { cursor, stream: o.stream, limit: 1000 });
    if (ctx.json) lines.push(...page.data);
    else for (const line of page.data) printLogLine(line, false);
    const done = page.data.length === 0 || page.nextCursor === cursor;
    cursor = page.nextCursor;
    if (done) {
      if (ctx.json) printJson({ ...page, data: lines });
      return EXIT.ok;
    }
  }
}
