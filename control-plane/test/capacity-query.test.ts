import t from 'tap';
import { decodeCapacityCursor, encodeCapacityCursor, parseCapacityQuery } from '../src/capacity/query.js';
import { versionRank } from '../src/capacity/versions.js';

t.test('default: price_asc, 200, all', async (t) => {
  t.same(parseCapacityQuery({}), { availability: 'all', sort: 'price_asc', limit: 200 });
  t.same(parseCapacityQuery(undefined), { availability: 'all', sort: 'price_asc', limit: 200 });
});

t.test('args: exact decimals, no floats', async (t) => {
  t.equal(parseCapacityQuery({ minVram: '24' }).minVramBytes, 24 * 2 ** 30, 'GB as the catalog counts them (GiB)');
  t.equal(parseCapacityQuery({ minVram: '0.000000001' }).minVramBytes, 2, 'ceil(2^30 / 10^9)');
  t.equal(parseCapacityQuery({ minVram: '0.0000000001' }).minVramBytes, 1, 'a fraction of a byte rounds up');
  t.equal(parseCapacityQuery({ minVram: '40.1' }).minVramBytes, 43_057_047_143, 'ceil(40.1 * 2^30), exactly');
  t.equal(parseCapacityQuery({ maxPrice: '2.675' }).maxPriceMicroUsd, 2_675_000);
  t.equal(parseCapacityQuery({ maxPrice: '0.1' }).maxPriceMicroUsd, 100_000);
  t.equal(parseCapacityQuery({ minUptime: '99.5' }).minUptimeCentiPct, 9950);
  t.equal(parseCapacityQuery({ minUptime: '99.501' }).minUptimeCentiPct, 9951, 'rounded up: 99.50 does not reach 99.501');
  t.equal(parseCapacityQuery({ minUptime: '100' }).minUptimeCentiPct, 10_000);
  t.same(parseCapacityQuery({ region: 'Asia Pacific' }).regionKeys, ['asia-east', 'asia-southeast', 'oceania']);
  t.same(parseCapacityQuery({ region: 'canada' }).regionKeys, ['canada']);
  t.equal(parseCapacityQuery({ cuda: '12.4' }).minCudaRank, versionRank('12.4'));
  t.equal(parseCapacityQuery({ proven: 'true' }).provenOnly, true);
  t.same(parseCapacityQuery({ proven: 'false' }), { availability: 'all', sort: 'price_asc', limit: 200 }, 'proven=false is no filter');
});

t.test('versionRank compares like versions', async (t) => {
  const ordered = ['11.8', '12', '12.0.1', '12.2', '12.4', '12.4.1', '12.10', '13.0'];
  for (let i = 1; i < ordered.length; i++) t.ok(versionRank(ordered[i - 1]!) < versionRank(ordered[i]!), `${ordered[i - 1]} < ${ordered[i]}`);
  t.ok(versionRank('535.104.05') < versionRank('550.54.15'));
  t.equal(versionRank(null), 0, 'unknown is lowest');
  t.equal(versionRank('n/a'), 0);
  t.equal(versionRank('12.4'), versionRank('12.4.0'));
});

t.test('cursor: base64url, round trip, bound to its sort', async (t) => {
  const cursor = encodeCapacityCursor({ sort: 'vram', key: 85899345920, id: 'off_0123456789abcdef' });
  t.match(cursor, /^[A-Za-z0-9_-]+$/);
  t.same(decodeCapacityCursor(cursor, 'vram'), { sort: 'vram', key: 85899345920, id: 'off_0123456789abcdef' });
  t.throws(() => decodeCapacityCursor(cursor, 'count'), { code: 'invalid_request', details: [{ field: 'cursor' }] });
  t.throws(() => decodeCapacityCursor('bm90IGpzb24', 'vram'), { code: 'invalid_request', details: [{ field: 'cursor' }] });
  const forged = Buffer.from(JSON.stringify({ s: 'vram', k: -1, i: 'off_0123456789abcdef' })).toString('base64url');
  t.throws(() => decodeCapacityCursor(forged, 'vram'), { code: 'invalid_request' }, 'a negative key is not ours');
});
