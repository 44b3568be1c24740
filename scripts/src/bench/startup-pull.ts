import { execFile, spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { promisify } from 'node:util';
import { errorText, jobStartupSchema } from '@gpufarm/shared';
import { followStream, nowMs } from './log-lines.js';
import { forgetLocalImage, ensureLargeImage } from './large-image.js';
import { startBenchMarketplace, type BenchMarketplace } from './marketplace.js';
import { alignedTable } from './report.js';
import type { StandaloneSection } from './standalone.js';

const run = promisify(execFile);

/** What the job prints first; the log's earlier lines are the machine's notes (pull progress). */
const FIRST = 'gf-startup-first-line';
/** Targets (issue 34): a warm start within 1.5 s of funding; a cold one within 1.1× a plain pull and run. */
const TARGET_WARM_MS = 1500;
const TARGET_COLD_RATIO = 1.1;
const WARM_RUNS = Number(process.env.BENCH_STARTUP_WARM_RUNS ?? 3);

/** One cold or warm start: milliseconds from funding to the first line, and where they went. */
interface JobStart {
  ms: number;
  /** The job's start phases as the service recorded them (`GET /v1/jobs/:id?include=startup`), then the stream's delivery. */
  trace: string;
}

/**
 * Milliseconds from the job's funding (fund-confirm answered confirmed) to its first own line on
 * the live log stream (`followStream`, which reads until the job's end), and the job's start
 * phases: funding → queued, queued → offered, offered → pull started, the pull, image ready →
 * container running, running → first line stored, stored → read on the stream.
 */
async function fundedToFirstLine(market: BenchMarketplace, image: string, title: string): Promise<JobStart> {
  const jobId = await market.createJob(title, `echo ${FIRST}; sleep 1`, image);
  await market.fund(jobId);
  const funded = nowMs();
  let firstMs: number | null = null;
  let readAt = 0;
  await followStream(`${market.server.url}/v1/jobs/${jobId}/logs/stream?cursor=0`, market.apiKey, {
    take: (text, readMs) => {
      if (firstMs === null && text.includes(FIRST)) {
        firstMs = readMs - funded;
        readAt = readMs;
      }
    },
  });
  if (firstMs === null) throw new Error(`job ${jobId} ended without its first line\n${market.agentOutput().join('\n')}`);
  const got = await market.api<{ startup?: unknown }>('GET', `/v1/jobs/${jobId}?include=startup`);
  const startup = jobStartupSchema.nullable().parse(got.body.startup ?? null);
  if (startup === null) return { ms: firstMs, trace: 'no start phases recorded' };
  const p = startup.phases;
  const at = (t: string | null) => (t === null ? null : Date.parse(t));
  const queuedAt = at(p.queued.startedAt);
  const storedAt = at(p.firstLog.endedAt);
  const ms = (x: number | null) => (x === null ? '-' : `${Math.round(x)}`);
  const trace = [
    `funded→queued ${ms(queuedAt === null ? null : queuedAt - funded)}`,
    `queued ${ms(p.queued.durationMs)}`,
    `dispatch ${ms(p.dispatch.durationMs)}`,
    `pull ${p.pull.status === 'skipped' ? 'skipped' : ms(p.pull.durationMs)}`,
    `container ${ms(p.container.durationMs)}`,
    `first line ${ms(p.firstLog.durationMs)}`,
    `stream ${ms(storedAt === null ? null : readAt - storedAt)}`,
  ].join(', ');
  return { ms: firstMs, trace };
}

/** `docker pull` then `docker run` of the same image until the container's first line (the baseline): the whole, and the pull's part. */
async function plainPullAndRun(image: string): Promise<{ ms: number; pullMs: number }> {
  const started = nowMs();
  await run('docker', ['pull', '-q', image], { maxBuffer: 16 * 2 ** 20 });
  const pullMs = nowMs() - started;
  // Answers once the container is gone (`--rm`), so the image can be removed next.
  const ms = await new Promise<number>((resolve, reject) => {
    const child = spawn('docker', ['run', '--rm', '--network', 'none', image, 'sh', '-c', `echo ${FIRST}; sleep 1`], { stdio: ['ignore', 'pipe', 'pipe'] });
    let firstMs: number | null = null;
    child.stdout.on('data', (chunk: Buffer) => {
      if (firstMs === null && chunk.toString().includes(FIRST)) firstMs = nowMs() - started;
    });
    child.on('error', reject);
    child.on('close', (code) => {
      if (firstMs === null) reject(new Error(`docker run of ${image} exited ${code} before its first line`));
      else resolve(firstMs);
    });
  });
  return { ms, pullMs };
}

/**
 * Makes the next start cold again: waits for the last job's container to be gone (a container
 * left would keep the image's layers, and the next pull would skip them), removes the image,
 * and writes out what the disk still holds in memory (`sync`), so a start does not pay for the
 * writes of the one before it: a pull writes ~1 GiB, and the kernel flushes it during whatever
 * runs next.
 */
async function coldAgain(reference: string): Promise<void> {
  const id = await run('docker', ['image', 'inspect', '--format', '{{.Id}}', reference]).then((r) => r.stdout.trim(), () => null);
  for (let waited = 0; id !== null; waited += 250) {
    const { stdout } = await run('docker', ['ps', '-aq', '--filter', `ancestor=${id}`]);
    if (stdout.trim() === '') break;
    if (waited >= 30_000) throw new Error(`containers of ${reference} still there after 30 s: ${stdout.trim().split('\n').join(', ')}`);
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  await forgetLocalImage(reference);
  await run('sync');
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;

/**
 * Time from funding to the job's first log line for a ~1 GiB image (`ensureLargeImage`), cold
 * (no machine holds it: the agent pulls it) against warm (the machine holds it), beside the
 * plain `docker pull` + `docker run` of the same image on the same Engine in the same run. One
 * marketplace of the bench's own (`startBenchMarketplace`: real agent, control plane and chain).
 * The image is pulled once unmeasured (the registry then serves every measured pull from
 * memory), then plain and cold alternate as plain, cold, cold, plain, each after `coldAgain`,
 * so neither side gains from going first or from the other's writes; the ratio is of the means.
 */
export const startupPullSection: StandaloneSection = {
  name: 'startup: cold and warm start of a large image',
  run: async (log) => {
    const market = await startBenchMarketplace(log, 'startup');
    try {
      const large = await ensureLargeImage(market.images, log);
      log(`large image ${large.reference}: ${(large.registryBytes / 2 ** 30).toFixed(2)} GiB in the registry`);
      await forgetLocalImage(large.reference);
      await run('docker', ['pull', '-q', large.reference], { maxBuffer: 16 * 2 ** 20 });
      const plain: number[] = [];
      const cold: number[] = [];
      for (const kind of ['plain', 'cold', 'cold', 'plain'] as const) {
        await coldAgain(large.reference);
        if (kind === 'plain') {
          const p = await plainPullAndRun(large.reference);
          plain.push(p.ms);
          log(`plain docker pull + docker run: ${p.ms.toFixed(0)} ms (pull ${p.pullMs.toFixed(0)}, run to the first line ${(p.ms - p.pullMs).toFixed(0)})`);
        } else {
          const c = await fundedToFirstLine(market, large.reference, `bench startup cold ${cold.length + 1}`);
          cold.push(c.ms);
          log(`cold job: ${c.ms.toFixed(0)} ms from funding to its first line (${c.trace})`);
        }
      }
      const warm: JobStart[] = [];
      for (let i = 0; i < WARM_RUNS; i++) warm.push(await fundedToFirstLine(market, large.reference, `bench startup warm ${i + 1}`));
      for (const w of warm) log(`warm job: ${w.ms.toFixed(0)} ms (${w.trace})`);
      const warmMs = median(warm.map((w) => w.ms));
      const plainMs = mean(plain);
      const coldMs = mean(cold);
      const coldRatio = coldMs / plainMs;
      const table = alignedTable([
        ['start of a job of the large image', 'ms', 'ratio to plain', 'target', 'result'],
        ['cold: funding to first log line (the agent pulls the image; mean of 2)', coldMs.toFixed(0), coldRatio.toFixed(2), `<= ${TARGET_COLD_RATIO}x plain`, coldRatio <= TARGET_COLD_RATIO ? 'PASS' : 'FAIL'],
        [`warm: funding to first log line (image cached; median of ${WARM_RUNS})`, warmMs.toFixed(0), (warmMs / plainMs).toFixed(2), `<= ${TARGET_WARM_MS} ms`, warmMs <= TARGET_WARM_MS ? 'PASS' : 'FAIL'],
        ['baseline: docker pull + docker run to the first line, same Engine (mean of 2)', plainMs.toFixed(0), '1.00', 'baseline', ''],
      ]);
      table.push(`${(large.registryBytes / 2 ** 30).toFixed(2)} GiB compressed in the local registry; plain ${plain.map((ms) => ms.toFixed(0)).join(', ')} ms, cold ${cold.map((ms) => ms.toFixed(0)).join(', ')} ms (in the order plain, cold, cold, plain); warm runs ${warm.map((w) => w.ms.toFixed(0)).join(', ')} ms; load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
      const missed: string[] = [];
      if (coldRatio > TARGET_COLD_RATIO) missed.push(`startup: a cold start took ${coldRatio.toFixed(2)}x a plain pull and run (target <= ${TARGET_COLD_RATIO}x)`);
      if (warmMs > TARGET_WARM_MS) missed.push(`startup: a warm start took ${warmMs.toFixed(0)} ms from funding to the first line (target <= ${TARGET_WARM_MS} ms)`);
      return { table, missed };
    } catch (err) {
      throw new Error(`startup bench: ${errorText(err)}`, { cause: err });
    } finally {
      await market.close(log);
    }
  },
};
