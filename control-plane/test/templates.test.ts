import { BUILT_IN_TEMPLATE_NAMES, jobTemplateListSchema, jobTemplateSchema, TEMPLATE_LIMITS } from '@gpufarm/shared';
import t from 'tap';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { assertError } from './helpers/assert.js';
import { bearer, buildTestApp, createTestKey, type TestApp } from './helpers/app.js';
import { buildWebTestApp, session, signIn } from './helpers/web.js';

const CANARY_IMAGE = `127.0.0.1:5000/gpufarm/canary@sha256:${'c'.repeat(64)}`;
const SHELL_IMAGE = `127.0.0.1:5000/gpufarm/busybox@sha256:${'b'.repeat(64)}`;
const IMAGES = { GF_CANARY_IMAGE: CANARY_IMAGE, GF_SHELL_IMAGE: SHELL_IMAGE };
const SPEC = { title: 'nightly', image: 'ghcr.io/acme/train:1', command: ['python', 'train.py'], gpu: { count: 1 }, maxRuntimeSeconds: 3600 };

async function offerOneGpu(test: TestApp): Promise<void> {
  const farm = await createFarm(test.db, { slug: 'tpl-farm' });
  await createMachine(test.db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 });
  await test.offerIndex.refresh();
}

t.test('behavior: an API key lists the built-in templates, saves, replaces, reads and deletes its own; each built-in creates a job', async (t) => {
  const test = await buildTestApp(t, { env: IMAGES });
  const { app } = test;
  await offerOneGpu(test);
  const { key } = await createTestKey(test.db);
  const headers = bearer(key);

  const first = await app.inject({ url: '/v1/templates', headers });
  t.equal(first.statusCode, 200);
  const builtIns = jobTemplateListSchema.parse(first.json()).data;
  t.same(builtIns.map((x) => [x.name, x.source]), BUILT_IN_TEMPLATE_NAMES.map((name) => [name, 'built_in']), 'every built-in, none of its own yet');
  t.match(builtIns[0], { name: 'canary', spec: { image: CANARY_IMAGE, command: ['sha256-chain', '100000'], deterministic: true }, createdAt: null });
  for (const builtIn of builtIns) {
    const created = await app.inject({ method: 'POST', url: '/v1/jobs', headers, payload: builtIn.spec });
    t.equal(created.statusCode, 201, `the ${builtIn.name} template creates a job as it is (policy and schema pass): ${created.body}`);
  }

  const saved = await app.inject({ method: 'PUT', url: '/v1/templates/nightly-train', headers, payload: { description: 'the nightly run', spec: SPEC } });
  t.equal(saved.statusCode, 201, saved.body);
  const made = jobTemplateSchema.parse(saved.json());
  t.match(made, { name: 'nightly-train', description: 'the nightly run', source: 'account', spec: SPEC });
  t.equal(made.createdAt, made.updatedAt);

  const replaced = await app.inject({ method: 'PUT', url: '/v1/templates/nightly-train', headers, payload: { spec: { ...SPEC, gpu: { count: 2 } } } });
  t.equal(replaced.statusCode, 200, 'saving again under the name replaces it');
  t.match(replaced.json(), { description: null, spec: { gpu: { count: 2 } }, createdAt: made.createdAt });
  t.ok(replaced.json().updatedAt >= made.updatedAt!, 'updated later');

  const taken = await app.inject({ method: 'PUT', url: '/v1/templates/nightly-train', headers: { ...headers, 'if-none-match': '*' }, payload: { spec: SPEC } });
  assertError(t, taken, 'conflict', 409);
  t.same(taken.json().error.details.map((d: { field: string }) => d.field), ['name'], 'If-None-Match: * refuses a taken name, naming the field');
  const fresh = await app.inject({ method: 'PUT', url: '/v1/templates/other', headers: { ...headers, 'if-none-match': '*' }, payload: { spec: SPEC } });
  t.equal(fresh.statusCode, 201, 'and creates a free one');

  const one = await app.inject({ url: '/v1/templates/nightly-train', headers });
  t.match(one.json(), { name: 'nightly-train', spec: { gpu: { count: 2 } } });
  t.match((await app.inject({ url: '/v1/templates/canary', headers })).json(), { source: 'built_in', spec: { image: CANARY_IMAGE } }, 'a built-in by name');
  const listed = jobTemplateListSchema.parse((await app.inject({ url: '/v1/templates', headers })).json()).data.map((x) => x.name);
  t.same(listed, [...BUILT_IN_TEMPLATE_NAMES, 'nightly-train', 'other'], 'built-ins first, then its own by name');

  const other = await createTestKey(test.db);
  t.same(jobTemplateListSchema.parse((await app.inject({ url: '/v1/templates', headers: bearer(other.key) })).json()).data.map((x) => x.source), builtIns.map(() => 'built_in'), 'another account sees none of them');
  assertError(t, await app.inject({ url: '/v1/templates/nightly-train', headers: bearer(other.key) }), 'not_found', 404);
  assertError(t, await app.inject({ method: 'DELETE', url: '/v1/templates/nightly-train', headers: bearer(other.key) }), 'not_found', 404);

  const deleted = await app.inject({ method: 'DELETE', url: '/v1/templates/nightly-train', headers });
  t.equal(deleted.statusCode, 204);
  assertError(t, await app.inject({ url: '/v1/templates/nightly-train', headers }), 'not_found', 404);
  assertError(t, await app.inject({ method: 'DELETE', url: '/v1/templates/nightly-train', headers }), 'not_found', 404);
});

t.test('error: bad input gets the error envelope naming the field; built-in names and scopes are kept', async (t) => {
  const test = await buildTestApp(t, { env: IMAGES });
  const { app } = test;
  const { key } = await createTestKey(test.db);
  const headers = bearer(key);
  const cases: Array<[string, unknown, 'invalid_request' | 'validation_error', number, string[]]> = [
    ['My%20Job', { spec: SPEC }, 'invalid_request', 400, ['name']],
    ['-dash', { spec: SPEC }, 'invalid_request', 400, ['name']],
    ['x'.repeat(65), { spec: SPEC }, 'invalid_request', 400, ['name']],
    ['ok', { spec: SPEC, description: 'd'.repeat(TEMPLATE_LIMITS.descriptionMaxChars + 1) }, 'invalid_request', 400, ['description']],
    ['ok', { spec: SPEC, owner: 'me' }, 'invalid_request', 400, ['owner']],
    ['ok', {}, 'invalid_request', 400, ['spec']],
    ['ok', { spec: { ...SPEC, gpu: { count: 99 } } }, 'validation_error', 422, ['spec.gpu.count']],
    ['ok', { spec: { ...SPEC, image: 'Not An Image', bogus: true } }, 'validation_error', 422, ['spec.image', 'spec.bogus']],
  ];
  for (const [name, payload, code, status, fields] of cases) {
    const res = await app.inject({ method: 'PUT', url: `/v1/templates/${name}`, headers, payload: payload as object });
    assertError(t, res, code, status);
    t.same(res.json().error.details.map((d: { field: string }) => d.field), fields, `PUT ${name.slice(0, 20)}: names ${fields.join(', ')}`);
  }
  const notJson = await app.inject({ method: 'PUT', url: '/v1/templates/ok', headers: { ...headers, 'content-type': 'application/json' }, payload: '{"spec":' });
  assertError(t, notJson, 'invalid_json', 400);
  assertError(t, await app.inject({ method: 'PUT', url: '/v1/templates/ok', headers: { ...headers, 'if-none-match': '"v1"' }, payload: { spec: SPEC } }), 'invalid_request', 400);
  assertError(t, await app.inject({ url: '/v1/templates/Bad%20Name', headers }), 'invalid_request', 400);

  const builtIn = await app.inject({ method: 'PUT', url: '/v1/templates/canary', headers, payload: { spec: SPEC } });
  assertError(t, builtIn, 'conflict', 409);
  t.same(builtIn.json().error.details.map((d: { field: string }) => d.field), ['name'], 'a built-in name cannot be saved over');
  assertError(t, await app.inject({ method: 'DELETE', url: '/v1/templates/canary', headers }), 'conflict', 409);

  const reader = await createTestKey(test.db, { scopes: ['jobs:read'] });
  t.equal((await app.inject({ url: '/v1/templates', headers: bearer(reader.key) })).statusCode, 200, 'jobs:read lists');
  assertError(t, await app.inject({ method: 'PUT', url: '/v1/templates/mine', headers: bearer(reader.key), payload: { spec: SPEC } }), 'insufficient_scope', 403);
  assertError(t, await app.inject({ method: 'DELETE', url: '/v1/templates/mine', headers: bearer(reader.key) }), 'insufficient_scope', 403);
  assertError(t, await app.inject({ url: '/v1/templates' }), 'missing_api_key', 401);

  // The account's limit: the next new name is refused, replacing one it has is not.
  const full = await createTestKey(test.db);
  await test.db.query(`INSERT INTO job_templates (account_id, name, spec) SELECT $1, 't' || n, $2::jsonb FROM generate_series(1, $3::int) AS n`, [full.accountId, JSON.stringify(SPEC), TEMPLATE_LIMITS.perAccount]);
  const over = await app.inject({ method: 'PUT', url: '/v1/templates/one-more', headers: bearer(full.key), payload: { spec: SPEC } });
  assertError(t, over, 'conflict', 409);
  t.match(over.json().error.message, new RegExp(`${TEMPLATE_LIMITS.perAccount} templates`));
  t.equal((await app.inject({ method: 'PUT', url: '/v1/templates/t1', headers: bearer(full.key), payload: { spec: SPEC } })).statusCode, 200, 'a full account still replaces its own');
});

t.test('behavior: the dashboard session saves with its CSRF token; a deployment without the shell image offers the canary only', async (t) => {
  const test = await buildWebTestApp(t, { GF_CANARY_IMAGE: CANARY_IMAGE });
  const { app } = test;
  const signedIn = await signIn(app);
  const list = await app.inject({ url: '/dashboard/api/v1/templates', headers: session(signedIn) });
  t.same(jobTemplateListSchema.parse(list.json()).data.map((x) => x.name), ['canary'], 'no shell image: only the canary is offered');
  const noToken = await app.inject({ method: 'PUT', url: '/dashboard/api/v1/templates/from-page', headers: session(signedIn), payload: { spec: SPEC } });
  assertError(t, noToken, 'forbidden', 403);
  const saved = await app.inject({ method: 'PUT', url: '/dashboard/api/v1/templates/from-page', headers: { ...session(signedIn, { csrf: true }), 'if-none-match': '*' }, payload: { spec: SPEC } });
  t.equal(saved.statusCode, 201, saved.body);
  t.same(jobTemplateListSchema.parse((await app.inject({ url: '/dashboard/api/v1/templates', headers: session(signedIn) })).json()).data.map((x) => x.name), ['canary', 'from-page']);
  assertError(t, await app.inject({ method: 'DELETE', url: '/dashboard/api/v1/templates/from-page', headers: session(signedIn) }), 'forbidden', 403);
  t.equal((await app.inject({ method: 'DELETE', url: '/dashboard/api/v1/templates/from-page', headers: session(signedIn, { csrf: true }) })).statusCode, 204);
});
