import { createServer } from 'node:http';
import * as shared from '@gpufarm/shared';
import { ANVIL_ACCOUNTS } from '@gpufarm/control-plane/testing';
import t from 'tap';
import { buildTestApp, createTestKey } from '@gpufarm/control-plane/testing/app';
import { buildEscrowTestApp, sendFundingCalls, startTestChain } from '@gpufarm/control-plane/testing/chain';
import { createClient, type RequestEvent } from '../src/index.js';
import { failure, listening } from './helpers/control-plane.js';
import { ADDED_FIELD, frontOf } from './helpers/front.js';

const SPEC = { image: 'ghcr.io/acme/job:1', gpu: { count: 1 }, maxPricePerGpuHour: '2', title: 'sdk test' };
const CUSTOMER = ANVIL_ACCOUNTS[1];

t.test('default: every /v1 method answers its schema-checked resource from a real control plane', async (t) => {
  const chain = await startTestChain(t);
  const s = await listening((env) => buildEscrowTestApp(t, chain, { env }));
  const { key } = await createTestKey(s.db, { walletAddress: CUSTOMER.address.toLowerCase() });
  const events: RequestEvent[] = [];
  const gf = createClient({ baseUrl: s.baseUrl, apiKey: key, onRequest: (e) => events.push(e) });

  const index = await gf.index();
  t.ok(shared.serviceIndexSchema.safeParse(index).success);
  t.equal(index.links.self, `${s.baseUrl}/v1`);
  t.ok(shared.pricingSchema.safeParse(await gf.pricing()).success, 'pricing');
  t.ok(shared.capacityListSchema.safeParse(await gf.capacity.list({ sort: 'price_asc', limit: 5 })).success, 'capacity');
  t.ok(shared.capacityListSchema.safeParse(await gf.capacity.list({ proven: true })).success, 'capacity of proven machines (proven=true)');
  const offers = [];
  for await (const offer of gf.capacity.listAll({ limit: 1 })) offers.push(offer);
  t.same(offers, [], 'an empty market walks to the end');

  const created = await gf.jobs.create(SPEC);
  t.ok(shared.jobCreatedSchema.safeParse(created).success, 'job.created');
  t.equal(created.job.status, 'CREATED');
  const second = await gf.jobs.create({ ...SPEC, title: 'second' });
  t.ok(shared.jobSchema.safeParse(await gf.jobs.get(created.job.id)).success, 'job');
  t.ok(shared.jobListSchema.safeParse(await gf.jobs.list({ status: ['CREATED'], limit: 1 })).success, 'job list');
  const walked = [];
  for await (const job of gf.jobs.listAll({ status: ['CREATED'], limit: 1 })) walked.push(job.id);
  t.same(walked, [second.job.id, created.job.id], 'listAll walks every page, newest first');

  const funding = await gf.jobs.funding(created.job.id);
  t.ok(shared.fundingSchema.safeParse(funding).success, 'funding');
  t.equal(funding.signer.toLowerCase(), CUSTOMER.address.toLowerCase());
  const hashes = await sendFundingCalls(chain, chain.wallet(1), funding.calls);
  let confirmation = await gf.jobs.fundConfirm(created.job.id, hashes.at(-1) as shared.TxHash);
  while (confirmation.status === 'pending') confirmation = await gf.jobs.fundConfirm(created.job.id, hashes.at(-1) as shared.TxHash);
  t.ok(shared.fundConfirmResponseSchema.safeParse(confirmation).success, 'funding.confirmation');
  t.equal(confirmation.job.status, 'QUEUED');

  t.ok(shared.logListSchema.safeParse(await gf.jobs.logs(created.job.id, { cursor: '0', limit: 10 })).success, 'logs');
  const billing = await gf.billing.list({ limit: 10 });
  t.equal(billing.data.length, 1, 'the funding made one billing entry');
  for await (const entry of gf.billing.listAll({ limit: 1 })) t.ok(shared.billingEntrySchema.safeParse(entry).success, 'billing entry');

  const canceled = await gf.jobs.cancel(created.job.id, { reason: 'sdk test' });
  t.ok(shared.jobSchema.safeParse(canceled).success);
  t.equal(canceled.status, 'CANCELED');

  const bytes = Buffer.from('input bytes for the sdk');
  const uploaded = await gf.artifacts.upload(bytes, { filename: 'in.txt' });
  t.ok(shared.artifactMetadataSchema.safeParse(uploaded).success, 'upload answers artifact metadata');
  t.ok(shared.artifactMetadataSchema.safeParse(await gf.artifacts.get(uploaded.id)).success, 'artifact metadata');
  const where = await gf.artifacts.location(uploaded.id);
  t.equal(where.sha256, uploaded.sha256);
  t.equal(where.sizeBytes, bytes.length);
  t.match(where.url, `${s.baseUrl}/files/${uploaded.id}?`);

  t.ok(events.length > 0 && events.every((e) => e.status !== null && e.requestId !== null && e.url.startsWith(s.baseUrl)), 'onRequest saw every call with its status and request id');
  t.ok(events.some((e) => e.method === 'POST' && e.url === `${s.baseUrl}/v1/jobs` && e.status === 201));
});

t.test('error: a server error keeps its status, code, message, details and request id', async (t) => {
  const s = await listening((env) => buildTestApp(t, { env }));
  const { key } = await createTestKey(s.db);
  const gf = createClient({ baseUrl: s.baseUrl, apiKey: key });
  const gfError = await failure(gf.jobs.get(`job_${'a'.repeat(26)}`));
  t.equal(gfError.code, 'not_found');
  t.equal(gfError.status, 404);
  t.match(gfError.requestId, /^req_/);
  t.match(gfError.message, 'No job');
  const invalid = await failure(gf.jobs.create({ image: 'ghcr.io/acme/job:1', gpu: { count: 99 } }));
  t.equal(invalid.code, 'validation_error');
  t.equal(invalid.status, 422);
  t.ok(invalid.details.some((d) => d.field.startsWith('gpu')), 'details name the field');
  t.equal(invalid.retryable, false);
});

t.test('behavior: answers with fields this client does not know, as a newer server may send, are read without them', async (t) => {
  const s = await listening((env) => buildTestApp(t, { env }));
  const { key } = await createTestKey(s.db);
  const newer = await frontOf(t, s.baseUrl, [], {}, 'forward-as-newer');
  const gf = createClient({ baseUrl: newer.baseUrl, apiKey: key });
  const direct = createClient({ baseUrl: s.baseUrl, apiKey: key });
  const without = (value: unknown) => !JSON.stringify(value).includes(ADDED_FIELD);
  // Each capacity page says when it was made; the two reads differ only there.
  const undated = <T extends { generatedAt: string }>(page: T) => ({ ...page, generatedAt: 'when answered' });

  const created = await gf.jobs.create(SPEC);
  // The strict schema refuses a field it does not know (the applied defaults' free JSON values keep theirs).
  t.ok(shared.jobCreatedSchema.safeParse(created).success, 'job.created as this client knows it');
  const read = {
    index: await gf.index(),
    pricing: await gf.pricing(),
    capacity: undated(await gf.capacity.list({ limit: 5 })),
    job: await gf.jobs.get(created.job.id),
    jobs: await gf.jobs.list({ limit: 5 }),
  };
  t.ok(without(read), 'no added field in any answer');
  t.same(read, {
    index: await direct.index(),
    pricing: await direct.pricing(),
    capacity: undated(await direct.capacity.list({ limit: 5 })),
    job: await direct.jobs.get(created.job.id),
    jobs: await direct.jobs.list({ limit: 5 }),
  }, 'each as the server answers it directly');

  const missing = await failure(gf.jobs.get('job_01jz0000000000000000000000'));
  t.equal(missing.code, 'not_found', 'an error envelope with added fields keeps its code');
  t.equal(missing.status, 404);
  t.match(missing.requestId, /^req_/);
});

t.test('error: invalid_response names the field of an answer that fails its schema', async (t) => {
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': 'req_fake' });
    res.end(JSON.stringify({ object: 'job', id: 'job_x', status: 'NOT_A_STATUS' }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => server.close());
  const gf = createClient({ baseUrl: `http://127.0.0.1:${(server.address() as { port: number }).port}`, apiKey: 'gf_test_x' });
  const error = await failure(gf.jobs.get('job_x'));
  t.equal(error.code, 'invalid_response');
  t.equal(error.status, 200);
  t.equal(error.requestId, 'req_fake');
  t.ok(error.details.some((d) => d.field === 'status'), 'the field that failed is named');
});

t.test('default: index() of a deployment with a canary image names it', async (t) => {
  const image = `registry.example.com/gpufarm/canary@sha256:${'c'.repeat(64)}`;
  const s = await listening((env) => buildTestApp(t, { env: { ...env, GF_CANARY_IMAGE: image } }));
  const index = await createClient({ baseUrl: s.baseUrl }).index();
  t.equal(index.canary?.image, image);
  t.same(index.canary?.command, ['sha256-chain', '<iterations>']);
  t.equal(index.environment, 'local');
  t.equal(index.apiKeyPrefix, 'gf_test_');
});
