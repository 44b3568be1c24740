import {
  artifactMetadataSchema,
  billingListSchema,
  capacityListSchema,
  ERROR_CODES,
  errorEnvelopeSchema,
  fundConfirmPendingSchema,
  fundConfirmRequestSchema,
  fundConfirmResponseSchema,
  fundingSchema,
  jobCreatedSchema,
  jobCreateRequestSchema,
  jobListSchema,
  jobSchema,
  jobTemplateListSchema,
  jobTemplateSchema,
  logListSchema,
  outputFileListSchema,
  pricingSchema,
  serviceIndexSchema,
  SERVICE_VERSION,
  templateSaveRequestSchema,
  type ApiKeyScope,
  type ErrorCode,
} from '@gpufarm/shared';
import { z } from 'zod';
import { createDocument, type ZodOpenApiOperationObject, type ZodOpenApiPathsObject, type ZodOpenApiResponsesObject } from 'zod-openapi';
import { fileIndexParams } from '../artifacts/output-files-routes.js';
import { artifactParams, artifactQuery, uploadQuery } from '../artifacts/routes.js';
import { querySchema as billingQuerySchema } from '../billing/routes.js';
import { querySchema as capacityQuerySchema } from '../capacity/query.js';
import { jobParams } from '../jobs/account-job.js';
import { cancelBody, IDEMPOTENCY_KEY, listQuery as jobListQuery } from '../jobs/routes.js';
import { logsQuery, logStreamQuery } from '../logs/routes.js';
import { templateParams } from '../templates/routes.js';

type Method = 'get' | 'head' | 'post' | 'put' | 'delete';

/** A success answer: its status, what it means, and its body (a zod schema, raw bytes, or Server-Sent Events). */
interface Success {
  status: number;
  description: string;
  body?: z.ZodType | 'bytes' | 'openapi' | 'event-stream';
  headers?: Record<string, string>;
}

/**
 * One documented route. `path` is written as the server registers it (`/v1/jobs/:id`); the
 * document shows it as `/v1/jobs/{id}`. `errors` are the codes the route can answer, grouped
 * by status in the document.
 */
export interface DocumentedRoute {
  method: Method;
  path: string;
  operationId: string;
  summary: string;
  auth: 'public' | ApiKeyScope | 'signed_url';
  params?: z.ZodObject;
  query?: z.ZodObject;
  body?: z.ZodType | 'bytes';
  successes: Success[];
  errors: ErrorCode[];
}

const AUTH_ERRORS: ErrorCode[] = ['missing_api_key', 'invalid_api_key', 'revoked_api_key', 'wrong_environment', 'insufficient_scope', 'account_suspended'];
/** Any route can answer these: another method on its path, the rate limit, a server fault. */
const ANY_ROUTE_ERRORS: ErrorCode[] = ['method_not_allowed', 'rate_limited', 'internal', 'unavailable'];
const WRITE_ERRORS: ErrorCode[] = ['invalid_json', 'payload_too_large', 'request_timeout'];

const fileParams = artifactParams;
const fileQuery = z.strictObject({ expires: z.string().describe('Unix seconds the signature expires at'), sig: z.string().describe('The URL signature') });
const INTEGRITY_HEADERS = { 'X-Artifact-Sha256': 'SHA-256 of the artifact bytes (hex)', 'X-Artifact-Size': 'Size of the artifact in bytes' };

/** Every route the document describes; the drift test compares it with the server's routes. */
export const DOCUMENTED_ROUTES: readonly DocumentedRoute[] = [
  { method: 'get', path: '/v1', operationId: 'getIndex', summary: 'This deployment: service version, chain id, environment, canary, whether simulated machines are offered, escrow, links', auth: 'public', successes: [{ status: 200, description: 'The deployment', body: serviceIndexSchema }], errors: [] },
  { method: 'get', path: '/v1/openapi.json', operationId: 'getOpenApi', summary: 'This OpenAPI 3.1 document', auth: 'public', successes: [{ status: 200, description: 'The document', body: 'openapi' }], errors: [] },
  { method: 'get', path: '/v1/capacity', operationId: 'listCapacity', summary: 'GPU offers, filtered and sorted', auth: 'public', query: capacityQuerySchema, successes: [{ status: 200, description: 'A page of offers', body: capacityListSchema }], errors: ['invalid_request'] },
  { method: 'get', path: '/v1/pricing', operationId: 'getPricing', summary: 'Prices and availability per GPU class, payment assets, fee', auth: 'public', successes: [{ status: 200, description: 'Pricing', body: pricingSchema }], errors: [] },
  {
    method: 'post', path: '/v1/jobs', operationId: 'createJob', summary: 'Create a job (validated, policy-checked, priced; nothing charged)', auth: 'jobs:create', body: jobCreateRequestSchema,
    successes: [{ status: 201, description: 'The job was created', body: jobCreatedSchema }, { status: 200, description: 'Replay of an earlier creation with the same Idempotency-Key and body', body: jobCreatedSchema }],
    errors: ['validation_error', 'policy_rejected', 'conflict', ...WRITE_ERRORS],
  },
  { method: 'get', path: '/v1/jobs', operationId: 'listJobs', summary: "The account's jobs, newest first", auth: 'jobs:read', query: jobListQuery, successes: [{ status: 200, description: 'A page of jobs', body: jobListSchema }], errors: ['invalid_request'] },
  { method: 'get', path: '/v1/jobs/:id', operationId: 'getJob', summary: 'One job', auth: 'jobs:read', params: jobParams, successes: [{ status: 200, description: 'The job', body: jobSchema }], errors: ['invalid_request', 'not_found'] },
  { method: 'get', path: '/v1/jobs/:id/funding', operationId: 'getJobFunding', summary: 'The ordered wallet calls that fund a CREATED job', auth: 'jobs:create', params: jobParams, successes: [{ status: 200, description: 'The funding calls', body: fundingSchema }], errors: ['invalid_request', 'not_found', 'conflict'] },
  {
    method: 'post', path: '/v1/jobs/:id/fund-confirm', operationId: 'confirmJobFunding', summary: 'Confirm funding: the service reads the transaction and its JobFunded event from the chain', auth: 'jobs:create', params: jobParams, body: fundConfirmRequestSchema,
    successes: [
      { status: 200, description: 'Funded; the job is QUEUED', body: fundConfirmResponseSchema },
      { status: 202, description: 'The transaction is unknown, pending or short of confirmations; call again after Retry-After', body: fundConfirmPendingSchema, headers: { 'Retry-After': 'Seconds to wait before calling again' } },
    ],
    errors: ['invalid_request', 'validation_error', 'not_found', 'conflict', 'funding_mismatch', ...WRITE_ERRORS],
  },
  { method: 'post', path: '/v1/jobs/:id/cancel', operationId: 'cancelJob', summary: 'Cancel a job (a running job is 409 conflict)', auth: 'jobs:create', params: jobParams, body: cancelBody, successes: [{ status: 200, description: 'The canceled job', body: jobSchema }], errors: ['invalid_request', 'validation_error', 'not_found', 'conflict', ...WRITE_ERRORS] },
  { method: 'get', path: '/v1/jobs/:id/logs', operationId: 'listJobLogs', summary: "The job's log lines after a cursor (tail by calling again with nextCursor)", auth: 'jobs:read', params: jobParams, query: logsQuery, successes: [{ status: 200, description: 'A page of log lines', body: logListSchema }], errors: ['invalid_request', 'not_found'] },
  { method: 'get', path: '/v1/jobs/:id/logs/stream', operationId: 'streamJobLogs', summary: "The job's log as Server-Sent Events from a cursor (or Last-Event-ID) until the job ends; beyond the spec", auth: 'jobs:read', params: jobParams, query: logStreamQuery, successes: [{ status: 200, description: 'The live log stream', body: 'event-stream' }], errors: ['invalid_request', 'not_found'] },
  {
    method: 'get', path: '/v1/artifacts/:id', operationId: 'getArtifact', summary: 'Download an artifact: a redirect to a signed URL valid 120 s, or its metadata as JSON', auth: 'artifacts:read', params: artifactParams, query: artifactQuery,
    successes: [
      { status: 302, description: 'Redirect to the signed URL (Location)', headers: { Location: 'The signed URL', ...INTEGRITY_HEADERS } },
      { status: 200, description: 'With format=json or Accept: application/json: the metadata and the signed URL', body: artifactMetadataSchema, headers: INTEGRITY_HEADERS },
    ],
    errors: ['invalid_request', 'not_found', 'gone'],
  },
  {
    method: 'get', path: '/v1/artifacts/:id/files', operationId: 'listArtifactFiles', summary: "An output tar's files (path, size, SHA-256), as the server indexed them when it settled the run; beyond the spec", auth: 'artifacts:read', params: artifactParams,
    successes: [{ status: 200, description: 'The file list', body: outputFileListSchema }],
    errors: ['invalid_request', 'not_found', 'gone'],
  },
  {
    method: 'get', path: '/v1/artifacts/:id/files/:index', operationId: 'downloadArtifactFile', summary: "One file of an output tar, read from the stored tar and checked against its listed SHA-256 (a mismatch cuts the response short); beyond the spec", auth: 'artifacts:read', params: artifactParams.extend(fileIndexParams.shape),
    successes: [{ status: 200, description: "The file's bytes", body: 'bytes', headers: { 'X-Artifact-Sha256': "SHA-256 of the file's bytes (hex), as listed", 'X-Artifact-Size': "Size of the file in bytes" } }],
    errors: ['invalid_request', 'not_found', 'gone', 'unavailable'],
  },
  { method: 'post', path: '/v1/artifacts', operationId: 'uploadArtifact', summary: 'Upload a job input (raw bytes); name it in a job\'s inputs', auth: 'jobs:create', query: uploadQuery, body: 'bytes', successes: [{ status: 201, description: 'The stored input', body: artifactMetadataSchema }], errors: ['invalid_request', 'payload_too_large', 'request_timeout'] },
  { method: 'get', path: '/v1/templates', operationId: 'listTemplates', summary: 'Job templates: the built-in ones this deployment can run, then the account\'s own by name (one page)', auth: 'jobs:read', successes: [{ status: 200, description: 'The templates', body: jobTemplateListSchema }], errors: [] },
  { method: 'get', path: '/v1/templates/:name', operationId: 'getTemplate', summary: 'One template, built-in or the account\'s own', auth: 'jobs:read', params: templateParams, successes: [{ status: 200, description: 'The template', body: jobTemplateSchema }], errors: ['invalid_request', 'not_found'] },
  {
    method: 'put', path: '/v1/templates/:name', operationId: 'saveTemplate', summary: 'Save a job spec as a template of the account (replaces one of that name; If-None-Match: * only creates); beyond the spec', auth: 'jobs:create', params: templateParams, body: templateSaveRequestSchema,
    successes: [{ status: 201, description: 'Saved as a new template', body: jobTemplateSchema }, { status: 200, description: 'Replaced the template of that name', body: jobTemplateSchema }],
    errors: ['invalid_request', 'validation_error', 'conflict', ...WRITE_ERRORS],
  },
  { method: 'delete', path: '/v1/templates/:name', operationId: 'deleteTemplate', summary: 'Delete one of the account\'s templates (built-in ones cannot be)', auth: 'jobs:create', params: templateParams, successes: [{ status: 204, description: 'Deleted' }], errors: ['invalid_request', 'not_found', 'conflict'] },
  { method: 'get', path: '/v1/billing', operationId: 'listBilling', summary: "The account's billing entries, newest first", auth: 'billing:read', query: billingQuerySchema, successes: [{ status: 200, description: 'A page of billing entries', body: billingListSchema }], errors: ['invalid_request'] },
  {
    method: 'get', path: '/files/:id', operationId: 'downloadFile', summary: 'The bytes behind a signed URL (Range gives 206)', auth: 'signed_url', params: fileParams, query: fileQuery,
    successes: [{ status: 200, description: 'The bytes', body: 'bytes', headers: INTEGRITY_HEADERS }, { status: 206, description: 'The requested range', body: 'bytes' }],
    errors: ['forbidden', 'not_found', 'gone'],
  },
  { method: 'head', path: '/files/:id', operationId: 'headFile', summary: 'The headers of a signed URL download', auth: 'signed_url', params: fileParams, query: fileQuery, successes: [{ status: 200, description: 'The headers', headers: INTEGRITY_HEADERS }], errors: ['forbidden', 'not_found', 'gone'] },
];

/** `/v1/jobs/:id` as OpenAPI writes it: `/v1/jobs/{id}`. */
export const openApiPath = (path: string) => path.replace(/:([A-Za-z]+)/g, '{$1}');

/** The codes a route answers: its own, the key checks unless public, and those of any route. */
export function errorCodesOf(route: DocumentedRoute): ErrorCode[] {
  const keyed = route.auth === 'public' || route.auth === 'signed_url' ? [] : AUTH_ERRORS;
  return [...new Set([...route.errors, ...keyed, ...ANY_ROUTE_ERRORS])];
}

function headersOf(headers: Record<string, string> | undefined) {
  if (!headers) return undefined;
  return Object.fromEntries(Object.entries(headers).map(([name, description]) => [name, { description, schema: { type: 'string' as const } }]));
}

function responsesOf(route: DocumentedRoute): ZodOpenApiResponsesObject {
  const responses: ZodOpenApiResponsesObject = {};
  for (const success of route.successes) {
    const content = success.body === undefined ? undefined
      : success.body === 'bytes' ? { 'application/octet-stream': { schema: { type: 'string' as const, contentMediaType: 'application/octet-stream' } } }
      : success.body === 'openapi' ? { 'application/json': { schema: { type: 'object' as const, description: 'An OpenAPI 3.1 document' } } }
      : success.body === 'event-stream'
        ? { 'text/event-stream': { schema: { type: 'string' as const, description: 'Events `status` ({jobStatus}), `log` (a log line; its `id:` is the cursor after it), `end` ({jobStatus, nextCursor}, then the server closes), and a `: keep-alive` comment every 15 s' } } }
      : { 'application/json': { schema: success.body } };
    responses[String(success.status) as `${1 | 2 | 3 | 4 | 5}${string}`] = { description: success.description, ...(content ? { content } : {}), ...(success.headers ? { headers: headersOf(success.headers) } : {}) };
  }
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of errorCodesOf(route)) byStatus.set(ERROR_CODES[code].status, [...(byStatus.get(ERROR_CODES[code].status) ?? []), code]);
  for (const [status, codes] of [...byStatus].sort(([a], [b]) => a - b)) {
    responses[String(status) as `${1 | 2 | 3 | 4 | 5}${string}`] = {
      description: codes.map((code) => `\`${code}\`: ${ERROR_CODES[code].message}`).join(' '),
      content: { 'application/json': { schema: errorEnvelopeSchema } },
      'x-error-codes': codes,
    };
  }
  return responses;
}

function operationOf(route: DocumentedRoute): ZodOpenApiOperationObject {
  const requestParams = {
    ...(route.params ? { path: route.params } : {}),
    ...(route.query ? { query: route.query } : {}),
    ...(route.path === '/v1/templates/:name' && route.method === 'put' ? { header: z.object({ 'If-None-Match': z.literal('*').optional().describe('Save only when the account has no template of this name (409 conflict otherwise)') }) } : {}),
    ...(route.path === '/v1/jobs' && route.method === 'post' ? { header: z.object({ 'Idempotency-Key': z.string().regex(IDEMPOTENCY_KEY).optional().describe('1-255 visible ASCII characters; a retry with the same key and body returns the original job') }) } : {}),
  };
  const requestBody = route.body === undefined ? undefined
    : route.body === 'bytes' ? { required: true, content: { 'application/octet-stream': { schema: { type: 'string' as const, contentMediaType: 'application/octet-stream' } } } }
    : { content: { 'application/json': { schema: route.body } } };
  const keyed = route.auth !== 'public' && route.auth !== 'signed_url';
  return {
    operationId: route.operationId,
    summary: route.summary,
    description: route.auth === 'public' ? 'Public: no key needed (60 requests a minute per client address).'
      : route.auth === 'signed_url' ? 'The signature in the URL is the credential; ask `GET /v1/artifacts/{id}` for a new URL when it expired.'
      : `Scope \`${route.auth}\`.`,
    security: keyed ? [{ apiKey: [route.auth] }] : [],
    ...(Object.keys(requestParams).length > 0 ? { requestParams } : {}),
    ...(requestBody ? { requestBody } : {}),
    responses: responsesOf(route),
  };
}

/** The named schemas of the document: each the very zod schema a route parses or answers with. */
export const COMPONENT_SCHEMAS = {
  Index: serviceIndexSchema,
  Error: errorEnvelopeSchema,
  CapacityList: capacityListSchema,
  Pricing: pricingSchema,
  JobCreateRequest: jobCreateRequestSchema,
  JobCreated: jobCreatedSchema,
  Job: jobSchema,
  JobList: jobListSchema,
  Funding: fundingSchema,
  FundConfirmRequest: fundConfirmRequestSchema,
  FundConfirmed: fundConfirmResponseSchema,
  FundConfirmPending: fundConfirmPendingSchema,
  LogList: logListSchema,
  ArtifactMetadata: artifactMetadataSchema,
  OutputFileList: outputFileListSchema,
  BillingList: billingListSchema,
  JobTemplate: jobTemplateSchema,
  JobTemplateList: jobTemplateListSchema,
  TemplateSaveRequest: templateSaveRequestSchema,
} as const;

export type OpenApiDocument = ReturnType<typeof createDocument>;

/** The OpenAPI 3.1 document of the public API, built from the routes' own zod schemas. */
export function buildOpenApiDocument(): OpenApiDocument {
  const paths: ZodOpenApiPathsObject = {};
  for (const route of DOCUMENTED_ROUTES) {
    const path = openApiPath(route.path);
    paths[path] = { ...paths[path], [route.method]: operationOf(route) };
  }
  return createDocument({
    openapi: '3.1.0',
    info: {
      title: 'gpufarm API',
      version: SERVICE_VERSION,
      description: 'Rent GPUs by the job. Money is integer micro-USD in fields ending in `MicroUsd`; token amounts are decimal strings of base units; absent values are `null`. Every response carries `X-Request-Id` and `Service-Version`.',
    },
    components: {
      schemas: COMPONENT_SCHEMAS,
      securitySchemes: { apiKey: { type: 'http', scheme: 'bearer', description: 'An API key: `Authorization: Bearer gf_live_…` (mainnet) or `gf_test_…` (test and local deployments).' } },
    },
    paths,
  });
}
