import { createHash, randomBytes } from 'node:crypto';
import { open, rename, rm } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { GfError } from './errors.js';
import type { RequestEvent } from './transport.js';
import { errorText } from '@gpufarm/shared';

export interface DownloadOptions {
  /** Another recorded hash the bytes must also match, e.g. the job's `result.serverHash`. */
  expectedSha256?: string | null;
  signal?: AbortSignal;
  /** Called as bytes arrive, with the bytes in the file so far and the recorded size (for a progress bar). */
  onProgress?: (receivedBytes: number, totalBytes: number) => void;
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

/** How often a download that broke off asks for a new URL and goes on from where it stopped. */
const MAX_RESUMES = 3;

class BrokenOff extends Error {}

/**
 * Downloads an artifact: asks `GET /v1/artifacts/:id` for its signed URL, streams the bytes into
 * a temporary file beside `destPath` while hashing them, and renames it to `destPath` only when
 * the hash equals every recorded one (the redirect's and the file's `X-Artifact-Sha256`, and
 * `expectedSha256` when given). When the transfer breaks off (or the URL expired), it asks for a
 * new URL and goes on with a `Range` request from the bytes it has. On a mismatch it throws
 * `integrity_error` and leaves nothing at `destPath` (an earlier file there stays untouched).
 */
export async function downloadArtifact(deps: DownloadDeps, artifactId: string, destPath: string, options: DownloadOptions = {}): Promise<DownloadResult> {
  const { signal } = options;
  let where = await deps.location(artifactId, { signal });
  const recorded = new Map<string, string>([['X-Artifact-Sha256 of the redirect', where.sha256]]);
  if (options.expectedSha256) recorded.set('expectedSha256', options.expectedSha256.toLowerCase());
  const temp = join(dirname(destPath), `.${basename(destPath)}.${randomBytes(6).toString('hex')}.part`);
  const file = await open(temp, 'wx', 0o600);
  let hash = createHash('sha256');
  let received = 0;
  let last: { status: number; requestId: string | null } | undefined;
  try {
    for (let resumes = 0; ; resumes++) {
      try {
        const res = await fetchFrom(deps, where.url, received, where.sha256, artifactId, signal, resumes);
        last = { status: res.status, requestId: res.headers.get('x-request-id') };
        if (res.status === 200 && received > 0) {
          // The server ignored the range (its validator changed): start over.
          hash = createHash('sha256');
          received = 0;
          await file.truncate(0);
          options.onProgress?.(0, where.sizeBytes);
        }
        const served = res.headers.get('x-artifact-sha256');
        if (served) recorded.set('X-Artifact-Sha256 of the file', served);
        try {
          for await (const chunk of Readable.fromWeb(res.body as WebReadableStream<Uint8Array>)) {
            const bytes = chunk as Uint8Array;
            hash.update(bytes);
            await file.write(bytes, 0, bytes.length, received);
            received += bytes.length;
            options.onProgress?.(received, where.sizeBytes);
          }
        } catch (err) {
          if (signal?.aborted) throw err;
          throw new BrokenOff(errorText(err), { cause: err });
        }
        break;
      } catch (err) {
        if (!(err instanceof BrokenOff)) throw err;
        if (resumes >= MAX_RESUMES) {
          throw new GfError('network_error', `Downloading artifact ${artifactId} broke off and ${resumes} resumes did not finish it (last: ${err.message}). Check the network and try again.`, { retryable: true, cause: err.cause });
        }
        // A fresh URL: the one in hand may have expired (they live 120 seconds).
        where = await deps.location(artifactId, { signal });
      }
    }
    await file.close();
    const sha256 = hash.digest('hex');
    const mismatches = [...recorded].filter(([, expected]) => expected !== sha256);
    if (mismatches.length > 0 || received !== where.sizeBytes) {
      const details = [
        ...mismatches.map(([field, expected]) => ({ field, message: `${field} is ${expected}, the downloaded bytes hash to ${sha256}` })),
        ...(received === where.sizeBytes ? [] : [{ field: 'X-Artifact-Size', message: `X-Artifact-Size is ${where.sizeBytes}, ${received} bytes arrived` }]),
      ];
      throw new GfError('integrity_error', `The downloaded bytes of artifact ${artifactId} do not match its recorded SHA-256; nothing was written to ${destPath}. Download it again; if it persists, report it with the artifact id.`, {
        status: last?.status ?? null,
        requestId: last?.requestId ?? null,
        details,
      });
    }
    await rename(temp, destPath);
    return { path: destPath, sha256, sizeBytes: received };
  } finally {
    await file.close().catch(() => undefined);
    await rm(temp, { force: true });
  }
}

/**
 * One GET of the signed URL, from byte `from` on (with `If-Range` on the artifact's ETag, so a
 * changed object comes whole). A lost connection or an expired URL is `BrokenOff` (ask again);
 * any other answer than 200 or the asked 206 is a `GfError`.
 */
async function fetchFrom(deps: DownloadDeps, url: string, from: number, sha256: string, artifactId: string, signal: AbortSignal | undefined, attempt: number): Promise<Response> {
  const started = performance.now();
  const headers: Record<string, string> = from > 0 ? { range: `bytes=${from}-`, 'if-range': `"${sha256}"` } : {};
  let res: Response;
  try {
    res = await deps.fetch(url, { headers, signal });
  } catch (err) {
    deps.onRequest?.({ method: 'GET', url, status: null, requestId: null, attempt, durationMs: performance.now() - started });
    if (signal?.aborted) throw err;
    throw new BrokenOff(errorText(err), { cause: err });
  }
  const requestId = res.headers.get('x-request-id');
  deps.onRequest?.({ method: 'GET', url, status: res.status, requestId, attempt, durationMs: performance.now() - started });
  const resumed = res.status === 206 && from > 0 && res.headers.get('content-range')?.startsWith(`bytes ${from}-`) === true;
  if ((res.status === 200 || resumed) && res.body) return res;
  await res.body?.cancel();
  if (res.status === 403) throw new BrokenOff(`the signed URL was refused (HTTP 403)`);
  throw new GfError(res.status >= 500 ? 'unavailable' : 'invalid_response', `Downloading artifact ${artifactId} answered HTTP ${res.status}. Try again.`, {
    status: res.status,
    requestId,
    retryable: res.status >= 500,
  });
}
