import { capacityListSchema, errorEnvelopeSchema } from '@gpufarm/shared';
import Fastify, { type FastifyInstance } from 'fastify';
import t from 'tap';
import { createOfferIndex } from '../src/capacity/offer-index.js';
import { parseCapacityQuery } from '../src/capacity/query.js';
import { capacityRoutes } from '../src/capacity/routes.js';
import { offerIdFor } from '../src/capacity/snapshot.js';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { buildTestApp } from './helpers/app.js';
import { assertError } from './helpers/assert.js';
import { createPostgresTestDatabase } from './helpers/database.js';

let address = 0;
/** A fresh client address per call: anonymous calls are limited to 60 a minute per address. */
const get = (app: FastifyInstance, url: string) => app.inject({ url, remoteAddress: `10.9.${(++address >> 8) & 255}.${address & 255}` });

t.test('GET /v1/capacity', async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  const north = await createFarm(db, { slug: 'north-gpu', name: 'North GPU', provider: 'North GPU Inc.' });
  const south = await createFarm(db, { slug: 'south-gpu', name: 'South GPU', provider: 'South GPU Ltda.' });
  await createMachine(db, { farmId: north.id, regionKey: 'canada', classId: 'rtx-4090-24gb', gpuCount: 4, busyGpus: 1, pricePerGpuHourMicroUsd: 450_000, uptimePct: 99 });
  await createMachine(db, { farmId: north.id, regionKey: 'canada', classId: 'a100-40gb', gpuCount: 8, pricePerGpuHourMicroUsd: 1_000_000, benchmarkTier: 'S', uptimePct: 98 });
  await createMachine(db, { farmId: south.id, regionKey: 'south-america', classId: 'rtx-3090-24gb', gpuCount: 2, pricePerGpuHourMicroUsd: 200_000, benchmarkTier: 'B', uptimePct: 93.25 });
  const o4090 = offerIdFor(north.id, 'rtx-4090-24gb', 'canada');
  const oA100 = offerIdFor(north.id, 'a100-40gb', 'canada');
  const o3090 = offerIdFor(south.id, 'rtx-3090-24gb', 'south-america');
  const { app, config } = await buildTestApp(t, { db });

  t.test('default: the list envelope, public, cheapest first', async (t) => {
    const res = await get(app, '/v1/capacity');
    t.equal(res.statusCode, 200);
    t.match(res.headers['content-type'], /^application\/json/);
    t.equal(res.headers['access-control-allow-origin'], '*', 'public GET readable cross-origin');
    t.ok(res.headers['x-ratelimit-limit'], 'rate limited');
    const body = capacityListSchema.parse(res.json());
    t.equal(body.chainId, config.chainId);
    t.ok(Math.abs(Date.parse(body.generatedAt) - Date.now()) < 60_000, 'generatedAt is now');
    t.same(body.data.map((o) => o.id), [o3090, o4090, oA100]);
    t.equal(body.nextCursor, null);
    t.equal(body.data[0]!.uptimePct, 93.25);
  });

  t.test('args: filters and sort over HTTP', async (t) => {
    const ids = async (query: string) => capacityListSchema.parse((await get(app, `/v1/capacity?${query}`)).json()).data.map((o) => o.id);
    t.same(await ids('region=North%20America'), [o4090, oA100]);
    t.same(await ids('minVram=30'), [oA100]);
    t.same(await ids('maxPrice=0.45'), [o3090, o4090]);
    t.same(await ids('farm=south-gpu'), [o3090]);
    t.same(await ids('tier=S'), [oA100]);
    t.same(await ids('minUptime=98.5'), [o4090]);
    t.same(await ids('sort=count'), [oA100, o4090, o3090]);
    t.same(await ids('sort=price_desc&limit=2'), [oA100, o4090]);
    t.same(await ids('model=&region='), [o3090, o4090, oA100], 'empty values count as absent');
  });

  t.test('args: limit and cursor page through every offer once', async (t) => {
    const seen: string[] = [];
    let url = '/v1/capacity?sort=uptime&limit=1';
    for (let i = 0; i < 5; i++) {
      const body = capacityListSchema.parse((await get(app, url)).json());
      seen.push(...body.data.map((o) => o.id));
      if (!body.nextCursor) break;
      t.match(body.nextCursor, /^[A-Za-z0-9_-]+$/, 'base64url');
      url = `/v1/capacity?sort=uptime&limit=1&cursor=${body.nextCursor}`;
    }
    t.same(seen, [o4090, oA100, o3090]);
  });

  t.test('error: invalid_request names the parameter', async (t) => {
    const first = capacityListSchema.parse((await get(app, '/v1/capacity?limit=1')).json());
    const cases: Array<[string, string]> = [
      ['limit=0', 'limit'],
      ['limit=501', 'limit'],
      ['limit=abc', 'limit'],
      ['limit=1.5', 'limit'],
      ['sort=cheapest', 'sort'],
      ['tier=X', 'tier'],
      ['tier=s', 'tier'],
      ['region=mars', 'region'],
      ['model=gtx-1080', 'model'],
      ['cuda=twelve', 'cuda'],
      ['cuda=12.', 'cuda'],
      ['minVram=lots', 'minVram'],
      ['minVram=-4', 'minVram'],
      ['maxPrice=-1', 'maxPrice'],
      ['maxPrice=1e3', 'maxPrice'],
      ['maxPrice=0.0000001', 'maxPrice'],
      ['minUptime=101', 'minUptime'],
      ['minUptime=100.01', 'minUptime'],
      ['workload=mining', 'workload'],
      ['availability=some', 'availability'],
      ['proven=yes', 'proven'],
      ['proven=TRUE', 'proven'],
      ['proven=1', 'proven'],
      ['cursor=garbage', 'cursor'],
      ['cursor=eyJzIjoidnJhbSJ9', 'cursor'],
      [`sort=vram&cursor=${first.nextCursor}`, 'cursor'],
      ['gpu=h100', 'gpu'],
      ['limit=1&limit=2', 'limit'],
    ];
    for (const [query, field] of cases) {
      const res = await get(app, `/v1/capacity?${query}`);
      assertError(t, res, 'invalid_request', 400);
      const { error } = errorEnvelopeSchema.parse(res.json());
      t.same(error.details.map((d) => d.field), [field], `${query}: details name ${field}`);
      t.match(error.message, field, `${query}: the message names ${field}`);
    }
    const two = errorEnvelopeSchema.parse((await get(app, '/v1/capacity?limit=0&tier=Z')).json());
    t.same(two.error.details.map((d) => d.field).sort(), ['limit', 'tier'], 'every offending parameter is listed');
  });
});

t.test('proof: whether and since when the machines of an offer proved their GPUs', async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  const farm = await createFarm(db, { slug: 'proof-gpu' });
  // Two proven machines: the offer is proven since the older proof.
  await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 2, pricePerGpuHourMicroUsd: 400_000, provenAt: new Date('2026-03-01T00:00:00Z') });
  await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 450_000, provenAt: new Date('2026-02-20T12:00:00.500Z') });
  // One proven and one not: the offer is not proven; asked for proven, it shows the proven one.
  await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'a100-80gb', gpuCount: 4, pricePerGpuHourMicroUsd: 1_500_000, provenAt: new Date('2026-03-02T00:00:00Z') });
  await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'a100-80gb', gpuCount: 8, pricePerGpuHourMicroUsd: 1_200_000 });
  // None proven.
  await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'l4-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 300_000 });
  const o4090 = offerIdFor(farm.id, 'rtx-4090-24gb', 'us-east');
  const oA100 = offerIdFor(farm.id, 'a100-80gb', 'us-east');
  const oL4 = offerIdFor(farm.id, 'l4-24gb', 'us-east');
  const { app, offerIndex } = await buildTestApp(t, { db });
  const offers = async (query: string) => capacityListSchema.parse((await get(app, `/v1/capacity?${query}`)).json()).data;

  t.test('default: every offer says whether it is proven, since the oldest proof of its machines', async (t) => {
    const all = await offers('');
    t.same(all.map((o) => [o.id, o.proof]), [
      [oL4, { proven: false, provenAt: null }],
      [o4090, { proven: true, provenAt: '2026-02-20T12:00:00.500Z' }],
      [oA100, { proven: false, provenAt: null }],
    ]);
    t.same(all, offerIndex.listOffers().data, 'the hand-written JSON says what the offer objects say');
    t.same(await offers('proven=false'), all, 'proven=false: every machine, as without it');
  });

  t.test('args: proven=true keeps the proven machines, before they are grouped into offers', async (t) => {
    const proven = await offers('proven=true');
    t.same(proven.map((o) => o.id), [o4090, oA100], 'the offer with no proven machine is gone');
    t.match(proven[0], { count: 3, machines: 2, proof: { proven: true, provenAt: '2026-02-20T12:00:00.500Z' } });
    t.match(proven[1], { count: 4, machines: 1, price: { perGpuHourMicroUsd: 1_500_000 }, proof: { proven: true, provenAt: '2026-03-02T00:00:00.000Z' } }, 'the A100 offer with its proven machine only');
    t.same(proven, offerIndex.listOffers(parseCapacityQuery({ proven: 'true' })).data, 'the filtered JSON agrees with the objects');
    t.same((await offers('proven=true&model=l4-24gb')).length, 0);
  });
});

t.test('behavior: a body reused within one millisecond is byte for byte a fresh serialization', async (t) => {
  const { db } = await createPostgresTestDatabase(t);
  const farm = await createFarm(db, { slug: 'west-gpu', name: 'West GPU', provider: 'West GPU "Ltd."' });
  await createMachine(db, { farmId: farm.id, regionKey: 'us-west', classId: 'rtx-4090-24gb', gpuCount: 4, pricePerGpuHourMicroUsd: 450_000 });
  await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'a100-40gb', gpuCount: 8, busyGpus: 8, pricePerGpuHourMicroUsd: 1_000_000 });
  await createMachine(db, { farmId: farm.id, regionKey: 'canada', classId: 'l4-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 300_000 });
  const offerIndex = createOfferIndex(db, { refreshMs: 60_000 });
  t.teardown(() => offerIndex.close());
  await offerIndex.start();
  let clock = new Date('2026-11-25T10:00:00.123Z');
  const app = Fastify();
  t.teardown(() => app.close());
  await app.register(capacityRoutes, { offerIndex, chainId: 4663, now: () => clock });
  const fresh = (params: Record<string, string> = {}) => {
    const page = offerIndex.listOffers(parseCapacityQuery(params));
    return JSON.stringify({ object: 'list', chainId: 4663, generatedAt: clock.toISOString(), data: page.data, nextCursor: page.nextCursor });
  };
  const body = async (url: string) => (await app.inject({ url })).body;

  const first = await body('/v1/capacity');
  t.equal(first, fresh(), 'the first answer');
  t.equal(await body('/v1/capacity'), first, 'the same millisecond: the same bytes');
  const paged = await body('/v1/capacity?limit=2');
  t.equal(paged, fresh({ limit: '2' }), 'another page in the same millisecond is its own');
  t.equal(await body('/v1/capacity'), first, 'and the first page again');
  t.equal(await body('/v1/capacity?region=North%20America'), fresh({ region: 'North America' }), 'a filtered page');

  await db.query('UPDATE machines SET price_per_gpu_hour_micro_usd = 350000 WHERE price_per_gpu_hour_micro_usd = 300000');
  await offerIndex.refresh();
  const reloaded = await body('/v1/capacity');
  t.not(reloaded, first, 'a new snapshot in the same millisecond answers anew');
  t.equal(reloaded, fresh(), 'with the new snapshot');

  clock = new Date(clock.getTime() + 1);
  t.equal(await body('/v1/capacity'), fresh(), 'the next millisecond: its own generatedAt');
  t.match(await body('/v1/capacity'), /"generatedAt":"2026-11-25T10:00:00\.124Z"/);
});
