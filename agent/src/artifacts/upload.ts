import { once } from 'node:events';
import http from 'node:http';
import https from 'node:https';
import { GpufarmError } from '@gpufarm/shared';
import type { ArtifactSource, PackedDigest } from './pack.js';
import { ArtifactTooLargeError } from './pack.js';

/** The header (and trailer) carrying the host's SHA-256 of the body, 64 lower-case hex digits. */
export const SHA256_HEADER = 'X-Content-Sha256';

export interface UploadOptions {
  /** Where to PUT (the control plane's `/agent/v1/assignments/:id/outputs/:name`, or a signed URL). */
  url: string;
  /** Makes a fresh source for each attempt (a retry re-reads and re-hashes the bytes). */
  open: () => ArtifactSource;
  /** Extra request headers (the machine token). */
  headers?: Record<string, string>;
  contentType?: string;
  /** Attempts in all (default 5); waits `backoffMs * 2^n` (default 500 ms) with jitter in between. */
  attempts?: number;
  backoffMs?: number;
  /** Aborts a stalled attempt after this long without progress (default 60 s). */
  idleTimeoutMs?: number;
}

export interface UploadResult extends PackedDigest {
  attempts: number;
  status: number;
}

/**
 * The upload failed for good; `retryable` tells whether a later try might succeed (the network
 * failed, or the server answered 408, 429 or 5xx), `status` is the server's answer if one came.
 */
export class UploadError extends GpufarmError<'upload_failed'> {
  constructor(
    message: string,
    retryable: boolean,
    readonly status: number | null,
    options: { cause?: unknown } = {},
  ) {
    super('upload_failed', message, { ...options, retryable });
  }
}

/**
 * Streams an artifact to `url` with PUT, hashing in the same pass. The body goes chunked; the
 * host's SHA-256 (`X-Content-Sha256`) follows it as an HTTP trailer (declared in `Trailer`), and
 * from the second attempt on, when the hash is known, it is also sent up front as a header. The
 * server hashes what it stores and compares. Retried with exponential backoff and jitter on
 * network errors, 408, 429 and 5xx; other 4xx fail at once. A retry that hashes differently
 * from the first pass fails (the files changed under us).
 *
 * @throws ArtifactTooLargeError when the source passes its limit (nothing past it was sent)
 * @throws UploadError
 */
export async function uploadArtifact(opts: UploadOptions): Promise<UploadResult> {
  const attempts = opts.attempts ?? 5;
  const backoff = opts.backoffMs ?? 500;
  let known: PackedDigest | null = null;
  let lastError: UploadError | null = null;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    if (attempt > 1) await new Promise((r) => setTimeout(r, backoff * 2 ** (attempt - 2) * (0.5 + Math.random() / 2)));
    const source = opts.open();
    try {
      const { status, digest } = await putOnce(opts, source, known);
      if (known && digest.sha256 !== '' && (known.sha256 !== digest.sha256 || known.sizeBytes !== digest.sizeBytes)) {
        throw new UploadError(`the artifact changed between attempts (sha256 ${known.sha256}, now ${digest.sha256})`, false, null);
      }
      if (digest.sha256 !== '') known = digest;
      if (status >= 200 && status < 300) return { ...digest, attempts: attempt, status };
      const retryable = status === 408 || status === 429 || status >= 500;
      lastError = new UploadError(`PUT ${redact(opts.url)} answered HTTP ${status}`, retryable, status);
      if (!retryable) throw lastError;
    } catch (err) {
      source.stream.destroy();
      if (err instanceof ArtifactTooLargeError) throw err;
      if (err instanceof UploadError && !err.retryable) throw err;
      lastError = err instanceof UploadError ? err : new UploadError(`PUT ${redact(opts.url)} failed: ${(err as Error).message}`, true, null, { cause: err });
    }
  }
  throw lastError ?? new UploadError('upload failed', true, null);
}

async function putOnce(opts: UploadOptions, source: ArtifactSource, known: PackedDigest | null): Promise<{ status: number; digest: PackedDigest }> {
  const url = new URL(opts.url);
  const client = url.protocol === 'https:' ? https : http;
  const req = client.request(url, {
    method: 'PUT',
    headers: {
      'Content-Type': opts.contentType ?? 'application/octet-stream',
      'Transfer-Encoding': 'chunked',
      Trailer: SHA256_HEADER,
      ...(known ? { [SHA256_HEADER]: known.sha256 } : {}),
      ...opts.headers,
    },
  });
  req.setTimeout(opts.idleTimeoutMs ?? 60_000, () => req.destroy(new Error('upload timed out')));
  const response = new Promise<http.IncomingMessage>((resolve, reject) => {
    req.once('response', resolve);
    req.once('error', reject);
  });
  response.catch(() => undefined);
  let early: http.IncomingMessage | null = null;
  void response.then(
    (res) => (early = res),
    () => undefined,
  );
  const { stream, release } = source;
  // Each chunk is written with backpressure and no per-chunk promise, and a lent chunk goes back
  // once the socket took it. The request stays open for the trailer.
  const write = (chunk: Buffer) => {
    const more = release ? req.write(chunk, () => release(chunk)) : req.write(chunk);
    if (!more) {
      stream.pause();
      req.once('drain', () => stream.resume());
    }
  };
  try {
    await new Promise<void>((resolve, reject) => {
      stream.once('end', resolve);
      stream.once('error', reject);
      req.once('error', reject);
      // A server that answered before the end (an error) needs no more bytes.
      response.then(() => resolve(), reject);
      stream.on('data', write);
    });
  } catch (err) {
    req.destroy();
    throw err;
  } finally {
    stream.off('data', write);
  }
  if (early) {
    const res: http.IncomingMessage = early;
    res.resume();
    req.destroy();
    // The rest of the bytes is not needed: close the source (an open one holds its packer).
    stream.destroy();
    const status = res.statusCode ?? 0;
    if (status >= 200 && status < 300) throw new UploadError(`PUT ${redact(opts.url)} answered ${status} before the body ended`, false, status);
    return { status, digest: known ?? { sha256: '', sizeBytes: 0 } };
  }
  const digest = await source.digest;
  req.addTrailers({ [SHA256_HEADER]: digest.sha256 });
  req.end();
  const res = await response;
  res.resume();
  await once(res, 'end').catch(() => undefined);
  return { status: res.statusCode ?? 0, digest };
}

/** A URL without its query (signed URLs carry credentials there). */
function redact(url: string): string {
  const u = new URL(url);
  return `${u.origin}${u.pathname}`;
}
