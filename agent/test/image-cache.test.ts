import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import t from 'tap';
import { imageCacheReportSchema, MAX_REPORTED_IMAGES } from '@gpufarm/shared';
import { loadConfig } from '../src/config/config.js';
import type { CacheEntry } from '../src/image-cache/index-file.js';
import { cacheBytes, cacheReport, planRoom } from '../src/image-cache/plan.js';
import { hostPlatform, insecureRegistryHosts, registryImage, registryLocation } from '../src/image-cache/registry-size.js';
import { docker, localImages, uniqueName } from './helpers/docker.js';

const d = (n: number) => `sha256:${n.toString(16).padStart(64, '0')}`;
const entry = (id: number, lastUsedAt: string, layers: Array<[number, number]>): CacheEntry => ({
  id: d(1000 + id),
  references: [`127.0.0.1:5000/x/i${id}@${d(2000 + id)}`],
  source: 'job',
  repoDigests: [`127.0.0.1:5000/x/i${id}@${d(2000 + id)}`],
  repoTags: [],
  layers: layers.map(([l, bytes]) => ({ digest: d(l), sizeBytes: bytes })),
  unattributedBytes: 0,
  pulledAt: lastUsedAt,
  lastUsedAt,
});

t.test('default: shared layers count once', async (t) => {
  const a = entry(1, '2026-11-01T00:00:00.000Z', [[1, 100], [2, 50]]);
  const b = entry(2, '2026-11-02T00:00:00.000Z', [[1, 100], [3, 30]]);
  t.equal(cacheBytes([a, b]), 180);
  t.equal(cacheBytes([a], [{ digest: d(1), bytes: 100 }, { digest: d(9), bytes: 7 }]), 157, 'a pending layer the cache holds counts once');
  t.equal(cacheBytes([{ ...a, unattributedBytes: 5 }]), 155, 'bytes history could not place are counted whole');
});

t.test('behavior: room is made by evicting the least recently used images no job needs', async (t) => {
  const old = entry(1, '2026-11-01T00:00:00.000Z', [[10, 100]]);
  const mid = entry(2, '2026-11-02T00:00:00.000Z', [[20, 100]]);
  const recent = entry(3, '2026-11-03T00:00:00.000Z', [[30, 100]]);
  const base = { budgetBytes: 350, entries: [recent, old, mid], pending: [], incoming: [{ digest: d(40), bytes: 100 }], evict: true };
  const plan = planRoom({ ...base, kept: new Set() });
  t.ok(plan.fits);
  t.same(plan.fits && plan.evict.map((e) => e.id), [old.id], 'the oldest one goes, and only as many as needed');
  const running = planRoom({ ...base, kept: new Set([old.id]) });
  t.same(running.fits && running.evict.map((e) => e.id), [mid.id], 'an image a running job needs stays; the next oldest goes');
  const shared = planRoom({ ...base, entries: [entry(1, '2026-11-01T00:00:00.000Z', [[40, 100]]), mid, recent], kept: new Set() });
  t.same(shared.fits && shared.evict.map((e) => e.id), [], 'an image whose layers the incoming one shares frees nothing: the incoming one fits beside it');
  const noEvict = planRoom({ ...base, kept: new Set(), evict: false });
  t.notOk(noEvict.fits, 'the pre-pull list never evicts');
});

t.test('error: an image that cannot fit beside what jobs need is refused and nothing is evicted', async (t) => {
  const a = entry(1, '2026-11-01T00:00:00.000Z', [[10, 200]]);
  const b = entry(2, '2026-11-02T00:00:00.000Z', [[20, 100]]);
  const plan = planRoom({ budgetBytes: 350, entries: [a, b], kept: new Set([a.id]), pending: [{ digest: d(30), bytes: 60 }], incoming: [{ digest: d(40), bytes: 100 }], evict: true });
  t.same(plan, { fits: false, imageBytes: 100, keptBytes: 260, projectedBytes: 360 }, 'the running job\'s image and a pull under way leave 90 bytes: no plan');
  const huge = planRoom({ budgetBytes: 350, entries: [], kept: new Set(), pending: [], incoming: [{ digest: d(40), bytes: 400 }], evict: true });
  t.match(huge, { fits: false, imageBytes: 400 });
});

t.test('behavior: the report lists each layer once, most recently used first, bounded', async (t) => {
  const a = entry(1, '2026-11-01T00:00:00.000Z', [[1, 100], [2, 50]]);
  const b = entry(2, '2026-11-02T00:00:00.000Z', [[1, 100], [3, 30]]);
  const report = cacheReport([a, b], 1000);
  t.same(report, {
    budgetBytes: 1000,
    usedBytes: 180,
    images: [
      { id: b.id, repoDigests: b.repoDigests, repoTags: [], layers: [0, 1], lastUsedAt: b.lastUsedAt },
      { id: a.id, repoDigests: a.repoDigests, repoTags: [], layers: [0, 2], lastUsedAt: a.lastUsedAt },
    ],
    layers: [{ digest: d(1), sizeBytes: 100 }, { digest: d(3), sizeBytes: 30 }, { digest: d(2), sizeBytes: 50 }],
    omitted: 0,
  });
  t.ok(imageCacheReportSchema.safeParse(report).success, 'the protocol schema takes it');
  const many = Array.from({ length: MAX_REPORTED_IMAGES + 3 }, (_, i) => entry(i, `2026-11-01T00:00:${String(i % 60).padStart(2, '0')}.${String(i).padStart(3, '0')}Z`, [[i + 1, 10]]));
  const bounded = cacheReport(many, 1e6);
  t.equal(bounded.images.length, MAX_REPORTED_IMAGES);
  t.equal(bounded.omitted, 3);
  t.equal(bounded.usedBytes, 10 * many.length, 'used bytes count the omitted images too');
  t.ok(imageCacheReportSchema.safeParse(bounded).success);
});

t.test('args: registry locations and the registries Docker reaches over HTTP', async (t) => {
  t.same(registryLocation('127.0.0.1:5000/gpufarm/busybox'), { host: '127.0.0.1:5000', path: 'gpufarm/busybox' });
  t.same(registryLocation('busybox'), { host: 'registry-1.docker.io', path: 'library/busybox' });
  t.same(registryLocation('pytorch/pytorch'), { host: 'registry-1.docker.io', path: 'pytorch/pytorch' });
  t.same(registryLocation('docker.io/ubuntu'), { host: 'registry-1.docker.io', path: 'library/ubuntu' });
  t.same(registryLocation('ghcr.io/acme/x'), { host: 'ghcr.io', path: 'acme/x' });
  t.same(registryLocation('localhost/x'), { host: 'localhost', path: 'x' });
  const insecure = insecureRegistryHosts({ RegistryConfig: { InsecureRegistryCIDRs: ['127.0.0.0/8'], IndexConfigs: { 'docker.io': { Secure: true }, 'reg.lan:5000': { Secure: false } } } });
  t.equal(insecure('127.0.0.1:5000'), true);
  t.equal(insecure('reg.lan:5000'), true);
  t.equal(insecure('ghcr.io'), false);
  t.equal(insecure('10.0.0.1:5000'), false);
});

t.test('args: image_cache_bytes and prepull_images', async (t) => {
  const base = { GF_AGENT_STATE_DIR: '/tmp/x' };
  const unset = loadConfig({ env: base });
  t.equal(unset.imageCacheBytes, null, 'unset: derived from the disk at start');
  t.same(unset.prepullImages, []);
  const set = loadConfig({ env: { ...base, GF_AGENT_IMAGE_CACHE_BYTES: '5000000', GF_AGENT_PREPULL_IMAGES: `ghcr.io/acme/x:1, busybox@${d(7)}` } });
  t.equal(set.imageCacheBytes, 5_000_000);
  t.same(set.prepullImages, ['ghcr.io/acme/x:1', `busybox@${d(7)}`], 'comma-separated in a variable');
  t.throws(() => loadConfig({ env: { ...base, GF_AGENT_PREPULL_IMAGES: 'busybox@sha256:zz' } }), /GF_AGENT_PREPULL_IMAGES: must be image references/);
  t.throws(() => loadConfig({ env: { ...base, GF_AGENT_IMAGE_CACHE_BYTES: '-1' } }), /GF_AGENT_IMAGE_CACHE_BYTES: must be at least 0/);
});

t.test('behavior: the registry tells an image\'s layers and their bytes before any pull', async (t) => {
  const { busybox } = localImages();
  const image = await registryImage(busybox.reference, { insecure: insecureRegistryHosts(await docker.info()), platform: hostPlatform() });
  const local = await docker.getImage(busybox.reference).inspect();
  t.same(image.layers.map((l) => l.diffId), local.RootFS.Layers, 'the layers by uncompressed digest, as Docker lists them once pulled');
  const [layer] = image.layers;
  t.equal(layer!.estimated, false, 'read from the gzip trailer');
  t.ok(layer!.bytes >= local.Size && layer!.bytes < local.Size * 1.1, `the uncompressed tar (${layer!.bytes}) is the image's size on disk (${local.Size}) and its tar headers`);
  t.ok(layer!.compressedBytes < layer!.bytes, 'what a pull downloads is the compressed size');
  await t.rejects(registryImage(`${busybox.repository}@${d(5)}`, { insecure: () => true, platform: hostPlatform() }), 'a digest the registry lacks is an error for the caller');
});

t.test('behavior: a manifest list (OCI index) is read for this machine\'s platform', async (t) => {
  const { registry, busybox, canary } = localImages();
  const path = `gpufarm/${uniqueName('index')}`;
  const run = promisify(execFile);
  // busybox for amd64 and the canary for arm64 in one repository, under an index of both.
  const entries: Array<{ mediaType: string; digest: string; size: number; platform: { os: string; architecture: string } }> = [];
  for (const [image, architecture] of [[busybox, 'amd64'], [canary, 'arm64']] as const) {
    const name = `${registry}/${path}:${architecture}`;
    await run('docker', ['tag', image.reference, name]);
    await run('docker', ['push', name]);
    await run('docker', ['rmi', name]);
    const res = await fetch(`http://${registry}/v2/${path}/manifests/${architecture}`, { headers: { accept: 'application/vnd.docker.distribution.manifest.v2+json' } });
    const bytes = Buffer.from(await res.arrayBuffer());
    entries.push({ mediaType: res.headers.get('content-type')!, digest: res.headers.get('docker-content-digest')!, size: bytes.length, platform: { os: 'linux', architecture } });
  }
  const put = await fetch(`http://${registry}/v2/${path}/manifests/multi`, {
    method: 'PUT',
    headers: { 'content-type': 'application/vnd.oci.image.index.v1+json' },
    body: JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.index.v1+json', manifests: [...entries, { ...entries[0]!, platform: { os: 'unknown', architecture: 'unknown' } }] }),
  });
  t.equal(put.status, 201, await put.text());
  t.teardown(async () => {
    for (const digest of [put.headers.get('docker-content-digest'), ...entries.map((e) => e.digest)]) {
      await fetch(`http://${registry}/v2/${path}/manifests/${digest}`, { method: 'DELETE' }).catch(() => undefined);
    }
  });
  const lookup = (architecture: string) => registryImage(`${registry}/${path}:multi`, { insecure: () => true, platform: { os: 'linux', architecture } });
  t.same((await lookup('amd64')).layers.map((l) => l.diffId), (await docker.getImage(busybox.reference).inspect()).RootFS.Layers, 'amd64: busybox');
  t.same((await lookup('arm64')).layers.map((l) => l.diffId), (await docker.getImage(canary.reference).inspect()).RootFS.Layers, 'arm64: the canary');
  await t.rejects(lookup('s390x'), /has no image for linux\/s390x/);
});
