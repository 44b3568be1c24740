import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { LineTail, ownChild, systemEnvironment, type ChildExit } from '@gpufarm/shared/node';
import { Secret, type S3StoreConfig } from '../config.js';

/** s3rver accepts these credentials (its documented defaults). */
const S3RVER_ACCESS_KEY = 'S3RVER';

/** A local S3-compatible server (the npm package `s3rver`) running as its own process. */
export interface S3rverProcess {
  /** `http://127.0.0.1:<port>` */
  endpoint: string;
  bucket: string;
  /** s3rver's storage folder: an object is `<dir>/<bucket>/<key>._S3rver_object`. */
  dir: string;
  pid: number;
  config: S3StoreConfig;
  /** The control plane's environment for this server (`GF_ARTIFACT_STORE=s3` and the `GF_S3_*`). */
  env: Record<string, string>;
  /** Resolves when it exited, however it ended. */
  exited: Promise<ChildExit>;
  /** The last lines it printed. */
  lastLines(): string[];
  /** SIGTERM to its pid; resolves once it exited. Its folder is left as it is. */
  stop(): Promise<void>;
}

/**
 * Starts s3rver (the package's CLI) with its objects in `dir`, on `port` (0: a free one, read
 * back from its output), with `bucket` made at startup, and resolves once it listens.
 * `detached`: in a process group of its own, so a terminal's Ctrl-C reaches only its parent,
 * which stops it in order. Each line it prints also goes to `log`. For development and tests:
 * s3rver keeps no redundancy and checks no signature's age.
 */
export async function startS3rver(options: { dir: string; bucket?: string; port?: number; detached?: boolean; timeoutMs?: number; log?: (line: string) => void }): Promise<S3rverProcess> {
  const bucket = options.bucket ?? 'gf-artifacts';
  const timeoutMs = options.timeoutMs ?? 20_000;
  const bin = createRequire(import.meta.url).resolve('s3rver/bin/s3rver.js');
  const child = spawn(process.execPath, [bin, '-d', options.dir, '-a', '127.0.0.1', '-p', String(options.port ?? 0), '--configure-bucket', bucket], {
    env: systemEnvironment(),
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.detached ?? false,
  });
  // However this process ends (short of SIGKILL), s3rver goes with it.
  const { exited, stop } = ownChild(child);
  const tail = new LineTail();
  child.stderr.on('data', (chunk: Buffer) => {
    for (const line of tail.push(chunk)) options.log?.(line);
  });
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`s3rver did not listen within ${timeoutMs} ms:\n${tail.lines().join('\n')}`)), timeoutMs);
    void exited.then((exit) => {
      clearTimeout(timer);
      reject(new Error(`s3rver exited (${exit.signal ?? String(exit.code)}) before it listened:\n${tail.lines().join('\n')}`));
    });
    // Every line is read, also after the first: a full pipe would stall the server's request log.
    createInterface({ input: child.stdout }).on('line', (line) => {
      tail.push(Buffer.from(`${line}\n`));
      options.log?.(line);
      const listening = /listening on [^:]+:(\d+)/.exec(line);
      if (listening) {
        clearTimeout(timer);
        resolve(Number(listening[1]));
      }
    });
  }).catch(async (err: unknown) => {
    await stop();
    throw err;
  });
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    bucket,
    dir: options.dir,
    // Listening, it has a pid: a spawn failure rejects above.
    pid: child.pid!,
    config: { endpoint, bucket, region: 'us-east-1', credentials: { accessKeyId: S3RVER_ACCESS_KEY, secretAccessKey: new Secret(S3RVER_ACCESS_KEY) }, forcePathStyle: true },
    env: {
      GF_ARTIFACT_STORE: 's3',
      GF_S3_ENDPOINT: endpoint,
      GF_S3_BUCKET: bucket,
      GF_S3_REGION: 'us-east-1',
      GF_S3_ACCESS_KEY_ID: S3RVER_ACCESS_KEY,
      GF_S3_SECRET_ACCESS_KEY: S3RVER_ACCESS_KEY,
      GF_S3_FORCE_PATH_STYLE: 'true',
    },
    exited,
    lastLines: () => tail.lines(),
    stop,
  };
}

/** Where s3rver keeps the bytes of `key` on disk (to corrupt an object behind the API's back). */
export const s3rverObjectPath = (server: Pick<S3rverProcess, 'dir' | 'bucket'>, key: string) => join(server.dir, server.bucket, `${key}._S3rver_object`);
