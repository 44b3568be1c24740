import { execFile, spawn } from 'node:child_process';
import { loadavg } from 'node:os';
import { promisify } from 'node:util';
import { errorText } from '@gpufarm/shared';
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

/**
 * Milliseconds from the job's funding (fund-confirm answered confirmed) to its first own line on
 * the live log stream (`followStream`, which reads until the job's end).
 */
async function fundedToFirstLine(market: BenchMarketplace, image: string, title: string): Promise<number> {
  const jobId = await market.createJob(title, `echo ${FIRST}; sleep 1`, image);
  await market.fund(jobId);
  const funded = nowMs();
  let firstMs: number | null = null;
  await followStream(`${market.server.url}/v1/jobs/${jobId}/logs/stream?cursor=0`, market.apiKey, {
    take: (text, readMs) => {
      if (firstMs === null && text.includes(FIRST)) firstMs = readMs - funded;
    },
  });
  if (firstMs === null) throw new Error(`job ${jobId} ended without its first line\n${market.agentOutput().join('\n')}`);
  return firstMs;
}

/** Milliseconds of `docker pull` then `docker run` of the same image until the container's first line (the baseline). */
async function plainPullAndRun(image: string): Promise<number> {
  const started = nowMs();
  await run('docker', ['pull', '-q', image], { maxBuffer: 16 * 2 ** 20 });
  // Answers once the container is gone (`--rm`), so the image can be removed next.
  return new Promise((resolve, reject) => {
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
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/**
 * Time from funding to the job's first log line for a ~1 GiB image (`ensureLargeImage`), cold
 * (no machine holds it: the agent pulls it) against warm (the machine holds it from the cold
 * job), beside the plain `docker pull` + `docker run` of the same image on the same Engine in
 * the same run. One marketplace of the bench's own (`startBenchMarketplace`: real agent, control
 * plane and chain).
 */
export const startupPullSection: StandaloneSection = {
  name: 'startup: cold and warm start of a large image',
  run: async (log) => {
    const market = await startBenchMarketplace(log, 'startup');
    try {
      const large = await ensureLargeImage(market.images, log);
      log(`large image ${large.reference}: ${(large.registryBytes / 2 ** 30).toFixed(2)} GiB in the registry`);
      await forgetLocalImage(large.reference);
      const plainMs = await plainPullAndRun(large.reference);
      log(`plain docker pull + docker run: ${plainMs.toFixed(0)} ms`);
      await forgetLocalImage(large.reference);
      const coldMs = await fundedToFirstLine(market, large.reference, 'bench startup cold');
      log(`cold job: ${coldMs.toFixed(0)} ms from funding to its first line`);
      const warm: number[] = [];
      for (let i = 0; i < WARM_RUNS; i++) warm.push(await fundedToFirstLine(market, large.reference, `bench startup warm ${i + 1}`));
      log(`warm jobs: ${warm.map((ms) => ms.toFixed(0)).join(', ')} ms`);
      const warmMs = median(warm);
      const coldRatio = coldMs / plainMs;
      const table = alignedTable([
        ['start of a job of the large image', 'ms', 'ratio to plain', 'target', 'result'],
        ['cold: funding to first log line (the agent pulls the image)', coldMs.toFixed(0), coldRatio.toFixed(2), `<= ${TARGET_COLD_RATIO}x plain`, coldRatio <= TARGET_COLD_RATIO ? 'PASS' : 'FAIL'],
        [`warm: funding to first log line (image cached; median of ${WARM_RUNS})`, warmMs.toFixed(0), (warmMs / plainMs).toFixed(2), `<= ${TARGET_WARM_MS} ms`, warmMs <= TARGET_WARM_MS ? 'PASS' : 'FAIL'],
        ['baseline: docker pull + docker run to the first line, same Engine', plainMs.toFixed(0), '1.00', 'baseline', ''],
      ]);
      table.push(`${(large.registryBytes / 2 ** 30).toFixed(2)} GiB compressed in the local registry; warm runs ${warm.map((ms) => ms.toFixed(0)).join(', ')} ms; load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}`);
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
