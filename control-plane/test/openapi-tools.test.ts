import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fundConfirmRequestSchema, jobCreateRequestSchema } from '@gpufarm/shared';
import { createConfig, lintFromString } from '@redocly/openapi-core';
import { Spectral } from '@stoplight/spectral-core';
import { oas } from '@stoplight/spectral-rulesets';
import openapiTS, { astToString } from 'openapi-typescript';
import t from 'tap';
import ts from 'typescript';
import { cancelBody } from '../src/jobs/routes.js';
import { buildTestApp } from './helpers/app.js';

/**
 * The served document through the tools an outside developer uses: Spectral's `spectral:oas`,
 * Redocly's `recommended` rules, and a client generated with openapi-typescript.
 */

/** The warnings kept, each justified in docs/decisions.md ("OpenAPI document: what the linters may still say"). */
const KEPT_WARNINGS = ['redocly info-license', 'spectral info-contact'];

/** The spec's own examples, as a client sends them: numbers in queries, the job spec's fields. */
const EXAMPLES = {
  capacityQuery: { limit: 10, minVram: 24, maxPrice: 2.5, minUptime: 99.5, sort: 'price_asc', tier: 'A', availability: 'available' },
  jobsQuery: { limit: 10, status: 'RUNNING' },
  logsQuery: { cursor: '0', limit: 500, stream: 'stdout' },
  billingQuery: { limit: 50 },
  createJob: {
    image: 'ghcr.io/acme/trainer:1.2',
    command: ['python', 'train.py', '--epochs', '3'],
    gpu: { count: 1, minimumVramGb: 24 },
    workloadType: 'fine_tuning',
    maxRuntimeSeconds: 3600,
    maxPricePerGpuHour: '2.5',
    estRuntime: { minSeconds: 600, maxSeconds: 1800 },
    paymentToken: 'stable',
    env: { EPOCHS: '3' },
    networkPolicy: { mode: 'allowlist', allow: ['huggingface.co'] },
    outputRules: [{ path: '/output', maxBytes: 1073741824 }],
    regionPreference: 'us-east',
    title: 'Fine-tune the trainer',
  },
  canaryJob: { image: 'ghcr.io/gpufarm/canary:1', command: ['sha256-chain', '1000'], workloadType: 'batch', gpu: { count: 1 }, deterministic: true },
  fundConfirm: { txHash: `0x${'ab'.repeat(32)}` },
  cancel: { reason: 'no longer needed' },
} as const;

t.test('lint: spectral:oas and redocly recommended find no error in the served document', async (t) => {
  const { app } = await buildTestApp(t);
  const source = (await app.inject({ url: '/v1/openapi.json' })).body;

  const spectral = new Spectral();
  spectral.setRuleset({ extends: [[oas as never, 'recommended']] });
  // Spectral's severities: 0 error, 1 warning, 2 information, 3 hint.
  const spectralResults = await spectral.run(source);
  const redoclyProblems = await lintFromString({ source, absoluteRef: '/v1/openapi.json', config: await createConfig({ extends: ['recommended'] }) });

  const describe = (tool: string, rule: string, where: string, message: string) => `${tool} ${rule} at ${where}: ${message}`;
  t.same(spectralResults.filter((r) => r.severity === 0).map((r) => describe('spectral', String(r.code), r.path.join('.'), r.message)), [], 'spectral: no error');
  t.same(redoclyProblems.filter((p) => p.severity === 'error').map((p) => describe('redocly', p.ruleId, p.location[0]?.pointer ?? '', p.message)), [], 'redocly: no error');
  const warnings = [
    ...spectralResults.filter((r) => r.severity === 1).map((r) => `spectral ${String(r.code)}`),
    ...redoclyProblems.filter((p) => p.severity === 'warn').map((p) => `redocly ${p.ruleId}`),
  ].sort();
  t.same(warnings, KEPT_WARNINGS, 'only the warnings justified in docs/decisions.md');

  t.test('the linters can fail: a document without servers and with a dangling reference', async (t) => {
    const broken = JSON.parse(source) as { servers?: unknown; paths: Record<string, Record<string, { responses: Record<string, unknown> }>> };
    delete broken.servers;
    broken.paths['/v1/pricing']!.get!.responses['200'] = { description: 'x', content: { 'application/json': { schema: { $ref: '#/components/schemas/Nope' } } } };
    const text = JSON.stringify(broken);
    const spectralErrors = (await spectral.run(text)).filter((r) => r.severity === 0).map((r) => String(r.code));
    const redoclyErrors = (await lintFromString({ source: text, absoluteRef: '/v1/openapi.json', config: await createConfig({ extends: ['recommended'] }) })).filter((p) => p.severity === 'error').map((p) => p.ruleId);
    t.ok(spectralErrors.length > 0, `spectral: ${spectralErrors.join(', ')}`);
    t.ok(redoclyErrors.includes('no-server-example.com') || redoclyErrors.includes('no-empty-servers'), `redocly: ${redoclyErrors.join(', ')}`);
  });
});

/** A file using the generated types with the examples; `@ts-expect-error` lines must stay errors. */
function clientUse(): string {
  const json = (value: unknown) => JSON.stringify(value);
  return `import type { components, paths } from './api';

type Query<P extends keyof paths> = paths[P] extends { get: { parameters: { query?: infer Q } } } ? NonNullable<Q> : never;
type JsonBody<B> = B extends { content: { 'application/json': infer J } } ? J : never;

export const capacity: Query<'/v1/capacity'> = ${json(EXAMPLES.capacityQuery)};
export const jobs: Query<'/v1/jobs'> = ${json(EXAMPLES.jobsQuery)};
export const logs: Query<'/v1/jobs/{id}/logs'> = ${json(EXAMPLES.logsQuery)};
export const billing: Query<'/v1/billing'> = ${json(EXAMPLES.billingQuery)};
export const create: JsonBody<paths['/v1/jobs']['post']['requestBody']> = ${json(EXAMPLES.createJob)};
export const canary: components['schemas']['JobCreateRequest'] = ${json(EXAMPLES.canaryJob)};
export const priced: components['schemas']['JobCreateRequest'] = { image: 'busybox', gpu: { count: 2 }, maxPricePerGpuHour: 2.5 };
export const fund: JsonBody<paths['/v1/jobs/{id}/fund-confirm']['post']['requestBody']> = ${json(EXAMPLES.fundConfirm)};
export const cancel: JsonBody<NonNullable<paths['/v1/jobs/{id}/cancel']['post']['requestBody']>> = ${json(EXAMPLES.cancel)};

// Required bodies are not optional; cancel's is.
export const createNeedsBody: undefined extends paths['/v1/jobs']['post']['requestBody'] ? false : true = true;
export const fundNeedsBody: undefined extends paths['/v1/jobs/{id}/fund-confirm']['post']['requestBody'] ? false : true = true;
export const cancelBodyOptional: undefined extends paths['/v1/jobs/{id}/cancel']['post']['requestBody'] ? true : false = true;

// Response headers are typed, Retry-After on 429 and on the pending fund-confirm.
type Created = paths['/v1/jobs']['post']['responses'][201]['headers'];
export const requestId = (h: Created): string => h['X-Request-Id'];
export const remaining = (h: Created): number => h['X-RateLimit-Remaining'];
export const retryLimited = (h: paths['/v1/jobs']['post']['responses'][429]['headers']): number => h['Retry-After'];
export const retryPending = (h: paths['/v1/jobs/{id}/fund-confirm']['post']['responses'][202]['headers']): number => h['Retry-After'];

// HEAD is documented where the server answers it.
export type HeadJob = paths['/v1/jobs/{id}']['head'];

// What the server refuses, the types refuse.
// @ts-expect-error limit is a number
export const textLimit: Query<'/v1/jobs'> = { limit: '10' };
// @ts-expect-error title is a string
export const numberTitle: components['schemas']['JobCreateRequest'] = { image: 'busybox', gpu: { count: 1 }, title: 1 };
// @ts-expect-error gpu is required
export const noGpu: components['schemas']['JobCreateRequest'] = { image: 'busybox' };
`;
}

t.test('client: types generated from the served document type-check the spec\'s examples', async (t) => {
  const { app } = await buildTestApp(t);
  const document = (await app.inject({ url: '/v1/openapi.json' })).json() as Parameters<typeof openapiTS>[0];
  const dir = await mkdtemp(join(tmpdir(), 'gf-openapi-client-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await writeFile(join(dir, 'api.ts'), astToString(await openapiTS(document, { silent: true })));
  await writeFile(join(dir, 'use.ts'), clientUse());

  const program = ts.createProgram([join(dir, 'use.ts')], {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    types: [],
  });
  const problems = ts.getPreEmitDiagnostics(program).map((d) => {
    const where = d.file && d.start !== undefined ? `${d.file.fileName.replace(dir, '')}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}` : '';
    return `${where} ${ts.flattenDiagnosticMessageText(d.messageText, ' ')}`;
  });
  t.same(problems, [], 'the generated client and its use type-check');

  // The same examples are what the server takes.
  t.ok(jobCreateRequestSchema.safeParse(EXAMPLES.createJob).success, 'the creation example is a valid spec');
  t.ok(jobCreateRequestSchema.safeParse(EXAMPLES.canaryJob).success, 'the canary example is a valid spec');
  t.ok(fundConfirmRequestSchema.safeParse(EXAMPLES.fundConfirm).success, 'the fund-confirm example is valid');
  t.ok(cancelBody.safeParse(EXAMPLES.cancel).success, 'the cancel example is valid');
  const query = new URLSearchParams(Object.fromEntries(Object.entries(EXAMPLES.capacityQuery).map(([k, v]) => [k, String(v)])));
  const capacity = await app.inject({ url: `/v1/capacity?${query}` });
  t.equal(capacity.statusCode, 200, `the numbers of the capacity example, as a client sends them, are taken (${capacity.body.slice(0, 200)})`);
});
