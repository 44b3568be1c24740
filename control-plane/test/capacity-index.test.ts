import { capacityOfferSchema, type CapacityOffer } from '@gpufarm/shared';
import { createConnection, createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import t from 'tap';
import { createOfferIndex, type OfferIndex } from '../src/capacity/offer-index.js';
import { CAPACITY_SORTS, parseCapacityQuery } from '../src/capacity/query.js';
import { offerIdFor } from '../src/capacity/snapshot.js';
import type { Database } from '../src/db/database.js';
import { openPostgres } from '../src/db/postgres.js';
import { toApiError } from '../src/http/error-handler.js';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { BACKENDS } from './helpers/database.js';
import { captureLog, LEVEL } from './helpers/logger.js';

const GiB = 1024 ** 3;

/**
 * A small fleet where every filter excludes something specific and every sort differs from
 * the insertion order. Offers (farm/class/region):
 *   o4090  alpha  rtx-4090  us-east         machines m1 (2 GPUs, $0.40, A, 12.4, 99.5 %, proven 2026-03-02) and
 *                                           m2 (4 GPUs all busy, $0.50, B, 12.2, 97 %, 120 s, proven 2026-03-01)
 *   oH100  alpha  h100-sxm  europe-west     m3 (8 GPUs, 2 busy, $2.50, S, 12.8, 100 %, inference+fine_tuning, simulated,
 *                                           a proven_at it cannot have: simulated machines are never proven)
 *   oA100  beta   a100-80gb europe-central  m4 (8 GPUs, $1.40, A, 12.6, 92 %, batch+inference, proven 2026-03-03)
 *   o3080  beta   rtx-3080  us-west         m5 (1 GPU, $0.10, no tier, no CUDA, 88 %, not proven)
 * Not offered: an unpriced L4, an offline L40S, a machine of a suspended farm.
 */
async function buildFleet(db: Database) {
  const alpha = await createFarm(db, { slug: 'alpha-gpu', name: 'Alpha GPU', provider: 'Alpha GPU LLC' });
  const beta = await createFarm(db, { slug: 'beta-cloud', name: 'Beta Cloud', provider: 'Beta Cloud GmbH' });
  const gamma = await createFarm(db, { slug: 'gamma-suspended', status: 'suspended' });
  await createMachine(db, { farmId: alpha.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 2, pricePerGpuHourMicroUsd: 400_000, benchmarkTier: 'A', cudaVersion: '12.4', driverVersion: '550.54.15', uptimePct: 99.5, provenAt: new Date('2026-03-02T10:00:00.250Z') });
  await createMachine(db, { farmId: alpha.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 4, busyGpus: 4, pricePerGpuHourMicroUsd: 500_000, benchmarkTier: 'B', cudaVersion: '12.2', driverVersion: '535.104.05', uptimePct: 97, minBillingSeconds: 120, provenAt: new Date('2026-03-01T09:30:00.125Z') });
  await createMachine(db, { farmId: alpha.id, regionKey: 'europe-west', classId: 'h100-80gb-sxm', gpuCount: 8, busyGpus: 2, pricePerGpuHourMicroUsd: 2_500_000, benchmarkTier: 'S', cudaVersion: '12.8', driverVersion: '570.86.10', uptimePct: 100, workloads: ['inference', 'fine_tuning'], simulated: true, provenAt: new Date('2026-02-01T00:00:00Z') });
  await createMachine(db, { farmId: beta.id, regionKey: 'europe-central', classId: 'a100-80gb', gpuCount: 8, pricePerGpuHourMicroUsd: 1_400_000, benchmarkTier: 'A', cudaVersion: '12.6', driverVersion: '560.35.03', uptimePct: 92, workloads: ['inference', 'batch'], provenAt: new Date('2026-03-03T12:00:00Z') });
  await createMachine(db, { farmId: beta.id, regionKey: 'us-west', classId: 'rtx-3080-10gb', gpuCount: 1, pricePerGpuHourMicroUsd: 100_000, benchmarkTier: null, cudaVersion: null, driverVersion: null, uptimePct: 88 });
  await createMachine(db, { farmId: beta.id, regionKey: 'us-west', classId: 'l4-24gb', gpuCount: 2, pricePerGpuHourMicroUsd: null });
  await createMachine(db, { farmId: beta.id, regionKey: 'asia-east', classId: 'l40s-48gb', gpuCount: 4, pricePerGpuHourMicroUsd: 900_000, status: 'offline' });
  await createMachine(db, { farmId: gamma.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 300_000 });
  return {
    o4090: offerIdFor(alpha.id, 'rtx-4090-24gb', 'us-east'),
    oH100: offerIdFor(alpha.id, 'h100-80gb-sxm', 'europe-west'),
    oA100: offerIdFor(beta.id, 'a100-80gb', 'europe-central'),
    o3080: offerIdFor(beta.id, 'rtx-3080-10gb', 'us-west'),
  };
}

function list(index: OfferIndex, params: Record<string, string> = {}): CapacityOffer[] {
  return index.listOffers(parseCapacityQuery(params)).data;
}
const ids = (offers: readonly CapacityOffer[]) => offers.map((o) => o.id);
const byIdOrder = (...offerIds: string[]) => [...offerIds].sort();

for (const [backend, createDatabase] of BACKENDS) {
  t.test(`offer index on ${backend}`, async (t) => {
    const { db } = await createDatabase(t);
    const fleet = await buildFleet(db);
    const { o4090, oH100, oA100, o3080 } = fleet;
    const index = createOfferIndex(db, { refreshMs: 60_000, allowSimulated: true });
    t.teardown(() => index.close());
    await index.start();
    t.equal(index.version, 1);

    t.test('default: one offer per farm, class and region, cheapest first', async (t) => {
      const page = index.listOffers();
      t.same(ids(page.data), [o3080, o4090, oA100, oH100]);
      t.equal(page.nextCursor, null);
      for (const offer of page.data) capacityOfferSchema.parse(offer);
      const json = index.listOffersJson();
      t.same(JSON.parse(json.dataJson.toString('utf8')), page.data, 'the JSON text says what the objects say');
    });

    t.test('behavior: machines fold into one offer', async (t) => {
      const offer = list(index).find((o) => o.id === o4090)!;
      t.same(offer, {
        id: o4090,
        kind: 'farm',
        farm: { slug: 'alpha-gpu', name: 'Alpha GPU' },
        provider: 'Alpha GPU LLC',
        gpu: { classId: 'rtx-4090-24gb', label: 'RTX 4090 24GB', model: 'NVIDIA GeForce RTX 4090', vendor: 'nvidia', family: 'consumer', vramBytes: 24 * GiB, cudaVersion: '12.2', driverVersion: '535.104.05' },
        count: 6,
        available: 2,
        busy: 4,
        maxAvailablePerMachine: 2,
        maxPerMachine: 4,
        machines: 2,
        combinedVramBytes: 6 * 24 * GiB,
        benchmarkTier: 'B',
        uptimePct: 97,
        region: { key: 'us-east', label: 'US East', group: 'North America' },
        price: { perGpuHourMicroUsd: 400_000, maxPerGpuHourMicroUsd: 500_000, minBillingSeconds: 120 },
        queue: 0,
        status: 'AVAILABLE',
        workloads: null,
        simulated: false,
        proof: { proven: true, provenAt: '2026-03-01T09:30:00.125Z' },
      });
      const h100 = list(index).find((o) => o.id === oH100)!;
      t.same(h100.workloads, ['fine_tuning', 'inference'], 'sorted union of workloads');
      t.equal(h100.simulated, true);
      t.equal(h100.uptimePct, 100);
      t.same(h100.proof, { proven: false, provenAt: null }, 'a simulated machine is never proven');
      t.same(list(index).find((o) => o.id === oA100)!.proof, { proven: true, provenAt: '2026-03-03T12:00:00.000Z' });
      const a3080 = list(index).find((o) => o.id === o3080)!;
      t.equal(a3080.benchmarkTier, 'C', 'a machine without a tier counts as C');
      t.equal(a3080.gpu.cudaVersion, null);
      t.same(a3080.proof, { proven: false, provenAt: null });
      t.notMatch(JSON.stringify(list(index)), /mach_|farm_/, 'no machine or farm ids');
    });

    t.test('filters', async (t) => {
      const cases: Array<[Record<string, string>, string[], Record<string, number>?]> = [
        [{ model: 'h100-80gb-sxm' }, [oH100]],
        [{ minVram: '40' }, [oA100, oH100]],
        [{ minVram: '24' }, [o4090, oA100, oH100]],
        [{ minVram: '24.01' }, [oA100, oH100]],
        [{ maxPrice: '0.4' }, [o3080, o4090], { [o4090]: 2 }],
        [{ maxPrice: '0.399999' }, [o3080]],
        [{ farm: 'beta-cloud' }, [o3080, oA100]],
        [{ farm: 'no-such-farm' }, []],
        [{ farm: 'gamma-suspended' }, []],
        [{ region: 'europe-west' }, [oH100]],
        [{ region: 'Europe' }, [oA100, oH100]],
        [{ region: 'north america' }, [o3080, o4090]],
        [{ minUptime: '98' }, [o4090, oH100], { [o4090]: 2 }],
        [{ minUptime: '99.5' }, [o4090, oH100], { [o4090]: 2 }],
        [{ minUptime: '99.51' }, [oH100]],
        [{ workload: 'fine_tuning' }, [o3080, o4090, oH100]],
        [{ workload: 'batch' }, [o3080, o4090, oA100]],
        [{ cuda: '12.5' }, [oA100, oH100]],
        [{ cuda: '12.2' }, [o4090, oA100, oH100], { [o4090]: 6 }],
        [{ availability: 'available' }, [o3080, o4090, oA100, oH100], { [o4090]: 2 }],
        [{ availability: 'all' }, [o3080, o4090, oA100, oH100], { [o4090]: 6 }],
        [{ tier: 'A' }, [o4090, oA100, oH100], { [o4090]: 2 }],
        [{ tier: 'S' }, [oH100]],
        [{ tier: 'C' }, [o3080, o4090, oA100, oH100]],
        [{ region: 'Europe', tier: 'S', workload: 'inference' }, [oH100]],
        [{ proven: 'true' }, [o4090, oA100], { [o4090]: 6 }],
        [{ proven: 'false' }, [o3080, o4090, oA100, oH100]],
        [{ proven: 'true', maxPrice: '0.45' }, [o4090], { [o4090]: 2 }],
        [{ proven: 'true', region: 'Europe' }, [oA100]],
      ];
      for (const [params, expected, counts] of cases) {
        const offers = list(index, params);
        t.same(ids(offers), expected, `${new URLSearchParams(params).toString()}`);
        for (const [id, count] of Object.entries(counts ?? {})) {
          t.equal(offers.find((o) => o.id === id)?.count, count, `${new URLSearchParams(params).toString()}: ${count} GPUs in the offer`);
        }
      }
    });

    t.test('sorts, each with a total order', async (t) => {
      const expected: Record<string, string[]> = {
        price_asc: [o3080, o4090, oA100, oH100],
        price_desc: [oH100, oA100, o4090, o3080],
        available: [oA100, oH100, o4090, o3080],
        vram: [...byIdOrder(oA100, oH100), o4090, o3080],
        uptime: [oH100, o4090, oA100, o3080],
        count: [...byIdOrder(oA100, oH100), o4090, o3080],
      };
      for (const sort of CAPACITY_SORTS) t.same(ids(list(index, { sort })), expected[sort], `sort=${sort}`);
    });

    t.test('limit and cursor', async (t) => {
      const first = index.listOffers(parseCapacityQuery({ limit: '3' }));
      t.same(ids(first.data), [o3080, o4090, oA100]);
      t.type(first.nextCursor, 'string');
      const second = index.listOffers(parseCapacityQuery({ limit: '3', cursor: first.nextCursor! }));
      t.same(ids(second.data), [oH100]);
      t.equal(second.nextCursor, null);
      const filtered = index.listOffers(parseCapacityQuery({ region: 'Europe', sort: 'count', limit: '1' }));
      t.same(ids(filtered.data), byIdOrder(oA100, oH100).slice(0, 1));
      const rest = index.listOffers(parseCapacityQuery({ region: 'Europe', sort: 'count', limit: '1', cursor: filtered.nextCursor! }));
      t.same(ids(rest.data), byIdOrder(oA100, oH100).slice(1), 'a tie continues by id');
      t.throws(() => parseCapacityQuery({ sort: 'vram', cursor: first.nextCursor! }), { code: 'invalid_request' }, 'cursor from another sort');
    });

    t.test('behavior: queue comes from queuedByClass', async (t) => {
      const queued = createOfferIndex(db, { refreshMs: 60_000, allowSimulated: true, queuedByClass: () => new Map([['h100-80gb-sxm', 3]]) });
      t.teardown(() => queued.close());
      await queued.refresh();
      t.equal(queued.listOffers().data.find((o) => o.id === oH100)?.queue, 3);
      t.equal(queued.listOffers().data.find((o) => o.id === oA100)?.queue, 0);
      t.match(queued.listOffersJson().dataJson.toString('utf8'), /"queue":3/);
    });

    t.test('supply for pricing: online, busy, available and priced GPUs per class', async (t) => {
      const supply = index.supply();
      const of = (classId: string) => supply.classes.find((c) => c.gpuClass.classId === classId)!;
      t.match(of('rtx-4090-24gb'), { gpusOnline: 6, gpusBusy: 4, gpusAvailable: 2, gpusPriced: 6 });
      t.same([...of('rtx-4090-24gb').prices], [400_000, 500_000]);
      t.same([...of('rtx-4090-24gb').priceGpus], [2, 4]);
      t.match(of('l4-24gb'), { gpusOnline: 2, gpusBusy: 0, gpusAvailable: 0, gpusPriced: 0 }, 'unpriced GPUs are online, not available');
      t.match(of('l40s-48gb'), { gpusOnline: 0 }, 'offline machines are not online');
      t.same(supply.minBillingSeconds, { min: 60, max: 120 });
    });

    t.test('behavior: reloads after a fleet change without refresh()', async (t) => {
      const before = index.version;
      const farm = await createFarm(db, { slug: 'delta-notify' });
      await createMachine(db, { farmId: farm.id, regionKey: 'oceania', classId: 'l4-24gb', gpuCount: 1, busyGpus: 1, pricePerGpuHourMicroUsd: 350_000, uptimePct: 95 });
      const deadline = Date.now() + 10_000;
      while (Date.now() < deadline && !list(index, { farm: 'delta-notify' }).length) await new Promise((r) => setTimeout(r, 50));
      const [offer] = list(index, { farm: 'delta-notify' });
      t.ok(offer, 'the new machine is offered');
      t.equal(offer?.uptimePct, 95, 'with its uptime');
      t.equal(offer?.status, 'BUSY', 'every GPU busy: BUSY');
      t.equal(offer?.available, 0);
      t.same(list(index, { farm: 'delta-notify', availability: 'available' }), [], 'not listed as available');
      t.ok(index.version > before);
    });

    t.test('behavior: a machine that proves its GPUs is reloaded as proven without refresh()', async (t) => {
      const proofOf3080 = () => list(index, { farm: 'beta-cloud', model: 'rtx-3080-10gb' })[0]?.proof;
      t.same(proofOf3080(), { proven: false, provenAt: null });
      await db.query(
        `UPDATE machines SET proven_at = '2026-03-04T08:00:00Z' WHERE id IN
           (SELECT m.id FROM machines m JOIN farms f ON f.id = m.farm_id WHERE f.slug = 'beta-cloud' AND m.price_per_gpu_hour_micro_usd = 100000)`,
      );
      const deadline = Date.now() + 10_000;
      while (Date.now() < deadline && !proofOf3080()?.proven) await new Promise((r) => setTimeout(r, 50));
      t.same(proofOf3080(), { proven: true, provenAt: '2026-03-04T08:00:00.000Z' }, 'proven_at is one of the columns whose change reloads the index');
    });

    // Last: it changes the fixture's uptimes.
    t.test('behavior: the periodic reload refreshes uptimes (no notification for them)', async (t) => {
      const periodic = createOfferIndex(db, { refreshMs: 150, allowSimulated: true });
      t.teardown(() => periodic.close());
      await periodic.start();
      const uptimeOf3080 = () => periodic.listOffers(parseCapacityQuery({ farm: 'beta-cloud', model: 'rtx-3080-10gb' })).data[0]?.uptimePct;
      t.equal(uptimeOf3080(), 88);
      await db.query(
        `UPDATE machine_uptime_days SET seconds_up = 86400 WHERE machine_id IN
           (SELECT m.id FROM machines m JOIN farms f ON f.id = m.farm_id WHERE f.slug = 'beta-cloud' AND m.price_per_gpu_hour_micro_usd = 100000)`,
      );
      const deadline = Date.now() + 10_000;
      while (Date.now() < deadline && uptimeOf3080() !== 100) await new Promise((r) => setTimeout(r, 50));
      t.equal(uptimeOf3080(), 100, 'every day up: 100 %, capped');
    });
  });
}

t.test('cursor walk over 150 offers gives each offer once, for every sort', async (t) => {
  const [, createDatabase] = BACKENDS[0];
  const { db } = await createDatabase(t);
  const classes = ['rtx-4090-24gb', 'h100-80gb-sxm', 'a100-40gb', 'l4-24gb', 'rtx-3080-10gb'];
  const regions = ['us-east', 'us-west', 'us-central', 'canada', 'europe-west', 'europe-central', 'europe-north', 'asia-east', 'oceania', 'south-america'];
  let n = 0;
  for (const slug of ['walk-one', 'walk-two', 'walk-three']) {
    const farm = await createFarm(db, { slug });
    for (const classId of classes) {
      for (const regionKey of regions) {
        n++;
        // Few distinct values, so every sort has long runs of ties across page boundaries.
        await createMachine(db, {
          farmId: farm.id,
          regionKey,
          classId,
          gpuCount: (n % 3) + 1,
          busyGpus: n % 2,
          pricePerGpuHourMicroUsd: ((n % 4) + 1) * 100_000,
          uptimePct: n % 5 === 0 ? 90 : 100,
        });
      }
    }
  }
  const index = createOfferIndex(db, { refreshMs: 60_000, allowSimulated: true });
  t.teardown(() => index.close());
  await index.start();
  for (const sort of CAPACITY_SORTS) {
    // Unfiltered (cached lists), a filter on whole offers (picked), a filter on machines (scanned).
    for (const filter of [{}, { minVram: '1' }, { minUptime: '50' }] as Record<string, string>[]) {
      const seen: string[] = [];
      let cursor: string | null = null;
      let pages = 0;
      do {
        const params: Record<string, string> = { ...filter, sort, limit: '7', ...(cursor ? { cursor } : {}) };
        const page = index.listOffers(parseCapacityQuery(params));
        t.ok(page.data.length <= 7);
        seen.push(...ids(page.data));
        cursor = page.nextCursor;
        pages++;
      } while (cursor && pages < 100);
      const label = `sort=${sort} ${new URLSearchParams(filter).toString()}`;
      t.equal(seen.length, 150, `${label}: 150 offers`);
      t.equal(new Set(seen).size, 150, `${label}: none twice`);
      t.same(seen, ids(index.listOffers(parseCapacityQuery({ ...filter, sort, limit: '500' })).data), `${label}: same order as one page`);
      t.equal(pages, Math.ceil(150 / 7));
    }
  }
});

t.test('behavior: the unfiltered page is serialized once per snapshot and queue figures, byte for byte what a fresh serialization gives', async (t) => {
  const [, createDatabase] = BACKENDS[0];
  const { db } = await createDatabase(t);
  const { oH100 } = await buildFleet(db);
  let queue: ReadonlyMap<string, number> = new Map([['h100-80gb-sxm', 2]]);
  const index = createOfferIndex(db, { refreshMs: 60_000, allowSimulated: true, queuedByClass: () => queue });
  t.teardown(() => index.close());
  await index.start();
  const fresh = () => Buffer.from(JSON.stringify(index.listOffers().data));

  const first = index.listOffersJson();
  const again = index.listOffersJson();
  t.equal(again.dataJson, first.dataJson, 'the second request gets the serialized page of the first');
  t.ok(again.dataJson.equals(fresh()), 'the cached page is byte-identical to a fresh serialization');
  const second = parseCapacityQuery({ limit: '2' });
  t.equal(index.listOffersJson(second).dataJson, index.listOffersJson(second).dataJson, 'each page of the listing is kept');
  t.not(index.listOffersJson(second).dataJson, first.dataJson);

  queue = new Map([['h100-80gb-sxm', 2]]);
  t.equal(index.listOffersJson().dataJson, first.dataJson, 'queue figures recounted to the same counts keep the page');

  queue = new Map([['h100-80gb-sxm', 5]]);
  const requeued = index.listOffersJson();
  t.not(requeued.dataJson, first.dataJson, 'new queue figures serialize again');
  t.ok(requeued.dataJson.equals(fresh()), 'with the new figure');
  t.equal(index.listOffers().data.find((o) => o.id === oH100)?.queue, 5);

  const version = index.version;
  await db.query(`UPDATE machines SET price_per_gpu_hour_micro_usd = 2600000 WHERE price_per_gpu_hour_micro_usd = 2500000`);
  await index.refresh();
  t.ok(index.version > version);
  const reloaded = index.listOffersJson();
  t.notOk(reloaded.dataJson.equals(requeued.dataJson), 'a new snapshot serializes again');
  t.ok(reloaded.dataJson.equals(fresh()), 'byte-identical to a fresh serialization of the new snapshot');
  t.match(reloaded.dataJson.toString('utf8'), /"perGpuHourMicroUsd":2600000/);
});

/**
 * A TCP port in front of the test's PostgreSQL server that can fail as a stopped server does:
 * `down()` stops listening and resets every connection made through it, so new connections
 * are refused; `up()` listens on the same port again.
 */
class PostgresGate {
  private server: Server | null = null;
  private readonly sockets = new Set<Socket>();
  private port = 0;

  private constructor(private readonly target: URL) {}

  /** Listens on a free port of 127.0.0.1, forwarding to the server of `databaseUrl`. */
  static async start(databaseUrl: string): Promise<PostgresGate> {
    const gate = new PostgresGate(new URL(databaseUrl));
    await gate.up();
    return gate;
  }

  /** `databaseUrl` with the gate's port in place of the server's. */
  get url(): string {
    const url = new URL(this.target);
    url.hostname = '127.0.0.1';
    url.port = String(this.port);
    return url.toString();
  }

  async up(): Promise<void> {
    const server = createServer((client) => {
      const upstream = createConnection({ host: this.target.hostname, port: Number(this.target.port || 5432) });
      for (const socket of [client, upstream]) {
        this.sockets.add(socket);
        socket.on('close', () => this.sockets.delete(socket)).on('error', () => {
          client.destroy();
          upstream.destroy();
        });
      }
      client.pipe(upstream).pipe(client);
    });
    await new Promise<void>((resolve) => server.listen(this.port, '127.0.0.1', resolve));
    this.port = (server.address() as AddressInfo).port;
    this.server = server;
  }

  async down(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return;
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const socket of this.sockets) socket.resetAndDestroy();
    await closed;
    // The clients' ends of the reset connections see it on their next read.
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

t.test('error: unavailable before the first load, then served once the database answers', async (t) => {
  const [, createDatabase] = BACKENDS[0];
  const { db, url } = await createDatabase(t);
  await buildFleet(db);
  const gate = await PostgresGate.start(url!);
  await gate.down();
  const { log, lines } = captureLog();
  const warnings = () => lines.filter((l) => l.level >= LEVEL.warn);
  const flaky = openPostgres(gate.url);
  const index = createOfferIndex(flaky, { refreshMs: 60_000, allowSimulated: true, log });
  t.teardown(async () => {
    await index.close();
    await flaky.close();
    await gate.down();
  });
  await index.start();
  t.equal(index.version, 0);
  const err = toApiError(t.throws(() => index.listOffers()));
  t.equal(err.code, 'unavailable');
  t.equal(err.status, 503);
  t.throws(() => index.supply(), { code: 'unavailable' });
  t.match(
    warnings(),
    [
      { loop: 'offer index', channel: 'fleet_changed', err: { type: 'DatabaseUnavailableError', message: /ECONNREFUSED/ }, msg: /cannot listen on fleet_changed/ },
      { loop: 'offer index', failures: 1, err: { type: 'DatabaseUnavailableError', message: /ECONNREFUSED/ }, msg: /first load failed; capacity answers 503/ },
    ],
    'one warning for the listener, one for the load, each with its loop and error',
  );
  t.equal(warnings().length, 2);

  await gate.up();
  await index.refresh();
  t.equal(index.listOffers().data.length, 4);

  await gate.down();
  // down() waits 50 ms for this process to read the resets; on a loaded machine a pooled
  // connection can still look alive, and the reload on it fails with ECONNRESET and drops it.
  // Once none is left, connecting is refused, and that is the cause the reload reports.
  const reloadErrors: unknown[] = [];
  do {
    const err = await index.refresh().then(() => null, (e: unknown) => e);
    t.ok(err, 'a reload while the database is down rejects');
    reloadErrors.push(err);
  } while (reloadErrors.length < 5 && (reloadErrors.at(-1) as { code?: unknown } | null)?.code === 'ECONNRESET');
  t.match(reloadErrors.at(-1), { cause: { code: 'ECONNREFUSED' } }, 'the reload names the refused connection as its cause');
  await t.rejects(index.refresh());
  t.equal(index.listOffers().data.length, 4, 'a failed reload keeps the last snapshot');
  t.match(lines.find((l) => /recovered/.test(l.msg)), { level: LEVEL.warn, loop: 'offer index', failures: 1 }, 'the recovery is logged');
  const failures = warnings().filter((w) => /reload failed; serving the snapshot of/.test(w.msg));
  t.equal(failures.length, 1, 'reported once, not per retry');
  t.notMatch(JSON.stringify(lines), /gpufarm:gpufarm|password/, 'no credentials in the lines');
});
