import { createHash } from 'node:crypto';
import type { Account, Chain, Hash, Hex, Transport, WalletClient } from 'viem';
import { apiRequest, fundingGasLimit, type HttpAnswer } from '@gpufarm/client';
import { isTerminalStatus, MACHINE_NOTE_PREFIX, type Job, type JobEstimate, type JobStatus, type LogLine } from '@gpufarm/shared';
import type { Marketplace } from './marketplace.js';
import { until } from './wait.js';

export interface CreatedJob {
  job: Job;
  estimate: JobEstimate;
  funding: { signer: string; calls: { title: string; to: Hex; data: Hex; value: string }[] } | null;
}

export interface Download {
  /** The 302's status and headers. */
  redirect: HttpAnswer<unknown>;
  location: string;
  sha256Header: string | null;
  sizeHeader: string | null;
  /** The bytes the signed URL served. */
  bytes: Buffer;
  sha256: string;
}

/**
 * A customer as the public API sees one: an API key (made through the admin API) and a viem
 * wallet (an anvil dev account) that funds its jobs. Only public HTTP and the chain.
 */
export class Customer {
  private constructor(
    readonly market: Marketplace,
    readonly wallet: WalletClient<Transport, Chain, Account>,
    readonly apiKey: string,
    /** Where its calls go: the marketplace's URL, or one replica's (`via`). */
    readonly baseUrl: string = market.url,
  ) {}

  static async create(market: Marketplace, walletIndex: 1 | 2 | 3): Promise<Customer> {
    const wallet = market.wallet(walletIndex);
    return new Customer(market, wallet, await market.createApiKey(wallet.account.address));
  }

  /** The same customer calling `baseUrl` (one replica, past the load balancer). */
  via(baseUrl: string): Customer {
    return new Customer(this.market, this.wallet, this.apiKey, baseUrl);
  }

  request<T = unknown>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<HttpAnswer<T>> {
    return apiRequest<T>(this.baseUrl, this.apiKey, method, path, { body, headers });
  }

  /** `POST /v1/jobs`; throws unless 201. */
  async createJob(spec: Record<string, unknown>): Promise<CreatedJob> {
    const res = await this.request<CreatedJob>('POST', '/v1/jobs', spec);
    if (res.status !== 201) throw new Error(`POST /v1/jobs answered ${res.status}: ${JSON.stringify(res.body)}`);
    return res.body;
  }

  /** Sends the funding calls in order from the wallet, each mined; returns the last (createJob) hash. */
  async fund(created: CreatedJob): Promise<Hash> {
    if (!created.funding) throw new Error(`job ${created.job.id} has no funding calls: ${JSON.stringify(created)}`);
    let last: Hash | null = null;
    for (const call of created.funding.calls) {
      // With a wallet's headroom, as `gf fund` sends it: the estimate alone reverts when a release empties the escrow's balance first.
      const request = { to: call.to, data: call.data, value: BigInt(call.value) };
      const gas = fundingGasLimit(await this.market.publicClient.estimateGas({ account: this.wallet.account, ...request }));
      last = await this.wallet.sendTransaction({ ...request, gas });
      const receipt = await this.market.publicClient.waitForTransactionReceipt({ hash: last });
      if (receipt.status !== 'success') throw new Error(`funding call "${call.title}" reverted (${last})`);
    }
    return last!;
  }

  /** `POST fund-confirm` until it is not 202; returns the final answer. */
  async fundConfirm(jobId: string, txHash: Hash): Promise<HttpAnswer<{ status: string; job: Job }>> {
    return until(
      async () => {
        const res = await this.request<{ status: string; job: Job }>('POST', `/v1/jobs/${jobId}/fund-confirm`, { txHash });
        return res.status === 202 ? undefined : res;
      },
      `fund-confirm of ${jobId}`,
      { timeoutMs: 30_000, intervalMs: 300 },
    );
  }

  /** Creates, funds and confirms a job; returns it as fund-confirm answered (QUEUED). */
  async createFundedJob(spec: Record<string, unknown>): Promise<{ created: CreatedJob; fundTx: Hash; job: Job }> {
    const created = await this.createJob(spec);
    const fundTx = await this.fund(created);
    const confirmed = await this.fundConfirm(created.job.id, fundTx);
    if (confirmed.status !== 200 || confirmed.body.status !== 'confirmed') throw new Error(`fund-confirm of ${created.job.id} answered ${confirmed.status}: ${JSON.stringify(confirmed.body)}`);
    return { created, fundTx, job: confirmed.body.job };
  }

  async getJob(id: string): Promise<Job> {
    const res = await this.request<Job>('GET', `/v1/jobs/${id}?include=startup`);
    if (res.status !== 200) throw new Error(`GET /v1/jobs/${id} answered ${res.status}: ${JSON.stringify(res.body)}`);
    return res.body;
  }

  /** Waits until the job's status is one of `statuses` (fails early on another terminal one). */
  async waitForStatus(id: string, statuses: JobStatus[], timeoutMs = 90_000): Promise<Job> {
    let last: Job | null = null;
    return until(
      async () => {
        last = await this.getJob(id);
        if (statuses.includes(last.status)) return last;
        if (isTerminalStatus(last.status)) throw new Error(`job ${id} ended ${last.status}, not ${statuses.join('/')}: ${JSON.stringify(last)}`);
        return undefined;
      },
      `job ${id} to reach ${statuses.join(' or ')}`,
      { timeoutMs, intervalMs: 250, describe: () => `${JSON.stringify(last)}\n${this.market.diagnostics(15)}` },
    ).catch((err: unknown) => {
      // A job that ended otherwise is an answer, not a timeout.
      if (last && isTerminalStatus((last as Job).status) && !statuses.includes((last as Job).status)) throw new Error(`job ${id} ended ${(last as Job).status}, not ${statuses.join('/')}: ${JSON.stringify(last)}`);
      throw err;
    });
  }

  /**
   * Tails the job's logs as a client does (`cursor` from `0`, repeating with `nextCursor`) until
   * the job is terminal and no new line arrived; returns every line read, in order.
   */
  async tailLogs(id: string, options: { timeoutMs?: number; onLine?: (line: LogLine) => void } = {}): Promise<{ lines: LogLine[]; jobStatus: JobStatus; cursors: string[] }> {
    const lines: LogLine[] = [];
    const cursors: string[] = [];
    let cursor = '0';
    let jobStatus: JobStatus = 'CREATED';
    await until(
      async () => {
        const res = await this.request<{ object: string; jobStatus: JobStatus; nextCursor: string; data: LogLine[] }>('GET', `/v1/jobs/${id}/logs?cursor=${cursor}&limit=1000`);
        if (res.status !== 200) throw new Error(`GET logs answered ${res.status}: ${JSON.stringify(res.body)}`);
        for (const line of res.body.data) {
          lines.push(line);
          options.onLine?.(line);
        }
        cursors.push(res.body.nextCursor);
        const moved = res.body.nextCursor !== cursor;
        cursor = res.body.nextCursor;
        jobStatus = res.body.jobStatus;
        return isTerminalStatus(jobStatus) && !moved && res.body.data.length === 0 ? true : undefined;
      },
      `the logs of job ${id} to end`,
      { timeoutMs: options.timeoutMs ?? 120_000, intervalMs: 300, describe: () => `status ${jobStatus}, ${lines.length} lines, last: ${JSON.stringify(lines.slice(-3))}\n${this.market.diagnostics(15)}` },
    );
    return { lines, jobStatus, cursors };
  }

  /** `GET /v1/artifacts/:id` (the 302), then the signed URL it points at, without the API key. */
  async download(artifactId: string): Promise<Download> {
    const redirect = await this.request('GET', `/v1/artifacts/${artifactId}`);
    const location = redirect.headers.get('location');
    if (redirect.status !== 302 || !location) throw new Error(`GET /v1/artifacts/${artifactId} answered ${redirect.status}, not a 302: ${JSON.stringify(redirect.body)}`);
    const target = new URL(location, this.baseUrl);
    const res = await fetch(target);
    if (res.status !== 200) throw new Error(`the signed URL ${target.pathname} answered ${res.status}: ${await res.text()}`);
    const bytes = Buffer.from(await res.arrayBuffer());
    return {
      redirect,
      location,
      sha256Header: redirect.headers.get('x-artifact-sha256'),
      sizeHeader: redirect.headers.get('x-artifact-size'),
      bytes,
      sha256: createHash('sha256').update(bytes).digest('hex'),
    };
  }
}

/** The job's lines of one stream from one assignment (the service's own lines use the job id). */
export function linesOf(lines: LogLine[], stream: LogLine['stream'], assignmentId?: string): LogLine[] {
  return lines.filter((l) => l.stream === stream && (assignmentId === undefined || l.assignmentId === assignmentId));
}

/** The job's own output on `stream`: its lines less the machine's notes stored on stderr. */
export function outputOf(lines: LogLine[], stream: 'stdout' | 'stderr'): LogLine[] {
  return linesOf(lines, stream).filter((l) => !l.line.startsWith(MACHINE_NOTE_PREFIX));
}

/** The machine's own notes (pulling, started, exited with code…), without their prefix. */
export function machineNotesOf(lines: LogLine[]): string[] {
  return linesOf(lines, 'stderr').flatMap((l) => (l.line.startsWith(MACHINE_NOTE_PREFIX) ? [l.line.slice(MACHINE_NOTE_PREFIX.length)] : []));
}
