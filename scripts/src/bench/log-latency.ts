import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { promisify } from 'node:util';
import Docker from 'dockerode';
import { createPublicClient, createWalletClient, http, type Hash, type Hex } from 'viem';
import { privateKeyToAccount } from 'viem/accounts';
import { isTerminalStatus, type JobStatus, type LogLine } from '@gpufarm/shared';
import { ANVIL_ACCOUNTS } from '@gpufarm/control-plane/chain/anvil.js';
import { chainFor } from '@gpufarm/control-plane/chain/client.js';
import { loadConfig } from '@gpufarm/control-plane/config.js';
import { LABEL_JOB, LABEL_OWNER } from '@gpufarm/agent/runtime/labels.js';
import { LOCAL_CUSTOMER, localChainEnv, startLocalChain } from '../chain/local-chain.js';
import { readLocalImages, startLocalAgent, type LocalAgent } from '../local-agent.js';
import { createBenchDatabase } from './database.js';
import { startControlPlaneProcess, type BenchServer } from './server.js';
import type { StandaloneSection } from './standalone.js';

const run = promisify(execFile);

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
/** The container waits this long before its first line, so both readers follow it from the start. */
const LEAD_SECONDS = 3;

/**
 * The job's command: after `LEAD_SECONDS`, `count` lines `gfb <n> <seconds.micros>` paced at
 * `rate` a second from busybox ash's `$EPOCHREALTIME` (no fork per line): every ~2 ms it writes
 * the lines that are due, each with its own write time.
 */
function writerScript(rate: number, count: number): string {
  return [
    `sleep ${LEAD_SECONDS}`,
    't=$EPOCHREALTIME; t0=${t%.*}${t#*.}; i=0',
    `while [ $i -lt ${count} ]; do`,
    `  t=$EPOCHREALTIME; due=$(( (\${t%.*}\${t#*.} - t0) * ${rate} / 1000000 ))`,
    `  [ $due -gt ${count} ] && due=${count}`,
    '  while [ $i -lt $due ]; do echo "gfb $i $EPOCHREALTIME"; i=$((i+1)); done',
    '  usleep 2000',
    'done',
  ].join('\n');
}

const LINE = /^gfb (\d+) (\d+)\.(\d{6})$/;
/** Wall-clock milliseconds with sub-millisecond precision (the container writes microseconds). */
const nowMs = () => performance.timeOrigin + performance.now();

/** What one reader saw: per line number, the write time and the read time (ms since the epoch). */
class Reader {
  readonly writtenMs = new Map<number, number>();
  readonly latencyMs = new Map<number, number>();
  duplicates = 0;
  take(text: string, readMs: number): void {
    const m = LINE.exec(text);
    if (!m) return;
    const n = Number(m[1]);
    if (this.latencyMs.has(n)) {
      this.duplicates += 1;
      return;
    }
    const written = Number(m[2]) * 1000 + Number(m[3]) / 1000;
    this.writtenMs.set(n, written);
    this.latencyMs.set(n, readMs - written);
  }
}

interface Figures {
  lines: number;
  ratePerSecond: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
}

function figures(reader: Reader): Figures {
  const lat = [...reader.latencyMs.values()].sort((a, b) => a - b);
  const at = (q: number) => (lat.length === 0 ? NaN : lat[Math.min(lat.length - 1, Math.ceil(q * lat.length) - 1)]!);
  const written = [...reader.writtenMs.values()];
  const span = (Math.max(...written) - Math.min(...written)) / 1000;
  return { lines: lat.length, ratePerSecond: span > 0 ? (lat.length - 1) / span : 0, p50: at(0.5), p95: at(0.95), p99: at(0.99), max: lat.at(-1) ?? NaN };
}

async function json<T>(res: Response, what: string): Promise<T> {
  const text = await res.text();
  if (!res.ok) throw new Error(`${what} answered ${res.status}: ${text.slice(0, 300)}`);
  return JSON.parse(text) as T;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Follows the job's log as Server-Sent Events (`GET /v1/jobs/:id/logs/stream`), stamping each
 * line as its event arrives; returns at the stream's `end` event.
 */
async function followStream(url: string, apiKey: string, reader: Reader): Promise<void> {
  const res = await fetch(url, { headers: { authorization: `Bearer ${apiKey}`, accept: 'text/event-stream' } });
  if (res.status !== 200 || !res.body) throw new Error(`GET logs/stream answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
  const decoder = new TextDecoder();
  let buffered = '';
  for await (const chunk of res.body) {
    const readMs = nowMs();
    buffered += decoder.decode(chunk, { stream: true });
    for (let end = buffered.indexOf('\n\n'); end >= 0; end = buffered.indexOf('\n\n')) {
      const event = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      let type = 'message';
      let data = '';
      for (const field of event.split('\n')) {
        if (field.startsWith('event:')) type = field.slice(6).trim();
        else if (field.startsWith('data:')) data += field.slice(5).trimStart();
      }
      if (type === 'log') reader.take((JSON.parse(data) as LogLine).line, readMs);
      if (type === 'end') return;
    }
  }
}

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
    const images = readLocalImages();
    if (!images) throw new Error('.gpufarm/images.json is missing: run bash scripts/build-images.sh');
    const count = RATE * SECONDS;
    const root = mkdtempSync(join(tmpdir(), 'gf-bench-loglat-'));
    const docker = new Docker();
    const cleanups: Array<() => Promise<unknown>> = [];
    let agentOutput: string[] = [];
    let machineId: string | null = null;
    try {
      const serverUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://gpufarm:gpufarm@127.0.0.1:5432/postgres';
      const database = await createBenchDatabase(serverUrl);
      cleanups.push(() => database.drop());
      const chainId = loadConfig().chainId;
      const chain = await startLocalChain({ dataDir: join(root, 'chain'), chainId, challengeWindowSeconds: 3600 });
      cleanups.push(() => chain.anvil.stop());
      const adminToken = randomBytes(32).toString('base64url');
      const server: BenchServer = await startControlPlaneProcess({
        databaseUrl: database.url,
        readyPath: '/v1',
        env: { ...localChainEnv(chain), GF_CANARY_IMAGE: images.images.canary.reference, GF_ADMIN_TOKEN: adminToken, GF_ARTIFACT_DIR: join(root, 'artifacts'), GF_MATCH_INTERVAL_MS: '200', GF_ESCROW_SWEEP_MS: '500', GF_CHAIN_HEALTH_MS: '500' },
      });
      cleanups.push(() => server.stop());

      const agent: LocalAgent = await startLocalAgent({
        server: server.url,
        adminToken,
        stateDir: join(root, 'agent'),
        payout: ANVIL_ACCOUNTS[2].address,
        simulateGpus: '1x rtx-4090-24gb',
        egressProxyImage: null,
        log: (line) => (agentOutput = [...agentOutput.slice(-30), line]),
      });
      machineId = agent.machineId;
      cleanups.push(() => agent.stop());
      log(`marketplace: control plane pid ${server.pid} (database ${database.name}), anvil at ${chain.anvil.rpcUrl}, agent pid ${agent.pid} (machine ${agent.machineId}, 1 simulated GPU)`);

      const admin = await json<{ key: string }>(
        await fetch(`${server.url}/admin/v1/api-keys`, {
          method: 'POST',
          headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
          body: JSON.stringify({ walletAddress: LOCAL_CUSTOMER.address, scopes: ['jobs:create', 'jobs:read', 'artifacts:read'], label: 'bench' }),
        }),
        'POST /admin/v1/api-keys',
      );
      let rateLimited = 0;
      const api = async <T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> => {
        for (;;) {
          const res = await fetch(`${server.url}${path}`, {
            method,
            headers: { authorization: `Bearer ${admin.key}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
            body: body === undefined ? undefined : JSON.stringify(body),
          });
          if (res.status === 429) {
            rateLimited += 1;
            await sleep(Number(res.headers.get('retry-after') ?? 1) * 1000);
            continue;
          }
          const text = await res.text();
          return { status: res.status, body: (text ? JSON.parse(text) : null) as T };
        }
      };

      // The customer: create, fund from the wallet, fund-confirm.
      const created = await api<{ job: { id: string }; funding: { calls: Array<{ title: string; to: Hex; data: Hex; value: string }> } | null }>('POST', '/v1/jobs', {
        title: 'bench log latency',
        image: images.images.busybox.reference,
        command: ['sh', '-c', writerScript(RATE, count)],
        workloadType: 'batch',
        gpu: { count: 1 },
        maxRuntimeSeconds: 600,
        maxPricePerGpuHour: '2.00',
        paymentToken: 'stable',
      });
      if (created.status !== 201 || !created.body.funding) throw new Error(`POST /v1/jobs answered ${created.status}: ${JSON.stringify(created.body).slice(0, 300)}`);
      const jobId = created.body.job.id;
      const viemChain = chainFor(chainId, chain.anvil.rpcUrl);
      const publicClient = createPublicClient({ chain: viemChain, transport: http(chain.anvil.rpcUrl), pollingInterval: 100 });
      const wallet = createWalletClient({ chain: viemChain, transport: http(chain.anvil.rpcUrl), account: privateKeyToAccount(LOCAL_CUSTOMER.privateKey) });
      let fundTx: Hash | null = null;
      for (const call of created.body.funding.calls) {
        fundTx = await wallet.sendTransaction({ to: call.to, data: call.data, value: BigInt(call.value) });
        const receipt = await publicClient.waitForTransactionReceipt({ hash: fundTx });
        if (receipt.status !== 'success') throw new Error(`funding call "${call.title}" reverted`);
      }
      for (let i = 0; ; i++) {
        const confirmed = await api<{ status?: string }>('POST', `/v1/jobs/${jobId}/fund-confirm`, { txHash: fundTx });
        if (confirmed.status === 200 && confirmed.body.status === 'confirmed') break;
        if (confirmed.status !== 202 || i > 100) throw new Error(`fund-confirm answered ${confirmed.status}: ${JSON.stringify(confirmed.body).slice(0, 300)}`);
        await sleep(300);
      }
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
      const streamed = followStream(`${server.url}/v1/jobs/${jobId}/logs/stream?cursor=0`, admin.key, viaStream);
      // Both followers are awaited only after the poll loop; until then a failure of either must
      // not crash the process as an unhandled rejection (which skips the cleanups below): it is
      // thrown where each is awaited.
      for (const pending of [follower, streamed]) pending.catch(() => undefined);
      let cursor = '0';
      let polls = 0;
      while (viaApi.latencyMs.size < count || !isTerminalStatus(jobStatus)) {
        if (Date.now() > deadline) throw new Error(`after ${polls} polls: ${viaApi.latencyMs.size}/${count} lines through the API, job ${jobStatus}\n${agentOutput.join('\n')}`);
        const started = Date.now();
        const page = await api<{ jobStatus: JobStatus; nextCursor: string; data: LogLine[] }>('GET', `/v1/jobs/${jobId}/logs?cursor=${cursor}&limit=1000`);
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
      const rows = [
        ['path (latency from the container\'s write, ms)', 'lines', 'lines/s', 'p50', 'p95', 'p99', 'max', 'target', 'result'],
        [`logs API: agent, control plane, GET /v1/jobs/:id/logs every ${POLL_MS} ms`, `${a.lines}/${count}`, a.ratePerSecond.toFixed(0), ms(a.p50), ms(a.p95), ms(a.p99), ms(a.max), `p99 < ${TARGET_P99_MS} ms`, pass ? 'PASS' : 'FAIL'],
        ['live stream: agent, control plane, GET /v1/jobs/:id/logs/stream (SSE)', `${st.lines}/${count}`, st.ratePerSecond.toFixed(0), ms(st.p50), ms(st.p95), ms(st.p99), ms(st.max), `p99 <= ${TARGET_STREAM_P99_MS} ms`, streamPass ? 'PASS' : 'FAIL'],
        ['baseline: Engine API log follow (docker logs -f) of the same container', `${d.lines}/${count}`, d.ratePerSecond.toFixed(0), ms(d.p50), ms(d.p95), ms(d.p99), ms(d.max), 'baseline', ''],
      ];
      const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
      const render = (r: string[]) => r.map((c, i) => (i >= 1 && i <= 6 ? c.padStart(widths[i]!) : c.padEnd(widths[i]!))).join('  ').trimEnd();
      const table = [render(rows[0]!), widths.map((w) => '-'.repeat(w)).join('  '), ...rows.slice(1).map(render)];
      table.push(
        `the pipeline adds ${ms(a.p50 - d.p50)} ms at p50 and ${ms(a.p99 - d.p99)} ms at p99; ${polls} polls, ${rateLimited} answered 429; ${viaApi.duplicates} lines read twice through the API, ${viaStream.duplicates} through the stream; job ${jobStatus}; load average ${loadavg().map((x) => x.toFixed(2)).join(' ')}`,
      );
      const missed = pass ? [] : [`log latency: ${a.lines}/${count} lines, p99 ${ms(a.p99)} ms through the logs API (target < ${TARGET_P99_MS} ms)`];
      if (!streamPass) missed.push(`log latency: ${st.lines}/${count} lines, p99 ${ms(st.p99)} ms through the live stream (target <= ${TARGET_STREAM_P99_MS} ms)`);
      if (d.lines < count) missed.push(`log latency: the baseline read ${d.lines}/${count} lines, so the comparison is incomplete`);
      return { table, missed };
    } finally {
      while (cleanups.length > 0) await cleanups.pop()!().catch((err: unknown) => log(`log latency cleanup: ${(err as Error).message}`));
      // The agent leaves its containers when stopped; remove them and release its /output loop mounts.
      if (machineId) {
        for (const c of await docker.listContainers({ all: true, filters: { label: [`${LABEL_OWNER}=${machineId}`] } })) await docker.getContainer(c.Id).remove({ force: true, v: true }).catch(() => undefined);
      }
      const mounts = readFileSync('/proc/mounts', 'utf8').split('\n').map((l) => l.split(' ')[1] ?? '').filter((p) => p.startsWith(root));
      for (const point of mounts.sort((x, y) => y.length - x.length)) await run('umount', ['-l', point]).catch(() => undefined);
      rmSync(root, { recursive: true, force: true });
    }
  },
};
