import {
  artifactMetadataSchema,
  billingListSchema,
  capacityListSchema,
  fundConfirmPendingSchema,
  fundConfirmResponseSchema,
  fundingSchema,
  jobCreatedSchema,
  type jobCreateRequestSchema,
  jobListSchema,
  jobSchema,
  jobTemplateListSchema,
  jobTemplateSchema,
  logListSchema,
  pricingSchema,
  serviceIndexSchema,
  type ArtifactMetadata,
  type BillingEntry,
  type BillingList,
  type CapacityList,
  type CapacityOffer,
  type FundConfirmPending,
  type FundConfirmResponse,
  type Funding,
  type Job,
  type JobCreated,
  type JobList,
  type JobStatus,
  type JobTemplate,
  type JobTemplateList,
  type LogLine,
  type LogList,
  type LogStream,
  type Pricing,
  type ServiceIndex,
} from '@gpufarm/shared';
import type { z } from 'zod';
import { GfError } from './errors.js';
import { createTransport, newIdempotencyKey, type Query, type TransportOptions } from './transport.js';
import { followLogs, type FollowLogsEnd, type FollowLogsOptions } from './follow.js';
import { fundJob, type FundingWallet, type FundJobOptions } from './fund.js';
import { waitForJob, type WaitOptions } from './wait.js';

export type ClientOptions = TransportOptions;

/** The body of `POST /v1/jobs` as a caller writes it (before the server applies defaults). */
export type JobSpec = z.input<typeof jobCreateRequestSchema>;

/** Query of `GET /v1/capacity`, as the spec names its parameters. */
export interface CapacityQuery {
  model?: string;
  minVram?: number;
  /** USD per GPU-hour; a decimal string (e.g. from `formatMicroUsd`) keeps it exact. */
  maxPrice?: number | string;
  farm?: string;
  region?: string;
  minUptime?: number;
  workload?: string;
  cuda?: string;
  availability?: 'available' | 'all';
  tier?: 'S' | 'A' | 'B' | 'C';
  /** true: only machines that proved their GPUs with a GPU challenge (each offer's `proof`); false or absent: every machine. */
  proven?: boolean;
  sort?: 'available' | 'price_asc' | 'price_desc' | 'vram' | 'uptime' | 'count';
  limit?: number;
  cursor?: string;
}

export interface JobListQuery {
  status?: readonly JobStatus[];
  limit?: number;
  cursor?: string;
}

export interface LogQuery {
  cursor?: string;
  limit?: number;
  stream?: LogStream;
}

export interface PageQuery {
  limit?: number;
  cursor?: string;
}

export interface BillingQuery extends PageQuery {
  /** One job's entries only. */
  jobId?: string;
}

/** Where a `GET /v1/artifacts/:id` redirect points, with the integrity headers it carried. */
export interface ArtifactLocation {
  url: string;
  sha256: string;
  sizeBytes: number;
  requestId: string | null;
}

const SHA256_HEX = /^[0-9a-f]{64}$/;

/** Walks a cursor-paged list, one item at a time, asking for the next page only when needed. */
async function* walk<T>(page: (cursor: string | undefined) => Promise<{ data: T[]; nextCursor: string | null }>, first?: string): AsyncGenerator<T> {
  let cursor = first;
  for (;;) {
    const { data, nextCursor } = await page(cursor);
    yield* data;
    if (nextCursor === null || data.length === 0) return;
    cursor = nextCursor;
  }
}

/**
 * The gpufarm API without Node: one typed method per `/v1` endpoint, each answer checked
 * against the `shared` schema of its resource, failures as `GfError`. Everything `createClient`
 * has except writing an artifact to a file; `transport` is the HTTP edge it uses.
 *
 * @example
 * const gf = createBrowserClient({ baseUrl: `${location.origin}/dashboard/api` });
 * const page = await gf.jobs.list({ status: ['RUNNING'] });
 */
export function createBrowserClient(options: ClientOptions) {
  const transport = createTransport(options);
  const { request } = transport;
  const id = (value: string) => encodeURIComponent(value);

  const get = async <T>(path: string, schema: z.ZodType<T>, query?: Query, signal?: AbortSignal): Promise<T> =>
    (await request({ method: 'GET', path, query, expect: { 200: schema }, retry: true, signal })).body;

  const capacity = {
    list: (query: CapacityQuery = {}): Promise<CapacityList> => get('/v1/capacity', capacityListSchema, { ...query }),
    listAll: (query: Omit<CapacityQuery, 'cursor'> = {}): AsyncGenerator<CapacityOffer> => walk((cursor) => capacity.list({ ...query, cursor })),
  };

  const jobs = {
    /**
     * `POST /v1/jobs`. Always sends an `Idempotency-Key` (a new one unless given) and keeps it
     * across retries, so a retried creation answers the first job instead of making a second.
     */
    create: async (spec: JobSpec, opts: { idempotencyKey?: string; signal?: AbortSignal } = {}): Promise<JobCreated> =>
      (
        await request({
          method: 'POST',
          path: '/v1/jobs',
          body: spec,
          headers: { 'idempotency-key': opts.idempotencyKey ?? newIdempotencyKey() },
          expect: { 200: jobCreatedSchema, 201: jobCreatedSchema },
          retry: true,
          signal: opts.signal,
        })
      ).body,
    list: (query: JobListQuery = {}): Promise<JobList> => get('/v1/jobs', jobListSchema, { ...query }),
    listAll: (query: Omit<JobListQuery, 'cursor'> = {}): AsyncGenerator<Job> => walk((cursor) => jobs.list({ ...query, cursor })),
    /** `GET /v1/jobs/:id`, with the start phases (`include=startup`). */
    get: (jobId: string, opts: { signal?: AbortSignal } = {}): Promise<Job> => get(`/v1/jobs/${id(jobId)}`, jobSchema, { include: 'startup' }, opts.signal),
    /** `POST /v1/jobs/:id/cancel`; not retried (a POST other than creation). */
    cancel: async (jobId: string, opts: { reason?: string } = {}): Promise<Job> =>
      (await request({ method: 'POST', path: `/v1/jobs/${id(jobId)}/cancel`, body: opts.reason === undefined ? {} : { reason: opts.reason }, expect: { 200: jobSchema }, retry: false })).body,
    funding: (jobId: string): Promise<Funding> => get(`/v1/jobs/${id(jobId)}/funding`, fundingSchema),
    /** `POST /v1/jobs/:id/fund-confirm`: `confirmed` (200) or `pending` (202, ask again later). */
    fundConfirm: async (jobId: string, txHash: string): Promise<FundConfirmResponse | FundConfirmPending> =>
      (
        await request<FundConfirmResponse | FundConfirmPending>({
          method: 'POST',
          path: `/v1/jobs/${id(jobId)}/fund-confirm`,
          body: { txHash },
          expect: { 200: fundConfirmResponseSchema, 202: fundConfirmPendingSchema },
          retry: false,
        })
      ).body,
    logs: (jobId: string, query: LogQuery = {}, opts: { signal?: AbortSignal } = {}): Promise<LogList> => get(`/v1/jobs/${id(jobId)}/logs`, logListSchema, { ...query }, opts.signal),
  };

  const artifacts = {
    /** `POST /v1/artifacts`: stores bytes as a job input. Not retried. */
    upload: async (bytes: Uint8Array, opts: { filename?: string } = {}): Promise<ArtifactMetadata> =>
      (await request({ method: 'POST', path: '/v1/artifacts', query: { filename: opts.filename }, body: bytes, expect: { 201: artifactMetadataSchema }, retry: false })).body,
    /** `GET /v1/artifacts/:id?format=json`: metadata and a signed URL valid for 120 s. */
    get: (artifactId: string): Promise<ArtifactMetadata> => get(`/v1/artifacts/${id(artifactId)}`, artifactMetadataSchema, { format: 'json' }),
    /** `GET /v1/artifacts/:id` without following its 302: the signed URL and the recorded hash and size. */
    location: async (artifactId: string, opts: { signal?: AbortSignal } = {}): Promise<ArtifactLocation> => {
      const path = `/v1/artifacts/${id(artifactId)}`;
      const answer = await request({ method: 'GET', path, headers: { accept: '*/*' }, expect: { 302: null }, retry: true, signal: opts.signal });
      const location = answer.headers.get('location');
      const sha256 = answer.headers.get('x-artifact-sha256');
      const size = Number(answer.headers.get('x-artifact-size'));
      const missing = [
        ...(location ? [] : [{ field: 'Location', message: 'Location header is missing' }]),
        ...(sha256 && SHA256_HEX.test(sha256) ? [] : [{ field: 'X-Artifact-Sha256', message: 'X-Artifact-Sha256 is not 64 lower-case hex digits' }]),
        ...(Number.isSafeInteger(size) && size >= 0 ? [] : [{ field: 'X-Artifact-Size', message: 'X-Artifact-Size is not a byte count' }]),
      ];
      if (missing.length > 0) {
        throw new GfError('invalid_response', `GET ${path} answered a redirect without ${missing.map((m) => m.field).join(', ')}.`, { status: answer.status, requestId: answer.requestId, details: missing });
      }
      return { url: new URL(location!, transport.baseUrl).toString(), sha256: sha256!, sizeBytes: size, requestId: answer.requestId };
    },
  };

  const billing = {
    list: (query: BillingQuery = {}): Promise<BillingList> => get('/v1/billing', billingListSchema, { ...query }),
    listAll: (query: Omit<BillingQuery, 'cursor'> = {}): AsyncGenerator<BillingEntry> => walk((cursor) => billing.list({ ...query, cursor })),
  };

  const templates = {
    /** `GET /v1/templates`: the built-in templates this deployment can run, then the account's own by name. */
    list: (): Promise<JobTemplateList> => get('/v1/templates', jobTemplateListSchema),
    /** `GET /v1/templates/:name`: one template, built-in or the account's own. */
    get: (name: string): Promise<JobTemplate> => get(`/v1/templates/${id(name)}`, jobTemplateSchema),
    /**
     * `PUT /v1/templates/:name`: saves `spec` as the account's template `name`, replacing one of
     * that name; with `createOnly` a taken name is a 409 `conflict` instead (and the call is not retried).
     */
    save: async (name: string, body: { spec: JobSpec; description?: string | null }, opts: { createOnly?: boolean } = {}): Promise<JobTemplate> =>
      (
        await request({
          method: 'PUT',
          path: `/v1/templates/${id(name)}`,
          body,
          headers: opts.createOnly ? { 'if-none-match': '*' } : {},
          expect: { 200: jobTemplateSchema, 201: jobTemplateSchema },
          retry: !opts.createOnly,
        })
      ).body,
    /** `DELETE /v1/templates/:name`: deletes one of the account's templates. Not retried. */
    delete: async (name: string): Promise<void> => {
      await request({ method: 'DELETE', path: `/v1/templates/${id(name)}`, expect: { 204: null }, retry: false });
    },
  };

  const client = {
    /** `GET /v1`: the deployment, its chain and where each resource lives. */
    index: (): Promise<ServiceIndex> => get('/v1', serviceIndexSchema),
    pricing: (): Promise<Pricing> => get('/v1/pricing', pricingSchema),
    capacity,
    jobs,
    artifacts,
    billing,
    templates,
    /** Polls a job until it reaches a final status; see `WaitOptions`. */
    waitForJob: (jobId: string, opts: WaitOptions = {}): Promise<Job> => waitForJob((signal) => jobs.get(jobId, { signal }), jobId, opts),
    /**
     * Every log line of a job from `opts.cursor` (or the start) until the job has ended, over the
     * live stream (resumed after a dropped connection, polling when no stream is served); the
     * generator returns `{ jobStatus, nextCursor }`. See `FollowLogsOptions`.
     */
    followLogs: (jobId: string, opts: FollowLogsOptions = {}): AsyncGenerator<LogLine, FollowLogsEnd, undefined> =>
      followLogs({ openStream: transport.openStream, logs: (job, query, signal) => jobs.logs(job, query, { signal }) }, jobId, opts),
    /** Funds a job's escrow from `wallet` and confirms it; see the module function `fundJob`. */
    fundJob: (job: string | Pick<Job, 'id'>, wallet: FundingWallet, opts: FundJobOptions = {}): Promise<FundConfirmResponse> => fundJob({ index: client.index, jobs }, job, wallet, opts),
  };
  return { ...client, transport };
}

export type BrowserClient = ReturnType<typeof createBrowserClient>;
