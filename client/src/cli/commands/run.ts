import { mkdir } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { templateNameSchema, type FundConfirmResponse, type Job, type JobCreated } from '@gpufarm/shared';
import { z } from 'zod';
import type { DownloadResult } from '../../download.js';
import { GfError } from '../../errors.js';
import { openContext, parseInput, printJson, type Context } from '../context.js';
import { EXIT, UsageError } from '../exit.js';
import type { JobSpec } from '../../client.js';
import { usd } from '../format.js';
import { readJobFile } from '../jobfile.js';
import { describeJob, outcomeExitCode } from '../jobview.js';
import { printLogLine } from '../logview.js';
import type { CommandInput } from '../program.js';
import { createProgressBar } from '../progress.js';
import { createStatusLine } from '../spinner.js';

const optionsSchema = z.object({
  file: z.string().min(1).optional(),
  template: templateNameSchema.optional(),
  fund: z.boolean().optional(),
  follow: z.boolean().optional(),
  download: z.string().min(1).optional(),
  walletKeyFile: z.string().min(1).optional(),
  rpcUrl: z.url().optional(),
  idempotencyKey: z.string().regex(/^[\x21-\x7e]{1,255}$/, 'must be 1-255 visible ASCII characters').optional(),
  detach: z.boolean().optional(),
});

/** What `gf run --json` prints: each API answer of the run, unchanged. */
interface RunReport {
  object: 'gf.run';
  created: JobCreated;
  funding: FundConfirmResponse | null;
  job: Job;
  downloads: DownloadResult[];
}

/** Prints the lines of a job until it ends (to stderr with --json, so stdout stays one document). */
async function followToEnd(ctx: Context, jobId: string, signal: AbortSignal): Promise<void> {
  const lines = ctx.client.followLogs(jobId, { signal });
  for (;;) {
    const next = await lines.next();
    if (next.done) return;
    if (ctx.json) process.stderr.write(`${next.value.line}\n`);
    else printLogLine(next.value, false);
  }
}

/** Downloads every artifact of the job into `dir`, each verified (the output also against the job's result hash). */
async function downloadAll(ctx: Context, job: Job, dir: string): Promise<DownloadResult[]> {
  await mkdir(dir, { recursive: true });
  const results: DownloadResult[] = [];
  for (const artifact of job.artifacts) {
    const bar = createProgressBar(artifact.filename, ctx.interactive);
    const expected = artifact.id === job.result?.outputArtifactId ? job.result.serverHash : artifact.sha256;
    const result = await ctx.client
      .downloadArtifact(artifact.id, join(dir, basename(artifact.filename)), { expectedSha256: expected, onProgress: (r, t) => bar.update(r, t) })
      .finally(() => bar.done());
    if (!ctx.json) process.stderr.write(`downloaded ${result.path} sha256 ${result.sha256} (verified)\n`);
    results.push(result);
  }
  return results;
}

/**
 * The spec of `--template NAME`: a built-in template or the account's own, as `GET /v1/templates/:name`
 * answers it (the server checks it again at creation, as it checks a file).
 */
async function templateSpec(ctx: Context, name: string): Promise<JobSpec> {
  const template = await ctx.client.templates.get(name);
  if (!ctx.json) process.stderr.write(`using ${template.source === 'built_in' ? 'the built-in' : 'your'} template ${template.name}: ${template.spec.image as string}\n`);
  return template.spec as JobSpec;
}

/**
 * `gf run -f FILE` or `gf run --template NAME`: creates the job (with an Idempotency-Key, so a retry makes no second job).
 * With --fund it funds the job from the wallet, follows its logs (--follow) or waits for it,
 * downloads and verifies its artifacts (--download DIR) and exits with its outcome (see
 * `outcomeExitCode`). Without --fund it prints the job and how to fund it.
 */
export async function run({ opts, global }: CommandInput): Promise<number> {
  const o = parseInput(optionsSchema, opts, 'option');
  const needFund = (['follow', 'download', 'detach'] as const).filter((name) => o[name] !== undefined && !o.fund);
  if (needFund.length > 0) throw new UsageError(`--${needFund[0]} needs --fund: an unfunded job does not run.`, 'Add --fund, or fund it later with gf jobs fund JOB and use gf logs -f / gf jobs wait.');
  if ((o.file === undefined) === (o.template === undefined)) {
    throw new UsageError(o.file === undefined ? 'Say what to run: -f FILE or --template NAME.' : '-f and --template cannot be combined: give one of them.', 'gf templates lists the templates; -f reads a job spec in YAML or JSON.');
  }
  const fromFile = o.file === undefined ? null : await readJobFile(o.file);
  const ctx = await openContext(global);
  const spec = fromFile ?? (await templateSpec(ctx, o.template!));
  const fund = o.fund ? await (await import('../funding.js')).prepareFunding(ctx, { keyFile: o.walletKeyFile, rpcUrl: o.rpcUrl }) : null;
  const status = createStatusLine(ctx.interactive);
  try {
    const created = await ctx.client.jobs.create(spec, { idempotencyKey: o.idempotencyKey });
    const jobId = created.job.id;
    if (!ctx.json) {
      process.stderr.write(
        `created job ${jobId}${created.idempotentReplay ? ' (the same Idempotency-Key made it before)' : ''}: estimate ${usd(created.estimate.lowMicroUsd)} to ${usd(created.estimate.highMicroUsd)}, at most ${usd(created.job.pricing.maxCostMicroUsd)}\n`,
      );
    }
    if (!fund) {
      if (ctx.json) printJson(created);
      else {
        const calls = created.funding ? created.funding.calls.map((c) => `  ${c.title}`).join('\n') : `  (funding unavailable: ${created.fundingUnavailable?.message})`;
        process.stdout.write(`${describeJob(created.job)}Fund it from ${created.funding?.signer ?? 'the account wallet'} with:\n${calls}\nor run: gf jobs fund ${jobId}\n`);
      }
      return EXIT.ok;
    }
    if (created.fundingUnavailable) {
      throw new GfError('unavailable', `Job ${jobId} cannot be funded now: ${created.fundingUnavailable.message} (${created.fundingUnavailable.code}).`, { status: null });
    }
    const confirmation = created.job.status === 'CREATED' ? await fund(ctx.client, jobId, status) : null;
    status.clear();
    if (o.detach) {
      const job = confirmation?.job ?? (await ctx.client.jobs.get(jobId));
      if (ctx.json) printJson({ object: 'gf.run', created, funding: confirmation, job, downloads: [] } satisfies RunReport);
      else process.stdout.write(describeJob(job));
      return EXIT.ok;
    }
    // Ctrl-C stops following and waiting, not the job: say how to pick it up again.
    const interrupt = new AbortController();
    const onInterrupt = () => interrupt.abort();
    process.once('SIGINT', onInterrupt);
    let job: Job;
    try {
      if (o.follow) await followToEnd(ctx, jobId, interrupt.signal);
      job = await ctx.client.waitForJob(jobId, { signal: interrupt.signal, initialIntervalMs: o.follow ? 500 : undefined, onPoll: (j) => status.set(`job ${jobId} is ${j.status}`) });
    } catch (err) {
      if (!interrupt.signal.aborted) throw err;
      status.clear();
      process.stderr.write(`Stopped waiting; job ${jobId} keeps running. Pick it up with: gf logs -f ${jobId} or gf jobs wait ${jobId}\n`);
      return EXIT.interrupted;
    } finally {
      process.off('SIGINT', onInterrupt);
    }
    status.clear();
    const downloads = o.download && job.status === 'COMPLETED' ? await downloadAll(ctx, job, resolve(o.download)) : [];
    if (ctx.json) printJson({ object: 'gf.run', created, funding: confirmation, job, downloads } satisfies RunReport);
    else process.stdout.write(describeJob(job));
    return outcomeExitCode(job);
  } finally {
    status.clear();
  }
}
