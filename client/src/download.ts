import { createHash, randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { GfError } from './errors.js';
import type { RequestEvent } from './transport.js';

export interface DownloadOptions {
  /** Another recorded hash the bytes must also match, e.g. the job's `result.serverHash`. */
  expectedSha256?: string | null;
  signal?: AbortSignal;
}

export interface DownloadResult {
  path: string;
  sha256: string;
  sizeBytes: number;
}

interface DownloadDeps {
  location: (artifactId: string, opts: { signal?: AbortSignal }) => Promise<{ url: string; sha256: string; sizeBytes: number }>;
  fetch: typeof fetch;
  onRequest?: (event: RequestEvent) => void;
}

/**
 * Downloads an artifact: asks `GET /v1/artifacts/:id` for its signed URL, streams the bytes into
 * a temporary file beside `destPath` while hashing them, and renames it to `destPath` only when
 * the hash equals every recorded one (the redirect's and the file's `X-Artifact-Sha256`, and
 * `expectedSha256` when given). On a mismatch it throws `integrity_error` and leaves nothing at
 * `destPath` (an earlier file there stays untouched).
 */
export async function downloadArtifact(deps: DownloadDeps, artifactId: string, destPath: string, options: DownloadOptions = {}): Promise<DownloadResult> {
  const where = await deps.location(artifactId, { signal: options.signal });
  const started = performance.now();
  let res: Response;
  try {
    res = await deps.fetch(where.url, { signal: options.signal });
  } catch (err) {
    deps.onRequest?.({ method: 'GET', url: where.url, status: null, requestId: null, attempt: 0, durationMs: performance.now() - started });
    if (options.signal?.aborted) throw err;
    throw new GfError('network_error', `Downloading artifact ${artifactId} failed: ${err instanceof Error ? err.message : String(err)}. Try again.`, { retryable: true, cause: err });
  }
  const requestId = res.headers.get('x-request-id');
  deps.onRequest?.({ method: 'GET', url: where.url, status: res.status, requestId, attempt: 0, durationMs: performance.now() - started });
  if (res.status !== 200 || !res.body) {
    await res.body?.cancel();
    throw new GfError(res.status >= 500 ? 'unavailable' : 'invalid_response', `Downloading artifact ${artifactId} answered HTTP ${res.status}. Try again; a signed URL lives 120 seconds.`, {
      status: res.status,
      requestId,
      retryable: res.status >= 500,
    });
  }
  const recorded = new Map<string, string>([['X-Artifact-Sha256 of the redirect', where.sha256]]);
  const served = res.headers.get('x-artifact-sha256');
  if (served) recorded.set('X-Artifact-Sha256 of the file', served);
  if (options.expectedSha256) recorded.set('expectedSha256', options.expectedSha256.toLowerCase());

  const temp = join(dirname(destPath), `.${basename(destPath)}.${randomBytes(6).toString('hex')}.part`);
  const hash = createHash('sha256');
  let sizeBytes = 0;
  const hashing = new Transform({
    transform(chunk: Buffer, _encoding, done) {
      hash.update(chunk);
      sizeBytes += chunk.length;
      done(null, chunk);
    },
  });
  try {
    await pipeline(Readable.fromWeb(res.body as WebReadableStream<Uint8Array>), hashing, createWriteStream(temp, { flags: 'wx', mode: 0o600 }), { signal: options.signal });
    const sha256 = hash.digest('hex');
    const mismatches = [...recorded].filter(([, expected]) => expected !== sha256);
    if (mismatches.length > 0 || sizeBytes !== where.sizeBytes) {
      const details = [
        ...mismatches.map(([field, expected]) => ({ field, message: `${field} is ${expected}, the downloaded bytes hash to ${sha256}` })),
        ...(sizeBytes === where.sizeBytes ? [] : [{ field: 'X-Artifact-Size', message: `X-Artifact-Size is ${where.sizeBytes}, ${sizeBytes} bytes arrived` }]),
      ];
      throw new GfError('integrity_error', `The downloaded bytes of artifact ${artifactId} do not match its recorded SHA-256; nothing was written to ${destPath}. Download it again; if it persists, report it with the artifact id.`, {
        status: res.status,
        requestId,
        details,
      });
    }
    await rename(temp, destPath);
    return { path: destPath, sha256, sizeBytes };
  } finally {
    await rm(temp, { force: true });
  }
}
