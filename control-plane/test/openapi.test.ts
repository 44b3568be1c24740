import { API_KEY_SCOPES, ERROR_CODES, errorCodes, errorEnvelopeSchema, type ErrorCode } from '@gpufarm/shared';
import type { LightMyRequestResponse } from 'fastify';
import t, { type Test } from 'tap';
import type { z } from 'zod';
import { assignmentStatus } from '../src/execution/lifecycle.js';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { matchQueuedJobs } from '../src/matching/matcher.js';
import { buildOpenApiDocument, COMPONENT_SCHEMAS, documentedOperations, DOCUMENTED_ROUTES, openApiPath, type DocumentedRoute, type OpenApiDocument } from '../src/openapi/document.js';
import { DOCS_CONTENT_SECURITY_POLICY } from '../src/openapi/routes.js';
import { statusMessage } from './helpers/agent-client.js';
import { bearer, buildTestApp, createTestKey } from './helpers/app.js';

const PUBLIC_URL = 'https://api.gpufarm.example';

/** The routes of the public API: everything under `/v1` and the signed download URLs. */
const isPublicApi = (url: string) => url === '/v1' || url.startsWith('/v1/') || url.startsWith('/files/');

type JsonSchema = Record<string, unknown>;

/**
 * The problems of `value` against a schema of the document: `$ref`, `type`, `const`, `enum`,
 * `pattern`, `properties`/`required`/`additionalProperties`, `items`, `anyOf`/`oneOf`: what
 * zod-openapi writes for the response schemas. Empty when the value matches.
 */
function problemsOf(document: OpenApiDocument, schema: JsonSchema, value: unknown, at = '$'): string[] {
  if (typeof schema.$ref === 'string') {
    const name = schema.$ref.replace('#/components/schemas/', '');
    return problemsOf(document, document.components!.schemas![name] as JsonSchema, value, at);
  }
  for (const key of ['anyOf', 'oneOf'] as const) {
    const options = schema[key] as JsonSchema[] | undefined;
    if (options && !options.some((option) => problemsOf(document, option, value, at).length === 0)) return [`${at}: matches none of ${key}`];
  }
  if ('const' in schema && value !== schema.const) return [`${at}: is not ${JSON.stringify(schema.const)}`];
  if (Array.isArray(schema.enum) && !schema.enum.includes(value)) return [`${at}: ${JSON.stringify(value)} is not in the enum`];
  const types = schema.type === undefined ? [] : ([] as string[]).concat(schema.type as string | string[]);
  const actual = value === null ? 'null' : Array.isArray(value) ? 'array' : typeof value;
  const isType = (type: string) => (type === 'integer' ? Number.isInteger(value) : type === actual);
  if (types.length > 0 && !types.some(isType)) return [`${at}: is ${actual}, not ${types.join(' or ')}`];
  if (typeof schema.pattern === 'string' && typeof value === 'string' && !new RegExp(schema.pattern).test(value)) return [`${at}: does not match ${schema.pattern}`];
  const problems: string[] = [];
  if (actual === 'array' && schema.items) (value as unknown[]).forEach((item, i) => problems.push(...problemsOf(document, schema.items as JsonSchema, item, `${at}[${i}]`)));
  if (actual === 'object' && schema.properties) {
    const properties = schema.properties as Record<string, JsonSchema>;
    const object = value as Record<string, unknown>;
    for (const name of (schema.required as string[] | undefined) ?? []) if (!(name in object)) problems.push(`${at}.${name}: is missing`);
    for (const [name, field] of Object.entries(object)) {
      if (properties[name]) problems.push(...problemsOf(document, properties[name], field, `${at}.${name}`));
      else if (schema.additionalProperties === false) problems.push(`${at}.${name}: is not in the document`);
    }
  }
  return problems;
}

/** The documented route a real response answers, found by method and registered path. */
function documentedRoute(method: string, path: string) {
  const route = documentedOperations().find((r) => r.method === method && r.path === path);
  if (!route) throw new Error(`${method} ${path} is not documented`);
  return route;
}

type DocumentedResponse = { content?: Record<string, { schema: JsonSchema }>; headers?: Record<string, JsonSchema>; 'x-error-codes'?: ErrorCode[] };

/** Every header name the document gives any response: a response carrying one must document it. */
function documentedHeaderNames(document: OpenApiDocument): Set<string> {
  const names = new Set(Object.keys(document.components!.headers!).map((n) => n.toLowerCase()));
  for (const item of Object.values(document.paths!)) {
    for (const operation of Object.values(item as Record<string, { responses?: Record<string, DocumentedResponse> }>)) {
      for (const response of Object.values(operation.responses ?? {})) for (const name of Object.keys(response.headers ?? {})) names.add(name.toLowerCase());
    }
  }
  return names;
}

/**
 * The problems of a real response's headers against its documented response: a required header
 * missing, a value that does not fit its schema, or a header the document knows sent where this
 * response does not list it.
 */
function headerProblems(document: OpenApiDocument, response: DocumentedResponse, res: LightMyRequestResponse): string[] {
  const problems: string[] = [];
  const documented = Object.entries(response.headers ?? {}).map(([name, header]) => {
    const resolved = typeof header.$ref === 'string' ? (document.components!.headers![header.$ref.replace('#/components/headers/', '')] as JsonSchema) : header;
    return { name: name.toLowerCase(), required: resolved.required === true, schema: resolved.schema as JsonSchema };
  });
  for (const { name, required, schema } of documented) {
    const value = res.headers[name];
    if (value === undefined) {
      if (required) problems.push(`${name}: is missing`);
      continue;
    }
    const text = String(value);
    const parsed = schema.type === 'integer' ? (/^\d+$/.test(text) ? Number(text) : text) : text;
    problems.push(...problemsOf(document, schema, parsed, name));
    if (typeof parsed === 'number' && typeof schema.minimum === 'number' && parsed < schema.minimum) problems.push(`${name}: ${parsed} is below ${schema.minimum}`);
  }
  for (const name of documentedHeaderNames(document)) {
    if (res.headers[name] !== undefined && !documented.some((d) => d.name === name)) problems.push(`${name}: is sent but not documented for ${res.statusCode}`);
  }
  return problems;
}

type DocumentedMethod = 'get' | 'head' | 'post' | 'put' | 'delete';

/**
 * Checks a real response against the document: the status is documented for the route, the
 * headers fit (`headerProblems`), the body validates against the document's schema for it and
 * against the zod schema it came from, and an error's code is listed under its status.
 */
function assertDocumented(t: Test, document: OpenApiDocument, method: DocumentedMethod, path: string, res: LightMyRequestResponse) {
  const operation = document.paths![openApiPath(path)]![method]!;
  const response = operation.responses![String(res.statusCode)] as DocumentedResponse | undefined;
  const name = `${method.toUpperCase()} ${path}`;
  if (!t.ok(response, `${name} documents ${res.statusCode}${res.statusCode >= 400 ? ` (${res.body.slice(0, 120)})` : ''}`)) return;
  t.same(headerProblems(document, response!, res), [], `the ${res.statusCode} headers of ${name} fit the document`);
  const route = documentedRoute(method, path);
  const success = route.successes.find((s) => s.status === res.statusCode);
  if (method === 'head') {
    t.equal(res.body, '', `HEAD ${path} answers no body`);
    if (!success) t.ok(response!['x-error-codes']!.length > 0, `${res.statusCode} lists its codes`);
    return;
  }
  const json = response!.content?.['application/json'];
  if (!json) return;
  t.same(problemsOf(document, json.schema, res.json()), [], `the ${res.statusCode} body of ${name} validates against the document`);
  const zodSchema = success ? success.body : errorEnvelopeSchema;
  if (typeof zodSchema === 'object') t.ok(zodSchema.safeParse(res.json()).success, 'and against the zod schema the document came from');
  if (!success) t.ok(response!['x-error-codes']!.includes(res.json().error.code), `the code ${res.json().error.code} is documented for ${res.statusCode} of ${name}`);
}

/** Served public routes missing from the document, and documented routes the server lacks (HEAD included). */
function routeDrift(served: readonly { method: string; url: string }[], document: OpenApiDocument) {
  const key = (method: string, url: string) => `${method.toUpperCase()} ${openApiPath(url)}`;
  const servedKeys = new Set(served.filter((r) => isPublicApi(r.url)).map((r) => key(r.method, r.url)));
  const methods = ['get', 'head', 'post', 'put', 'patch', 'delete'] as const;
  const documented = new Set(Object.entries(document.paths!).flatMap(([path, item]) => methods.filter((m) => item[m]).map((m) => key(m, path))));
  return { undocumented: [...servedKeys].filter((r) => !documented.has(r)), unserved: [...documented].filter((r) => !servedKeys.has(r)), compared: servedKeys.size };
}

t.test('routes: the document has every public route of the server, and no other', async (t) => {
  const { app } = await buildTestApp(t);
  await app.ready();
  const drift = routeDrift(app.routeTable.list(), buildOpenApiDocument(PUBLIC_URL));
  t.same(drift.undocumented, [], 'every served route is documented, HEAD included');
  t.same(drift.unserved, [], 'every documented route is served');
  t.ok(drift.compared >= 30, `${drift.compared} routes compared`);
  t.notOk(app.routeTable.find('HEAD', '/v1/jobs/job_x/logs/stream'), 'the log stream answers no HEAD, and the document lists none');
  t.notOk(app.routeTable.list().some((r) => r.url.startsWith('/admin') && DOCUMENTED_ROUTES.some((d) => d.path === r.url)), 'admin routes stay out');
});

t.test('routes: a route added or removed on one side is reported', async (t) => {
  const { app } = await buildTestApp(t);
  await app.ready();
  const served = app.routeTable.list().filter((r) => r.url !== '/v1/billing');
  const drift = routeDrift([...served, { method: 'GET', url: '/v1/jobs/:id/metrics' }], buildOpenApiDocument(PUBLIC_URL));
  t.same(drift.undocumented, ['GET /v1/jobs/{id}/metrics']);
  t.same(drift.unserved, ['GET /v1/billing', 'HEAD /v1/billing']);
});

t.test('error codes: every code is in the envelope schema and in some response, each under its status', async (t) => {
  const document = buildOpenApiDocument(PUBLIC_URL);
  const envelope = document.components!.schemas!.Error as { properties: { error: { properties: { code: { enum: string[] } } } } };
  t.same([...envelope.properties.error.properties.code.enum].sort(), [...errorCodes].sort(), 'the envelope enumerates the codes');
  const seen = new Set<string>();
  for (const [path, item] of Object.entries(document.paths!)) {
    for (const method of ['get', 'head', 'post', 'put', 'delete'] as const) {
      for (const [status, response] of Object.entries(item[method]?.responses ?? {})) {
        const codes = (response as { 'x-error-codes'?: ErrorCode[] })['x-error-codes'] ?? [];
        for (const code of codes) {
          seen.add(code);
          if (ERROR_CODES[code].status !== Number(status)) t.fail(`${method.toUpperCase()} ${path}: ${code} is ${ERROR_CODES[code].status}, listed under ${status}`);
        }
      }
    }
  }
  t.same(errorCodes.filter((code) => !seen.has(code)), [], 'every code appears in a response');
  t.same([...seen].filter((code) => !Object.hasOwn(ERROR_CODES, code)), [], 'no response lists an unknown code');
});

t.test('schemas: each documented body is a named component made from the zod schema the route uses', async (t) => {
  const document = buildOpenApiDocument(PUBLIC_URL);
  const names = new Map<z.ZodType, string>(Object.entries(COMPONENT_SCHEMAS).map(([name, schema]) => [schema as z.ZodType, name]));
  for (const route of DOCUMENTED_ROUTES) {
    const operation = document.paths![openApiPath(route.path)]![route.method]!;
    for (const success of route.successes) {
      if (typeof success.body !== 'object') continue;
      const name = names.get(success.body);
      t.ok(name, `${route.operationId} ${success.status}: its schema is a component`);
      const content = (operation.responses![String(success.status)] as { content: Record<string, { schema: { $ref?: string } }> }).content;
      t.equal(content['application/json']!.schema.$ref, `#/components/schemas/${name}`, `${route.operationId} ${success.status} refers to it`);
    }
  }
  const job = document.components!.schemas!.Job as { additionalProperties?: boolean };
  t.equal(job.additionalProperties, false, 'resources are closed: a field the server adds fails validation');
});

t.test('scopes: each keyed operation names its scope, and the scheme lists every scope', async (t) => {
  const document = buildOpenApiDocument(PUBLIC_URL) as unknown as {
    components: { securitySchemes: { apiKey: { 'x-scopes': Record<string, string> } } };
    paths: Record<string, Record<string, { security: unknown[]; 'x-scopes'?: string[] }>>;
  };
  t.same(Object.keys(document.components.securitySchemes.apiKey['x-scopes']).sort(), [...API_KEY_SCOPES].sort());
  for (const route of documentedOperations()) {
    const operation = document.paths[openApiPath(route.path)]![route.method]!;
    const keyed = route.auth !== 'public' && route.auth !== 'signed_url';
    t.same(operation['x-scopes'], keyed ? [route.auth] : undefined, `${route.method.toUpperCase()} ${route.path}: x-scopes`);
    t.same(operation.security, keyed ? [{ apiKey: [] }] : route.auth === 'public' ? [{}, { apiKey: [] }] : [], 'and its security');
  }
});

t.test('behavior: real responses validate against the document', async (t) => {
  const { app, db, offerIndex } = await buildTestApp(t);
  const farm = await createFarm(db, { slug: 'doc-farm' });
  await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 4, pricePerGpuHourMicroUsd: 400_000 });
  await offerIndex.refresh();
  const { key } = await createTestKey(db);
  const document = (await app.inject({ url: '/v1/openapi.json' })).json() as OpenApiDocument;

  assertDocumented(t, document, 'get', '/v1', await app.inject({ url: '/v1' }));
  const capacity = await app.inject({ url: '/v1/capacity' });
  t.ok(capacity.json().data.length > 0, 'a capacity page with an offer');
  assertDocumented(t, document, 'get', '/v1/capacity', capacity);
  assertDocumented(t, document, 'get', '/v1/pricing', await app.inject({ url: '/v1/pricing' }));
  const created = await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: { image: 'ghcr.io/acme/trainer:1.2', gpu: { count: 1 } } });
  t.equal(created.statusCode, 201);
  assertDocumented(t, document, 'post', '/v1/jobs', created);
  const id = created.json().job.id as string;
  assertDocumented(t, document, 'get', '/v1/jobs/:id', await app.inject({ url: `/v1/jobs/${id}`, headers: bearer(key) }));
  assertDocumented(t, document, 'get', '/v1/jobs', await app.inject({ url: '/v1/jobs', headers: bearer(key) }));
  assertDocumented(t, document, 'get', '/v1/jobs/:id/logs', await app.inject({ url: `/v1/jobs/${id}/logs`, headers: bearer(key) }));
  assertDocumented(t, document, 'get', '/v1/billing', await app.inject({ url: '/v1/billing', headers: bearer(key) }));
  assertDocumented(t, document, 'post', '/v1/jobs/:id/cancel', await app.inject({ method: 'POST', url: `/v1/jobs/${id}/cancel`, headers: bearer(key), payload: {} }));
  assertDocumented(t, document, 'head', '/v1/capacity', await app.inject({ method: 'HEAD', url: '/v1/capacity?limit=10&minVram=24' }));
  assertDocumented(t, document, 'head', '/v1/jobs/:id', await app.inject({ method: 'HEAD', url: `/v1/jobs/${id}`, headers: bearer(key) }));
  assertDocumented(t, document, 'get', '/v1/templates', await app.inject({ url: '/v1/templates', headers: bearer(key) }));

  t.test('error: the envelope of real errors', async (t) => {
    assertDocumented(t, document, 'get', '/v1/jobs/:id', await app.inject({ url: `/v1/jobs/${id}` }));
    assertDocumented(t, document, 'get', '/v1/jobs/:id', await app.inject({ url: '/v1/jobs/job_nope', headers: bearer(key) }));
    assertDocumented(t, document, 'post', '/v1/jobs', await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: { gpu: { count: 99 } } }));
    assertDocumented(t, document, 'get', '/v1/capacity', await app.inject({ url: '/v1/capacity?sort=nope' }));
  });

  t.test('behavior: the checker refuses a body the document does not describe', async (t) => {
    const job = created.json().job as Record<string, unknown>;
    const schema = { $ref: '#/components/schemas/Job' };
    t.same(problemsOf(document, schema, job), []);
    t.same(problemsOf(document, schema, { ...job, hostIp: '10.0.0.1' }), ['$.hostIp: is not in the document']);
    const { pricing: _pricing, ...withoutPricing } = job;
    t.same(problemsOf(document, schema, withoutPricing), ['$.pricing: is missing']);
    t.same(problemsOf(document, schema, { ...job, status: 'SLEEPING' }), ['$.status: "SLEEPING" is not in the enum']);
  });
});

t.test("behavior: a job's start phases (beyond the spec) validate against the document, waiting and running", async (t) => {
  const { app, db, offerIndex, config, blobs } = await buildTestApp(t);
  const farm = await createFarm(db, { slug: 'phase-farm' });
  const machine = await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 });
  // An enrolled agent, as the matcher requires: GPU UUIDs and a machine token.
  await db.query(`UPDATE machine_gpus SET uuid = 'GPU-' || md5(machine_id || ':' || gpu_index) WHERE machine_id = $1`, [machine.id]);
  await db.query(`UPDATE machines SET token_hash = md5(id) WHERE id = $1`, [machine.id]);
  await offerIndex.refresh();
  const { key } = await createTestKey(db);
  const document = (await app.inject({ url: '/v1/openapi.json' })).json() as OpenApiDocument;
  const created = await app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(key), payload: { image: 'ghcr.io/acme/trainer:1.2', gpu: { count: 1 } } });
  const id = created.json().job.id as string;
  await db.query(`UPDATE jobs SET status = 'QUEUED' WHERE id = $1`, [id]);
  const queued = await app.inject({ url: `/v1/jobs/${id}?include=startup`, headers: bearer(key) });
  t.match(queued.json().startup, { assignmentId: null, phases: { queued: { status: 'in_progress', durationMs: null }, pull: { status: 'pending' } } });
  assertDocumented(t, document, 'get', '/v1/jobs/:id', queued);

  const [matched] = (await matchQueuedJobs({ db })).matched;
  const deps = { db, escrow: null, config: config.execution, blobs };
  for (const state of ['pulling', 'starting', 'running'] as const) await assignmentStatus(deps, machine.id, statusMessage(matched!.assignmentId, state));
  const running = await app.inject({ url: `/v1/jobs/${id}?include=startup`, headers: bearer(key) });
  t.match(running.json().startup, { assignmentId: matched!.assignmentId, attempt: 1, phases: { pull: { status: 'done' }, container: { status: 'done' }, run: { status: 'in_progress', endedAt: null } } });
  assertDocumented(t, document, 'get', '/v1/jobs/:id', running);
  assertDocumented(t, document, 'get', '/v1/jobs', await app.inject({ url: '/v1/jobs', headers: bearer(key) }));
  t.equal(document.components!.schemas!.JobStartup !== undefined, true, 'the phases are a named schema');
  // Unasked, a job object is what a strict older client knows: no `startup` anywhere.
  const plain = await app.inject({ url: `/v1/jobs/${id}`, headers: bearer(key) });
  t.notOk('startup' in plain.json(), 'GET without include has no startup');
  t.notOk((await app.inject({ url: '/v1/jobs', headers: bearer(key) })).json().data.some((j: object) => 'startup' in j), 'nor does the list');
  assertDocumented(t, document, 'get', '/v1/jobs/:id', plain);
  const bad = await app.inject({ url: `/v1/jobs/${id}?include=everything`, headers: bearer(key) });
  t.equal(bad.statusCode, 400);
  t.match(bad.json(), { error: { code: 'invalid_request', details: [{ field: 'include' }] } });
});

/** A path of the route with each parameter filled in with a well-formed value that names nothing. */
const PLACEHOLDERS: Record<string, string> = { id: 'job_0123456789abcdefghijklmnop', index: '0', name: 'no-such-template' };
const concretePath = (route: DocumentedRoute, long = false) =>
  route.path.replace(/:([A-Za-z]+)/g, (_m, name: string) => (long ? 'x'.repeat(129) : name === 'id' && route.path.includes('artifacts') || route.path.startsWith('/files') ? 'art_0123456789abcdefghijklmnop' : PLACEHOLDERS[name]!));

t.test('error codes: what each route answers to bad requests is documented for it', async (t) => {
  const { app, db } = await buildTestApp(t);
  const { key } = await createTestKey(db);
  const document = (await app.inject({ url: '/v1/openapi.json' })).json() as OpenApiDocument;
  let address = 0;
  for (const route of documentedOperations()) {
    const method = route.method.toUpperCase() as 'GET' | 'HEAD' | 'POST' | 'PUT' | 'DELETE';
    // Each route from its own address: the anonymous limit (60 a minute) is not what is probed here.
    const remoteAddress = `10.1.${Math.floor(++address / 250)}.${address % 250}`;
    const probe = async (options: { path?: string; headers?: Record<string, string>; payload?: string }) =>
      assertDocumented(t, document, route.method, route.path, await app.inject({ method, url: options.path ?? concretePath(route), remoteAddress, headers: options.headers ?? {}, ...(options.payload === undefined ? {} : { payload: options.payload }) }));
    await probe({});
    await probe({ headers: bearer(key) });
    await probe({ headers: { authorization: 'Bearer nope' } });
    await probe({ headers: { authorization: `Bearer gf_live_${'a'.repeat(43)}` } });
    await probe({ path: `${concretePath(route)}?nope=1`, headers: bearer(key) });
    if (route.params) await probe({ path: concretePath(route, true), headers: bearer(key) });
    if (method !== 'GET' && method !== 'HEAD') {
      for (const [type, payload] of [['application/json', '{'], ['application/json', '{"__proto__": {"x": 1}}'], ['text/plain', 'x']] as const) {
        await probe({ headers: { ...bearer(key), 'content-type': type }, payload });
      }
    }
  }
  // The anonymous limit answers 429 with Retry-After on a public route.
  let last: LightMyRequestResponse | undefined;
  for (let i = 0; i <= 60; i++) last = await app.inject({ url: '/v1/pricing', remoteAddress: '10.9.9.9' });
  t.equal(last!.statusCode, 429);
  assertDocumented(t, document, 'get', '/v1/pricing', last!);
  t.ok(last!.headers['retry-after'], 'with Retry-After');
});

t.test('GET /v1/openapi.json: public, rate limited, the document', async (t) => {
  const { app } = await buildTestApp(t);
  const res = await app.inject({ url: '/v1/openapi.json' });
  t.equal(res.statusCode, 200);
  t.match(res.headers['content-type'], /^application\/json/);
  t.ok(res.headers['x-ratelimit-limit'], 'under the public rate limit');
  t.equal(res.headers['x-ratelimit-limit'], (await app.inject({ url: '/v1' })).headers['x-ratelimit-limit'], 'the same bucket as GET /v1');
  const document = res.json();
  t.equal(document.openapi, '3.1.0');
  t.same(document, JSON.parse(JSON.stringify(buildOpenApiDocument((await app.inject({ url: '/v1' })).json().links.self.replace(/\/v1$/, '')))));
  t.same(document.servers, [{ url: (await app.inject({ url: '/v1' })).json().links.self.replace(/\/v1$/, ''), description: 'This deployment' }], 'servers: the public URL');
  t.equal((await app.inject({ url: '/v1' })).json().links.openapi, `${(await app.inject({ url: '/v1' })).json().links.self}/openapi.json`, 'GET /v1 links it');
});

t.test('GET /docs: the reference page from local assets under a strict policy', async (t) => {
  const { app } = await buildTestApp(t);
  const page = await app.inject({ url: '/docs' });
  t.equal(page.statusCode, 200);
  t.match(page.headers['content-type'], /^text\/html/);
  t.equal(page.headers['content-security-policy'], DOCS_CONTENT_SECURITY_POLICY);
  t.match(DOCS_CONTENT_SECURITY_POLICY, /default-src 'none'/);
  t.notMatch(DOCS_CONTENT_SECURITY_POLICY, /unsafe-inline|unsafe-eval|https?:/, 'no inline script, no other origin');
  const sources = [...page.body.matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!);
  t.ok(sources.length >= 4);
  t.same(sources.filter((s) => !s.startsWith('/')), [], 'every asset is on this origin');
  t.notMatch(page.body, /<script>/, 'no inline script');
  for (const source of sources.filter((s) => s.startsWith('/docs/assets/'))) {
    const asset = await app.inject({ url: source });
    t.equal(asset.statusCode, 200, `${source} is served`);
    t.ok(asset.rawPayload.length > 0);
  }
  t.match((await app.inject({ url: '/docs/assets/swagger-ui-bundle.js' })).headers['content-type'], /javascript/);
  t.equal((await app.inject({ url: '/docs/assets/nope.js' })).statusCode, 404);
  t.match(page.body, /GET \/v1\/jobs\/\{id\}\/logs/, 'the route list for a reader without JavaScript');
});
