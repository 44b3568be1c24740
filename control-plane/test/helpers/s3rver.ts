import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { S3StoreConfig } from '../../src/config.js';
import { Secret } from '../../src/config.js';

interface TestContext {
  teardown(fn: () => unknown): void;
}

/** s3rver accepts these credentials (its documented defaults). */
const ACCESS_KEY = 'S3RVER';
const STARTUP_MS = 20_000;

export interface S3Server {
  /** `http://127.0.0.1:<port>` */
  endpoint: string;
  bucket: string;
  /** s3rver's storage folder: an object is `<dir>/<bucket>/<key>._S3rver_object`. */
  dir: string;
  pid: number;
  config: S3StoreConfig;
  /** The control plane's environment for this server (`GF_ARTIFACT_STORE=s3` and the `GF_S3_*`). */
  env: Record<string, string>;
}

/**
 * s3rver as its own process (the npm package's CLI on a free port and a temp folder), with a
 * bucket made at startup; ended by pid and its folder removed at teardown.
 */
export async function startS3rver(t: TestContext, bucket = 'gf-artifacts'): Promise<S3Server> {
  const dir = mkdtempSync(join(tmpdir(), 'gf-s3rver-'));
  const bin = createRequire(import.meta.url).resolve('s3rver/bin/s3rver.js');
  const child = spawn(process.execPath, [bin, '-d', dir, '-a', '127.0.0.1', '-p', '0', '--configure-bucket', bucket], { stdio: ['ignore', 'pipe', 'pipe'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  t.teardown(async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  });
  let stderr = '';
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`s3rver did not listen within ${STARTUP_MS} ms: ${stderr}`)), STARTUP_MS);
    child.once('exit', (code) => reject(new Error(`s3rver exited (${code}) before it listened: ${stderr}`)));
    // Read every line, also after the first: a full pipe would stall the server's request log.
    createInterface({ input: child.stdout }).on('line', (line) => {
      const listening = /listening on [^:]+:(\d+)/.exec(line);
      if (listening) {
        clearTimeout(timer);
        resolve(Number(listening[1]));
      }
    });
  });
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    bucket,
    dir,
    pid: child.pid!,
    config: { endpoint, bucket, region: 'us-east-1', credentials: { accessKeyId: ACCESS_KEY, secretAccessKey: new Secret(ACCESS_KEY) }, forcePathStyle: true },
    env: {
      GF_ARTIFACT_STORE: 's3',
      GF_S3_ENDPOINT: endpoint,
      GF_S3_BUCKET: bucket,
      GF_S3_REGION: 'us-east-1',
      GF_S3_ACCESS_KEY_ID: ACCESS_KEY,
      GF_S3_SECRET_ACCESS_KEY: ACCESS_KEY,
      GF_S3_FORCE_PATH_STYLE: 'true',
    },
  };
}

/** Where s3rver keeps the bytes of `key` on disk (to corrupt an object behind the API's back). */
export const s3rverObjectPath = (server: S3Server, key: string) => join(server.dir, server.bucket, `${key}._S3rver_object`);
