import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tar from 'tar-stream';
import { hashAgentToken, newAgentToken } from '../../src/auth/machine-tokens.js';
import type { BlobStore } from '../../src/artifacts/blob-store.js';
import { createFsBlobStore } from '../../src/artifacts/fs-blob-store.js';
import { artifactRoutes, type ArtifactRoutesOptions } from '../../src/artifacts/routes.js';
import { createUrlSigner, type UrlSigner } from '../../src/artifacts/signing.js';
import { createFarm, createMachine } from '../../src/testing/factories.js';
import { deploymentSecret } from '../../src/settings/store.js';
import { bearer, buildTestApp, createTestKey, type TestApp } from './app.js';

interface TestContext {
  teardown(fn: () => unknown): void;
}

/** The largest customer input upload in these fixtures (`GF_MAX_INPUT_BYTES`). */
export const MAX_INPUT_BYTES = 1024 * 1024;

export interface ArtifactSetup extends TestApp {
  /** The artifact folder of the filesystem store; `<dir>/tmp` holds uploads in progress. */
  dir: string;
  /** The store the routes use: the filesystem one in `dir`, or the bucket when `env` has `GF_ARTIFACT_STORE=s3`. */
  blobs: BlobStore;
  signer: UrlSigner;
  key: string;
  accountId: string;
}

/**
 * The real app on a fresh database and a temp artifact folder (or the S3 store `env` names),
 * with the artifact routes registered as `server.ts` wires them (unless the app already has them).
 */
export async function artifactSetup(t: TestContext, env: Record<string, string> = {}, app: { now?: () => number } = {}): Promise<ArtifactSetup> {
  const dir = mkdtempSync(join(tmpdir(), 'gf-artifacts-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const test = await buildTestApp(t, { env: { GF_ARTIFACT_DIR: dir, GF_MAX_INPUT_BYTES: String(MAX_INPUT_BYTES), ...env }, ...app });
  const blobs = test.config.execution.s3 ? test.blobs : createFsBlobStore(test.config.execution.artifactDir);
  const signer = createUrlSigner(await deploymentSecret(test.db, 'artifact_url_key'), test.config.publicUrl);
  const options: ArtifactRoutesOptions = { db: test.db, blobs, signer, config: test.config.execution };
  if (!test.app.hasRoute({ method: 'GET', url: '/v1/artifacts/:id' })) await test.app.register(artifactRoutes, options);
  const created = await createTestKey(test.db);
  return { ...test, dir, blobs, signer, key: created.key, accountId: created.accountId };
}

export interface Upload {
  jobId: string;
  assignmentId: string;
  machineId: string;
  token: string;
  otherToken: string;
  port: number;
}

/**
 * A job created through the API, its assignment (in `state`) on a machine with a token, a second
 * machine with its own token, and the whole app listening on a real port, as `server.ts` wires it.
 */
export async function uploadSetup(
  t: TestContext,
  state = 'running',
  outputRules = [{ path: '/output', maxBytes: 256 * 1024 }],
  env: Record<string, string> = {},
): Promise<ArtifactSetup & Upload> {
  const s = await artifactSetup(t, env);
  const farm = await createFarm(s.db, { slug: 'upload-farm' });
  const machine = await createMachine(s.db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 });
  const other = await createMachine(s.db, { farmId: farm.id, regionKey: 'us-east', classId: 'rtx-4090-24gb', gpuCount: 1, pricePerGpuHourMicroUsd: 400_000 });
  const token = newAgentToken('gfa');
  const otherToken = newAgentToken('gfa');
  await s.db.query('UPDATE machines SET token_hash = $2 WHERE id = $1', [machine.id, hashAgentToken(token)]);
  await s.db.query('UPDATE machines SET token_hash = $2 WHERE id = $1', [other.id, hashAgentToken(otherToken)]);
  await s.offerIndex.refresh();
  const created = await s.app.inject({ method: 'POST', url: '/v1/jobs', headers: bearer(s.key), payload: { image: 'ghcr.io/acme/job:1', gpu: { count: 1 } } });
  if (created.statusCode !== 201) throw new Error(`job creation answered ${created.statusCode}: ${created.body}`);
  const jobId = created.json().job.id as string;
  const assignmentId = `asg_${randomBytes(8).toString('hex')}`;
  await s.db.query(
    `INSERT INTO assignments (id, job_id, machine_id, attempt, state, gpu_indices, class_id, gpu_model, price_per_gpu_hour_micro_usd, spec)
     VALUES ($1, $2, $3, 1, $4, '{0}', 'rtx-4090-24gb', 'GeForce RTX 4090', 400000, $5::jsonb)`,
    [assignmentId, jobId, machine.id, state, JSON.stringify({ assignmentId, jobId, outputRules })],
  );
  // The whole app, as server.ts wires it: API-key resolution and rate limits must leave the machine token alone.
  await s.app.listen({ port: 0, host: '127.0.0.1' });
  return { ...s, jobId, assignmentId, machineId: machine.id, token, otherToken, port: (s.app.server.address() as { port: number }).port };
}

/** The agent's upload path for one of the assignment's artifacts (`output-<i>` or `log`). */
export const uploadPath = (u: Upload, name: string) => `/agent/v1/assignments/${u.assignmentId}/outputs/${name}`;

/** A tar of `files` (name -> text), as the agent packs `/output`. */
export async function tarOf(files: Record<string, string> | ReadonlyArray<readonly [string, string]>): Promise<Buffer> {
  const pack = tar.pack();
  // An array keeps its order and may repeat a name, as a hostile machine's tar may.
  for (const [name, text] of Array.isArray(files) ? files : Object.entries(files)) pack.entry({ name }, text);
  pack.finalize();
  const chunks: Buffer[] = [];
  for await (const chunk of pack) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}
