import {
  appliedDefaultSchema,
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
  jobStartupSchema,
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
import { createDocument, type CreateDocumentOptions, type ZodOpenApiOperationObject, type ZodOpenApiPathsObject, type ZodOpenApiResponsesObject } from 'zod-openapi';
import { fileIndexParams } from '../artifacts/output-files-routes.js';
import { artifactParams, artifactQuery, uploadQuery } from '../artifacts/routes.js';
import { querySchema as billingQuerySchema } from '../billing/routes.js';
import { querySchema as capacityQuerySchema } from '../capacity/query.js';
import { jobParams } from '../jobs/account-job.js';
import { numericParam } from '../http/parse.js';
import { cancelBody, IDEMPOTENCY_KEY, jobQuery, listQuery as jobListQuery } from '../jobs/routes.js';
import { logsQuery, logStreamQuery } from '../logs/routes.js';
import { templateParams } from '../templates/routes.js';

type Method = 'get' | 'head' | 'post' | 'put' | 'delete';

/** A response header as the document writes it: what it holds and the JSON Schema of its value. */
interface HeaderDoc {
  description: string;
  schema: { type: 'string' | 'integer'; minimum?: number; pattern?: string };
}

/** A success answer: its status, what it means, its body (a zod schema, raw bytes, Server-Sent Events, or none) and headers of its own. */
interface Success {
  status: number;
  description: string;
  body?: z.ZodType | 'bytes' | 'openapi' | 'event-stream';
  headers?: Record<string, HeaderDoc>;
}

/**
 * One documented route. `path` is written as the server registers it (`/v1/jobs/:id`); the
 * document shows it as `/v1/jobs/{id}`. `errors` are the codes of the route's own code; those
 * every route of its kind answers are added by `errorCodesOf`. `head: false` for a GET the
 * server answers no HEAD for (fastify answers HEAD for every other GET).
 */
export interface DocumentedRoute {
  method: Method;
  path: string;
  operationId: string;
  summary: string;
  auth: 'public' | ApiKeyScope | 'signed_url';
  params?: z.ZodObject;
  query?: z.ZodObject;
  headers?: z.ZodObject;
  body?: z.ZodType | 'bytes';
  successes: Success[];
  errors: ErrorCode[];
  head?: false;
}

/** A key that was sent and refused: checked on every route that reads keys, public ones too. */
const CREDENTIAL_ERRORS: ErrorCode[] = ['invalid_api_key', 'revoked_api_key', 'wrong_environment', 'account_suspended'];
/** A route that needs a key: none sent, or one without the route's scope. */
const KEY_ERRORS: ErrorCode[] = ['missing_api_key', 'insufficient_scope'];
/** Any route can answer these: another method on its path, a server fault, a backing service down or the connection budget full. */
const ANY_ROUTE_ERRORS: ErrorCode[] = ['method_not_allowed', 'internal', 'unavailable'];
/**
 * A JSON body (`http/json-body.ts`): not JSON, a wrong Content-Type or Content-Length, over
 * 256 KiB, too slow, or a key reaching a prototype (`validation_error`).
 */
const JSON_BODY_ERRORS: ErrorCode[] = ['invalid_json', 'invalid_request', 'validation_error', 'payload_too_large', 'request_timeout'];

const integer = (minimum: number) => ({ type: 'integer' as const, minimum });

/** Headers the server sets on responses (`http/client-errors.ts`, `http/rate-limit.ts`, `http/envelope.ts`), as components. */
export const RESPONSE_HEADERS = {
  'X-Request-Id': { description: 'The request id (`req_…`), or the `X-Request-Id` the client sent when it is 1-128 of `A-Za-z0-9._:-`.', schema: { type: 'string' as const } },
  'Service-Version': { description: 'The API version.', schema: { type: 'string' as const, const: SERVICE_VERSION } },
  'X-RateLimit-Limit': { description: 'Requests allowed in the window of the bucket closest to its limit (on an error: unless it was refused before it was counted).', schema: integer(1) },
  'X-RateLimit-Remaining': { description: 'Requests left in that window.', schema: integer(0) },
  'X-RateLimit-Reset': { description: 'Seconds until that window ends.', schema: integer(1) },
  'Retry-After': { description: 'Seconds to wait before calling again (on 503: when the server holds all the connections it takes).', schema: integer(1) },
  Allow: { description: 'The methods the path answers.', schema: { type: 'string' as const } },
} as const;
type ResponseHeader = keyof typeof RESPONSE_HEADERS;

const fileParams = artifactParams;
const fileQuery = z.strictObject({
  expires: numericParam(z.string(), { type: 'integer', minimum: 0, description: 'Unix seconds the signature expires at' }),
  sig: z.string().describe('The URL signature'),
});
const INTEGRITY_HEADERS: Record<string, HeaderDoc> = {
  'X-Artifact-Sha256': { description: 'SHA-256 of the artifact bytes (hex)', schema: { type: 'string', pattern: '^[0-9a-f]{64}$' } },
  'X-Artifact-Size': { description: 'Size of the artifact in bytes', schema: integer(0) },
};
const CONTENT_RANGE: Record<string, HeaderDoc> = { 'Content-Range': { description: '`bytes <start>-<end>/<size>`, or `bytes */<size>` on 416', schema: { type: 'string' } } };
const idempotencyHeader = z.object({
  'Idempotency-Key': z.string().regex(IDEMPOTENCY_KEY).optional().describe('1-255 visible ASCII characters; a retry with the same key and body returns the original job'),
});
const ifNoneMatchHeader = z.object({ 'If-None-Match': z.literal('*').optional().describe('Save only when the account has no template of this name (409 conflict otherwise)') });

/** What each API key scope grants (the spec's Authentication table). */
export const SCOPE_GRANTS: Record<ApiKeyScope, string> = {
  'jobs:create': 'Create and cancel jobs; read funding calls; confirm funding; upload inputs; save and delete templates',
  'jobs:read': 'Read jobs, logs and templates',
  'artifacts:read': 'Download artifacts and results',
  'billing:read': 'Read billing history',
};

/** Every route the document describes; the drift test compares it with the server's routes. */
export const DOCUMENTED_ROUTES: readonly DocumentedRoute[] = [
  { method: 'get', path: '/v1', operationId: 'getIndex', summary: 'This deployment: service version, chain id, environment, canary, whether simulated machines are offered, escrow, links', auth: 'public', successes: [{ status: 200, description: 'The deployment', body: serviceIndexSchema }], errors: [] },
  { method: 'get', path: '/v1/openapi.json', operationId: 'getOpenApi', summary: 'This OpenAPI 3.1 document', auth: 'public', successes: [{ status: 200, description: 'The document', body: 'openapi' }], errors: [] },
  { method: 'get', path: '/v1/capacity', operationId: 'listCapacity', summary: 'GPU offers, filtered and sorted', auth: 'public', query: capacityQuerySchema, successes: [{ status: 200, description: 'A page of offers', body: capacityListSchema }], errors: [] },
  { method: 'get', path: '/v1/pricing', operationId: 'getPricing', summary: 'Prices and availability per GPU class, payment assets, fee', auth: 'public', successes: [{ status: 200, description: 'Pricing', body: pricingSchema }], errors: [] },
  {
    method: 'post', path: '/v1/jobs', operationId: 'createJob', summary: 'Create a job (validated, policy-checked, priced; nothing charged)', auth: 'jobs:create', headers: idempotencyHeader, body: jobCreateRequestSchema,
    successes: [{ status: 201, description: 'The job was created', body: jobCreatedSchema }, { status: 200, description: 'Replay of an earlier creation with the same Idempotency-Key and body', body: jobCreatedSchema }],
    // invalid_request: a malformed Idempotency-Key.
    errors: ['invalid_request', 'validation_error', 'policy_rejected', 'conflict'],
  },
  { method: 'get', path: '/v1/jobs', operationId: 'listJobs', summary: "The account's jobs, newest first", auth: 'jobs:read', query: jobListQuery, successes: [{ status: 200, description: 'A page of jobs', body: jobListSchema }], errors: [] },
  { method: 'get', path: '/v1/jobs/:id', operationId: 'getJob', summary: 'One job (`include=startup` adds its start phases)', auth: 'jobs:read', params: jobParams, query: jobQuery, successes: [{ status: 200, description: 'The job', body: jobSchema }], errors: ['not_found'] },
  { method: 'get', path: '/v1/jobs/:id/funding', operationId: 'getJobFunding', summary: 'The ordered wallet calls that fund a CREATED job', auth: 'jobs:create', params: jobParams, successes: [{ status: 200, description: 'The funding calls', body: fundingSchema }], errors: ['not_found', 'conflict'] },
  {
    method: 'post', path: '/v1/jobs/:id/fund-confirm', operationId: 'confirmJobFunding', summary: 'Confirm funding: the service reads the transaction and its JobFunded event from the chain', auth: 'jobs:create', params: jobParams, body: fundConfirmRequestSchema,
    successes: [
      { status: 200, description: 'Funded; the job is QUEUED', body: fundConfirmResponseSchema },
      { status: 202, description: 'The transaction is unknown, pending or short of confirmations; call again after Retry-After', body: fundConfirmPendingSchema },
    ],
    errors: ['not_found', 'conflict', 'funding_mismatch'],
  },
  { method: 'post', path: '/v1/jobs/:id/cancel', operationId: 'cancelJob', summary: 'Cancel a job (a running job is 409 conflict)', auth: 'jobs:create', params: jobParams, body: cancelBody, successes: [{ status: 200, description: 'The canceled job', body: jobSchema }], errors: ['not_found', 'conflict'] },
  { method: 'get', path: '/v1/jobs/:id/logs', operationId: 'listJobLogs', summary: "The job's log lines after a cursor (tail by calling again with nextCursor)", auth: 'jobs:read', params: jobParams, query: logsQuery, successes: [{ status: 200, description: 'A page of log lines', body: logListSchema }], errors: ['not_found'] },
  {
    method: 'get', path: '/v1/jobs/:id/logs/stream', operationId: 'streamJobLogs', summary: "The job's log as Server-Sent Events from a cursor (or Last-Event-ID) until the job ends; beyond the spec", auth: 'jobs:read', params: jobParams, query: logStreamQuery,
    successes: [{ status: 200, description: 'The live log stream', body: 'event-stream' }],
    // A HEAD would hold a stream open with nothing to send: the route answers none.
    errors: ['not_found'], head: false,
  },
  {
    method: 'get', path: '/v1/artifacts/:id', operationId: 'getArtifact', summary: 'Download an artifact: a redirect to a signed URL valid 120 s, or its metadata as JSON', auth: 'artifacts:read', params: artifactParams, query: artifactQuery,
    successes: [
      { status: 302, description: 'Redirect to the signed URL (Location)', headers: { Location: { description: 'The signed URL', schema: { type: 'string' } }, ...INTEGRITY_HEADERS } },
      { status: 200, description: 'With format=json or Accept: application/json: the metadata and the signed URL', body: artifactMetadataSchema, headers: INTEGRITY_HEADERS },
    ],
    errors: ['not_found', 'gone'],
  },
  {
    method: 'get', path: '/v1/artifacts/:id/files', operationId: 'listArtifactFiles', summary: "An output tar's files (path, size, SHA-256), as the server indexed them when it settled the run; beyond the spec", auth: 'artifacts:read', params: artifactParams,
    successes: [{ status: 200, description: 'The file list', body: outputFileListSchema }],
    errors: ['not_found', 'gone'],
  },
  {
    method: 'get', path: '/v1/artifacts/:id/files/:index', operationId: 'downloadArtifactFile', summary: "One file of an output tar, read from the stored tar and checked against its listed SHA-256 (a mismatch cuts the response short); beyond the spec", auth: 'artifacts:read', params: artifactParams.extend(fileIndexParams.shape),
    successes: [{ status: 200, description: "The file's bytes", body: 'bytes', headers: { 'X-Artifact-Sha256': { ...INTEGRITY_HEADERS['X-Artifact-Sha256']!, description: "SHA-256 of the file's bytes (hex), as listed" }, 'X-Artifact-Size': { ...INTEGRITY_HEADERS['X-Artifact-Size']!, description: 'Size of the file in bytes' } } }],
    errors: ['not_found', 'gone'],
  },
  {
    method: 'post', path: '/v1/artifacts', operationId: 'uploadArtifact', summary: 'Upload a job input (raw bytes); name it in a job\'s inputs', auth: 'jobs:create', query: uploadQuery, body: 'bytes',
    successes: [{ status: 201, description: 'The stored input', body: artifactMetadataSchema, headers: INTEGRITY_HEADERS }],
    // payload_too_large: over the input limit or the account's quota; invalid_request: a Content-Length that does not match.
    errors: ['invalid_request', 'payload_too_large', 'request_timeout'],
  },
  { method: 'get', path: '/v1/templates', operationId: 'listTemplates', summary: 'Job templates: the built-in ones this deployment can run, then the account\'s own by name (one page)', auth: 'jobs:read', successes: [{ status: 200, description: 'The templates', body: jobTemplateListSchema }], errors: [] },
  { method: 'get', path: '/v1/templates/:name', operationId: 'getTemplate', summary: 'One template, built-in or the account\'s own', auth: 'jobs:read', params: templateParams, successes: [{ status: 200, description: 'The template', body: jobTemplateSchema }], errors: ['not_found'] },
  {
    method: 'put', path: '/v1/templates/:name', operationId: 'saveTemplate', summary: 'Save a job spec as a template of the account (replaces one of that name; If-None-Match: * only creates); beyond the spec', auth: 'jobs:create', params: templateParams, headers: ifNoneMatchHeader, body: templateSaveRequestSchema,
    successes: [{ status: 201, description: 'Saved as a new template', body: jobTemplateSchema }, { status: 200, description: 'Replaced the template of that name', body: jobTemplateSchema }],
    errors: ['conflict'],
  },
  { method: 'delete', path: '/v1/templates/:name', operationId: 'deleteTemplate', summary: 'Delete one of the account\'s templates (built-in ones cannot be)', auth: 'jobs:create', params: templateParams, successes: [{ status: 204, description: 'Deleted' }], errors: ['not_found', 'conflict'] },
  { method: 'get', path: '/v1/billing', operationId: 'listBilling', summary: "The account's billing entries, newest first", auth: 'billing:read', query: billingQuerySchema, successes: [{ status: 200, description: 'A page of billing entries', body: billingListSchema }], errors: [] },
  {
    method: 'get', path: '/files/:id', operationId: 'downloadFile', summary: 'The bytes behind a signed URL (Range gives 206)', auth: 'signed_url', params: fileParams, query: fileQuery,
    successes: [
      { status: 200, description: 'The bytes', body: 'bytes', headers: INTEGRITY_HEADERS },
      { status: 206, description: 'The requested range', body: 'bytes', headers: { ...INTEGRITY_HEADERS, ...CONTENT_RANGE } },
      { status: 416, description: 'The range is outside the bytes (no body)', headers: { ...INTEGRITY_HEADERS, ...CONTENT_RANGE } },
    ],
    // Its HEAD is a route of its own (below).
    errors: ['forbidden', 'not_found', 'gone'], head: false,
  },
  {
    method: 'head', path: '/files/:id', operationId: 'headFile', summary: 'The headers of a signed URL download', auth: 'signed_url', params: fileParams, query: fileQuery,
    successes: [{ status: 200, description: 'The headers', headers: INTEGRITY_HEADERS }, { status: 206, description: 'The headers of the requested range', headers: { ...INTEGRITY_HEADERS, ...CONTENT_RANGE } }, { status: 416, description: 'The range is outside the bytes', headers: { ...INTEGRITY_HEADERS, ...CONTENT_RANGE } }],
    errors: ['forbidden', 'not_found', 'gone'],
  },
];

/** `/v1/jobs/:id` as OpenAPI writes it: `/v1/jobs/{id}`. */
export const openApiPath = (path: string) => path.replace(/:([A-Za-z]+)/g, '{$1}');

/** The HEAD the server answers for a GET (fastify's exposed HEAD route): the GET's answers without bodies. */
function headOf(route: DocumentedRoute): DocumentedRoute {
  return { ...route, method: 'head', operationId: `${route.operationId}Head`, summary: `Headers only: ${route.summary}`, successes: route.successes.map(({ body: _body, ...success }) => success) };
}

/** The routes as the document lists them: each documented route, and the HEAD of every GET that has one. */
export function documentedOperations(): DocumentedRoute[] {
  return DOCUMENTED_ROUTES.flatMap((route) => (route.method === 'get' && route.head !== false ? [route, headOf(route)] : [route]));
}

const isKeyed = (route: DocumentedRoute) => route.auth !== 'public' && route.auth !== 'signed_url';
/** fastify parses a JSON body on every method but GET and HEAD, whether the route reads one or not (a DELETE too). */
const parsesJsonBody = (route: DocumentedRoute) => route.method !== 'get' && route.method !== 'head' && route.body !== 'bytes';

/**
 * The codes a route answers: its own; `invalid_request` where it parses parameters (a path
 * segment over 128 characters is refused before any route runs); those of a JSON body; a
 * refused key (public routes check a key that is sent); a missing key or scope where one is
 * needed; the rate limit (signed URLs are counted when issued); and those of any route.
 */
export function errorCodesOf(route: DocumentedRoute): ErrorCode[] {
  return [...new Set<ErrorCode>([
    ...(route.params || route.query ? ['invalid_request' as const] : []),
    ...route.errors,
    ...(parsesJsonBody(route) ? JSON_BODY_ERRORS : []),
    ...(route.auth === 'signed_url' ? [] : CREDENTIAL_ERRORS),
    ...(isKeyed(route) ? KEY_ERRORS : []),
    ...(route.auth === 'signed_url' ? [] : ['rate_limited' as const]),
    ...ANY_ROUTE_ERRORS,
  ])];
}

const ref = (name: ResponseHeader) => ({ $ref: `#/components/headers/${name}` });

/**
 * The headers of one response. Every response carries X-Request-Id and Service-Version. A
 * rate-limited route's responses carry X-RateLimit-* (an error answered before the limiter
 * counted, such as a full connection budget, has none); 429 and a pending fund-confirm add
 * Retry-After, as does a 503 of the connection budget; 405 names the allowed methods.
 */
function responseHeadersOf(route: DocumentedRoute, status: number, own: Record<string, HeaderDoc> | undefined) {
  const limited = route.auth !== 'signed_url';
  const names: ResponseHeader[] = [
    'X-Request-Id',
    'Service-Version',
    ...(limited ? (['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset'] as const) : []),
    ...(status === 429 || status === 503 || (status === 202 && route.operationId === 'confirmJobFunding') ? (['Retry-After'] as const) : []),
    ...(status === 405 ? (['Allow'] as const) : []),
  ];
  const optional = (name: ResponseHeader) => (name.startsWith('X-RateLimit-') && status >= 400) || (name === 'Retry-After' && status === 503);
  return {
    // A reference cannot make its header optional: an optional one is written out in full.
    ...Object.fromEntries(names.map((name) => [name, optional(name) ? { ...RESPONSE_HEADERS[name], required: false } : ref(name)])),
    ...Object.fromEntries(Object.entries(own ?? {}).map(([name, header]) => [name, { ...header, required: true }])),
  };
}

function responsesOf(route: DocumentedRoute): ZodOpenApiResponsesObject {
  const responses: ZodOpenApiResponsesObject = {};
  const withBody = route.method !== 'head';
  for (const success of route.successes) {
    const content = success.body === undefined ? undefined
      : success.body === 'bytes' ? { 'application/octet-stream': { schema: { type: 'string' as const, contentMediaType: 'application/octet-stream' } } }
      : success.body === 'openapi' ? { 'application/json': { schema: { type: 'object' as const, description: 'An OpenAPI 3.1 document' } } }
      : success.body === 'event-stream'
        ? { 'text/event-stream': { schema: { type: 'string' as const, description: 'Events `status` ({jobStatus}), `log` (a log line; its `id:` is the cursor after it), `end` ({jobStatus, nextCursor}, then the server closes), and a `: keep-alive` comment every 15 s' } } }
      : { 'application/json': { schema: success.body } };
    responses[String(success.status) as `${1 | 2 | 3 | 4 | 5}${string}`] = { description: success.description, ...(content ? { content } : {}), headers: responseHeadersOf(route, success.status, success.headers) };
  }
  const byStatus = new Map<number, ErrorCode[]>();
  for (const code of errorCodesOf(route)) byStatus.set(ERROR_CODES[code].status, [...(byStatus.get(ERROR_CODES[code].status) ?? []), code]);
  for (const [status, codes] of [...byStatus].sort(([a], [b]) => a - b)) {
    responses[String(status) as `${1 | 2 | 3 | 4 | 5}${string}`] = {
      description: codes.map((code) => `\`${code}\`: ${ERROR_CODES[code].message}`).join(' '),
      headers: responseHeadersOf(route, status, undefined),
      ...(withBody ? { content: { 'application/json': { schema: errorEnvelopeSchema } } } : {}),
      'x-error-codes': codes,
    };
  }
  return responses;
}

/** The first path segment after `/v1` names the tag: jobs, artifacts…; `/files` are downloads. */
function tagOf(route: DocumentedRoute): string {
  if (route.path.startsWith('/files/')) return 'Downloads';
  if (/^\/v1\/jobs\/:id\/logs/.test(route.path)) return 'Logs';
  const segment = route.path.split('/')[2];
  return TAGS.find((tag) => tag.segments.includes(segment ?? ''))?.name ?? 'Service';
}

const TAGS = [
  { name: 'Service', description: 'The deployment and this document', segments: [] as string[] },
  { name: 'Capacity', description: 'GPU offers and prices (public)', segments: ['capacity', 'pricing'] },
  { name: 'Jobs', description: 'Create, fund, follow and cancel jobs', segments: ['jobs'] },
  { name: 'Logs', description: "A job's log lines", segments: [] },
  { name: 'Artifacts', description: 'Inputs and results', segments: ['artifacts'] },
  { name: 'Templates', description: 'Saved job specs', segments: ['templates'] },
  { name: 'Billing', description: "The account's billing entries", segments: ['billing'] },
  { name: 'Downloads', description: 'Signed artifact URLs (the signature is the credential)', segments: [] },
];

function operationOf(route: DocumentedRoute): ZodOpenApiOperationObject {
  const requestParams = {
    ...(route.params ? { path: route.params } : {}),
    ...(route.query ? { query: route.query } : {}),
    ...(route.headers ? { header: route.headers } : {}),
  };
  // Required where the server refuses a request without it (an absent body parses as undefined).
  const requestBody = route.body === undefined ? undefined
    : route.body === 'bytes' ? { required: true, content: { 'application/octet-stream': { schema: { type: 'string' as const, contentMediaType: 'application/octet-stream' } } } }
    : { required: !route.body.safeParse(undefined).success, content: { 'application/json': { schema: route.body } } };
  return {
    operationId: route.operationId,
    summary: route.summary,
    description: route.auth === 'public' ? 'Public: no key needed (60 requests a minute per client address); a key that is sent is checked and counted.'
      : route.auth === 'signed_url' ? 'The signature in the URL is the credential; ask `GET /v1/artifacts/{id}` for a new URL when it expired.'
      : `Scope \`${route.auth}\`.`,
    tags: [tagOf(route)],
    // The scope a key needs is `x-scopes` (see the scheme), not a role in the requirement: Spectral's
    // spectral:oas wants a requirement's scopes declared by OAuth flows, which an API key has none of.
    security: route.auth === 'signed_url' ? [] : route.auth === 'public' ? [{}, { apiKey: [] }] : [{ apiKey: [] }],
    ...(isKeyed(route) ? { 'x-scopes': [route.auth] } : {}),
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
  JobStartup: jobStartupSchema,
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

/** The OpenAPI 3.1 document of the public API at `publicUrl`, built from the routes' own zod schemas. */
export function buildOpenApiDocument(publicUrl: string): OpenApiDocument {
  const paths: ZodOpenApiPathsObject = {};
  for (const route of documentedOperations()) {
    const path = openApiPath(route.path);
    paths[path] = { ...paths[path], [route.method]: operationOf(route) };
  }
  return withoutUnreferencedSchemas(createDocument({
    openapi: '3.1.0',
    info: {
      title: 'gpufarm API',
      version: SERVICE_VERSION,
      description: 'Rent GPUs by the job. Money is integer micro-USD in fields ending in `MicroUsd`; token amounts are decimal strings of base units; absent values are `null`. Every response carries `X-Request-Id` and `Service-Version`; rate-limited ones `X-RateLimit-*`.',
    },
    servers: [{ url: publicUrl, description: 'This deployment' }],
    tags: TAGS.map(({ name, description }) => ({ name, description })),
    components: {
      schemas: COMPONENT_SCHEMAS,
      headers: Object.fromEntries(Object.entries(RESPONSE_HEADERS).map(([name, header]) => [name, { ...header, required: true }])),
      securitySchemes: {
        apiKey: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'gf_live_… or gf_test_… API key',
          description: `An API key: \`Authorization: Bearer gf_live_…\` (mainnet) or \`gf_test_…\` (test and local deployments). \`x-scopes\` here lists the scopes a key may hold and what each grants; \`x-scopes\` of an operation names the one it needs.`,
          'x-scopes': SCOPE_GRANTS,
        },
      },
    },
    paths,
  }, { override: anyJsonValue }));
}

/** Drops the schemas zod-openapi generated (`__schemaN`, from `z.json()`) that no longer have a reference. */
function withoutUnreferencedSchemas(document: OpenApiDocument): OpenApiDocument {
  const schemas = document.components?.schemas ?? {};
  const text = JSON.stringify(document);
  for (const name of Object.keys(schemas)) if (name.startsWith('__schema') && !text.includes(`"#/components/schemas/${name}"`)) delete schemas[name];
  return document;
}

/**
 * `z.json()` (the value of an applied default) as the empty schema, any JSON value: written out
 * as zod renders it, the recursive union becomes a type that refers to itself, which a
 * generated TypeScript client cannot compile.
 */
const JSON_VALUE = appliedDefaultSchema.shape.value;
const anyJsonValue: NonNullable<CreateDocumentOptions['override']> = ({ jsonSchema, zodSchema }) => {
  if (zodSchema !== JSON_VALUE) return;
  for (const key of Object.keys(jsonSchema)) delete (jsonSchema as Record<string, unknown>)[key];
  Object.assign(jsonSchema, { description: 'Any JSON value' });
};
