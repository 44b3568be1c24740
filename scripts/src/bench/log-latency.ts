import { loadavg } from 'node:os';
import { PassThrough } from 'node:stream';
import Docker from 'dockerode';
import { isTerminalStatus, type JobStatus, type LogLine } from '@gpufarm/shared';
import { LABEL_JOB, LABEL_OWNER } from '@gpufarm/agent/docker';
import { figureCells, figures, followStream, LEAD_SECONDS, nowMs, Reader, writerScript } from './log-lines.js';
import { startBenchMarketplace } from './marketplace.js';
import { alignedTable } from './report.js';
import type { StandaloneSection } from './standalone.js';

/** Lines per second the container writes, for how many seconds, and how often the customer polls. */
const RATE = Number(process.env.BENCH_LOG_RATE ?? 1000);
const SECONDS = Number(process.env.BENCH_LOG_SECONDS ?? 25);
/**
 * 250 ms: the fastest steady poll that stays under the per-key limit (300 calls a minute) with
 * room for the customer's other calls; 100 ms (600 a minute) is refused with 429 after 30 s.
 */
const POLL_MS = Number(process.env.BENCH_LOG_POLL_MS ?? 250);
/** Target: p99 from the container's write to readable through the logs API, at 1,000 lines/s. */
const TARGET_P99_MS = 1000;
/** Target: p99 from the container's write to received by a client of the live stream (SSE). */
const TARGET_STREAM_P99_MS = 250;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Follows the container's log through the Engine API (what `docker logs -f` does, and what the
 * agent itself reads), stamping each line as it arrives.
 */
async function followDocker(docker: Docker, containerId: string, reader: Reader, stop: Promise<void>): Promise<void> {
  const stream = (await docker.getContainer(containerId).logs({ follow: true, stdout: true, stderr: true })) as unknown as NodeJS.ReadableStream & { destroy(): void };
  const out = new PassThrough();
  let partial = '';
  out.on('data', (chunk: Buffer) => {
    const readMs = nowMs();
    const lines = (partial + chunk.toString()).split('\n');
    partial = lines.pop() ?? '';
    for (const line of lines) reader.take(line, readMs);
  });
  docker.modem.demuxStream(stream, out, out);
  await Promise.race([new Promise<void>((resolve) => stream.on('end', () => resolve()).on('close', () => resolve())), stop]);
  stream.destroy();
}

/**
 * End-to-end log latency, on a marketplace of its own: a fresh database, anvil with
 * the escrow (`startLocalChain`), the control plane as a process, and the real agent
 * (`gf-agent enroll` and `run`, one simulated GPU) as `npm start` runs it. A customer (API key,
 * viem wallet of dev account 1) creates a busybox job, funds it in tUSDC and fund-confirms it,
 * then polls `GET /v1/jobs/:id/logs` with the cursor every `BENCH_LOG_POLL_MS` (250). The job
 * writes `BENCH_LOG_RATE` (1000) lines a second for `BENCH_LOG_SECONDS` (25), each with its
 * write time; a line's latency is when the poll that returned it was read minus that time
 * (same machine clock). Baseline, on the same lines at the same time: the Engine API's log
 * follow of the container (`docker logs -f`). Target: p99 under 1 s through the API.
 */
export const logLatencySection: StandaloneSection = {
  name: 'end-to-end log latency',
  run: async (log) => {
    const count = RATE * SECONDS;
    const docker = new Docker();
    const market = await startBenchMarketplace(log, 'loglat');
    try {
      const { server, agent } = market;
      const jobId = await market.createJob('bench log latency', writerScript(RATE, count));
      await market.fund(jobId);
      log(`job ${jobId} funded and confirmed: ${count} lines at ${RATE}/s after ${LEAD_SECONDS} s; the customer polls the logs every ${POLL_MS} ms`);

      // Both readers at once on the same lines: the logs API as a customer tails it, and the Engine API.
      const viaApi = new Reader();
      const viaDocker = new Reader();
      let jobStatus: JobStatus = 'QUEUED';
      let stopped = false;
      let release: () => void = () => {};
      const dockerStopped = new Promise<void>((resolve) => (release = resolve));
      const stopDocker = () => {
        stopped = true;
        release();
      };
      const deadline = Date.now() + (LEAD_SECONDS + SECONDS) * 1000 + 120_000;
      const follower = (async () => {
        while (!stopped) {
          // Once started: a follow of a container still being created ends at once, empty. The
          // job's own label: the machine's verification canary runs on it first.
          const found = await docker.listContainers({ filters: { label: [`${LABEL_OWNER}=${agent.machineId}`, `${LABEL_JOB}=${jobId}`], status: ['running'] } });
          if (found[0]) return followDocker(docker, found[0].Id, viaDocker, dockerStopped);
          if (Date.now() > deadline) throw new Error('the job container never appeared');
          await sleep(50);
        }
      })();
      const viaStream = new Reader();
      const streamed = followStream(`${server.url}/v1/jobs/${jobId}/logs/stream?cursor=0`, market.apiKey, viaStream);
      // Both followers are awaited only after the poll loop; until then a failure of either must
      // not crash the process as an unhandled rejection (which skips the cleanups below): it is
      // thrown where each is awaited.
      for (const pending of [follower, streamed]) pending.catch(() => undefined);
      let cursor = '0';
      let polls = 0;
      while (viaApi.latencyMs.size < count || !isTerminalStatus(jobStatus)) {
        if (Date.now() > deadline) throw new Error(`after ${polls} polls: ${viaApi.latencyMs.size}/${count} lines through the API, job ${jobStatus}\n${market.agentOutput().join('\n')}`);
        const started = Date.now();
        const page = await market.api<{ jobStatus: JobStatus; nextCursor: string; data: LogLine[] }>('GET', `/v1/jobs/${jobId}/logs?cursor=${cursor}&limit=1000`);
        const readMs = nowMs();
        polls += 1;
        if (page.status !== 200) throw new Error(`GET logs answered ${page.status}: ${JSON.stringify(page.body).slice(0, 300)}`);
        for (const line of page.body.data) viaApi.take(line.line, readMs);
        cursor = page.body.nextCursor;
        jobStatus = page.body.jobStatus;
        // A full page: more lines wait, read them now; otherwise the next poll after the interval.
        if (page.body.data.length < 1000) await sleep(Math.max(0, POLL_MS - (Date.now() - started)));
        if (viaApi.latencyMs.size >= count && viaDocker.latencyMs.size >= count) stopDocker();
      }
      stopDocker();
      await follower;
      await streamed;
      if (jobStatus !== 'COMPLETED') log(`the job ended ${jobStatus}, not COMPLETED`);

      const a = figures(viaApi);
      const d = figures(viaDocker);
      const st = figures(viaStream);
      const streamPass = st.lines === count && st.p99 <= TARGET_STREAM_P99_MS && viaStream.duplicates === 0;
      const ms = (x: number) => x.toFixed(0);
      const pass = a.lines === count && a.p99 < TARGET_P99_MS && viaApi.duplicates === 0;
      const table = alignedTable([
        ['path (latency from the container\'s write, ms)', 'lines', 'lines/s', 'p50', 'p95', 'p99', 'max', 'target', 'result'],
        [`logs API: agent, control plane, GET /v1/jobs/:id/logs every ${POLL_MS} ms`, ...figureCells(a, count), `p99 < ${TARGET_P99_MS} ms`, pass ? 'PASS' : 'FAIL'],
        ['live stream: agent, control plane, GET /v1/jobs/:id/logs/stream (SSE)', ...figureCells(st, count), `p99 <= ${TARGET_STREAM_P99_MS} ms`, streamPass ? 'PASS' : 'FAIL'],
        ['baseline: Engine API log follow (docker logs -f) of the same container', ...figureCells(d, count), 'baseline', ''],
      ]);
      table.push(
        `the pipeline adds ${ms(a.p50 - d.p50)} ms at p50 and ${ms(a.p99 - d.p99)} ms at p99; ${polls} polls, ${market.rateLimited()} answered 429; ${viaApi.duplicates} lines read twice through the API, ${viaStream.duplicates} through the stream; job ${jobStatus}; load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}`,
      );
      const missed = pass ? [] : [`log latency: ${a.lines}/${count} lines, p99 ${ms(a.p99)} ms through the logs API (target < ${TARGET_P99_MS} ms)`];
      if (!streamPass) missed.push(`log latency: ${st.lines}/${count} lines, p99 ${ms(st.p99)} ms through the live stream (target <= ${TARGET_STREAM_P99_MS} ms)`);
      if (d.lines < count) missed.push(`log latency: the baseline read ${d.lines}/${count} lines, so the comparison is incomplete`);
      return { table, missed };
    } finally {
      await market.close(log);
    }
  },
};
