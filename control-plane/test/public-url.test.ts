import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { artifactMetadataSchema, jobCreatedSchema, jobSchema } from '@gpufarm/shared';
import t, { type Test } from 'tap';
import { loadConfig } from '../src/config.js';
import { createFarm, createMachine } from '../src/testing/factories.js';
import { startControlPlane } from '../src/server.js';
import { bearer, createTestKey } from './helpers/app.js';
import { createPostgresTestDatabase } from './helpers/database.js';

/** A real control plane on a port the kernel picks (`PORT=0`), on a fresh database with one priced machine. */
async function start(t: Test, env: Record<string, string> = {}) {
  const { db, url: databaseUrl } = await createPostgresTestDatabase(t);
  const farm = await createFarm(db, { slug: 'port-zero' });
  await createMachine(db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 });
  const { key } = await createTestKey(db);
  const dataDir = mkdtempSync(join(tmpdir(), 'gf-public-url-'));
  t.teardown(() => rmSync(dataDir, { recursive: true, force: true }));
  const cp = await startControlPlane(loadConfig({ PORT: '0', DATABASE_URL: databaseUrl!, GF_DATA_DIR: dataDir, ...env }), { logger: false });
  t.teardown(() => cp.close());
  return { cp, headers: bearer(key) };
}

t.test('behavior: with PORT=0 and no GF_PUBLIC_URL, every link carries the port the server bound', async (t) => {
  const { cp, headers } = await start(t);
  const port = new URL(cp.url).port;
  t.not(port, '0', 'listening on a real port');
  const base = `http://127.0.0.1:${port}`;

  const index = (await (await fetch(`${cp.url}/v1`)).json()) as { links: Record<string, string> };
  t.equal(index.links.self, `${base}/v1`);
  t.equal(index.links.docs, `${base}/docs`);

  const res = await fetch(`${cp.url}/v1/jobs`, {
    method: 'POST',
    headers: { ...headers, 'content-type': 'application/json' },
    body: JSON.stringify({ image: 'ghcr.io/acme/trainer:1.2', gpu: { count: 1 }, maxRuntimeSeconds: 600 }),
  });
  t.equal(res.status, 201);
  const { job } = jobCreatedSchema.parse(await res.json());
  t.same(job.links, { dashboard: `${base}/dashboard/jobs/${job.id}`, logs: `${base}/v1/jobs/${job.id}/logs`, funding: `${base}/v1/jobs/${job.id}/funding` });
  t.same(jobSchema.parse(await (await fetch(`${cp.url}/v1/jobs/${job.id}`, { headers })).json()).links, job.links, 'GET /v1/jobs/:id too');

  const bytes = Buffer.from('input bytes\n'.repeat(100));
  const uploaded = await fetch(`${cp.url}/v1/artifacts?filename=input.txt`, { method: 'POST', headers: { ...headers, 'content-type': 'application/octet-stream' }, body: bytes });
  t.equal(uploaded.status, 201);
  const { id } = (await uploaded.json()) as { id: string };
  const meta = artifactMetadataSchema.parse(await (await fetch(`${cp.url}/v1/artifacts/${id}?format=json`, { headers })).json());
  t.ok(meta.url.startsWith(`${base}/files/${id}?`), 'the signed URL names the bound port');
  const download = await fetch(meta.url);
  t.equal(download.status, 200, 'the signed URL works');
  t.same(Buffer.from(await download.arrayBuffer()), bytes);
  const redirect = await fetch(`${cp.url}/v1/artifacts/${id}`, { headers, redirect: 'manual' });
  t.equal(redirect.status, 302);
  t.ok(redirect.headers.get('location')?.startsWith(`${base}/files/${id}?`), 'the 302 too');
});

t.test('behavior: GF_PUBLIC_URL is used as configured, whatever port the server bound', async (t) => {
  const { cp } = await start(t, { GF_PUBLIC_URL: 'https://api.gpufarm.example' });
  const index = (await (await fetch(`${cp.url}/v1`)).json()) as { links: Record<string, string> };
  t.equal(index.links.self, 'https://api.gpufarm.example/v1');
});
