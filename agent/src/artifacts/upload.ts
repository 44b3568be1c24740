import { once } from 'node:events';
import http from 'node:http';
import https from 'node:https';
import { errorText, GpufarmError, uploadPlanSchema, type UploadCompletion, type UploadPlan } from '@gpufarm/shared';
import type { ArtifactSource, PackedDigest } from './pack.js';
import { OutputFilesError } from './output-tree.js';
import { ArtifactTooLargeError } from './pack.js';

/** The header (and trailer) carrying the host's SHA-256 of the body, 64 lower-case hex digits. */
export const SHA256_HEADER = 'X-Content-Sha256';

export interface UploadOptions {
  /** Where to PUT (the control plane's `/agent/v1/assignments/:id/outputs/:name`, or a signed URL). */
  url: string;
  /**
   * Where to ask first how to upload (`<url>/uploads`): the control plane may answer presigned
   * part URLs of its object store, and the bytes then go there, not to `url`. Absent: PUT to `url`.
   */
  planUrl?: string;
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
 * With `planUrl` each attempt first asks the control plane how to upload: a multipart plan
 * sends the bytes to its object store instead (`multipartOnce`), the same retry rules applying
 * to the plan, the parts (each also retried on its own) and the completion; a 409 from the
 * completion (the store holds other bytes than were hashed) is not retried.
 *
 * @throws ArtifactTooLargeError when the source passes its limit (nothing past it was sent)
 * @throws OutputFilesError when the job's own files cannot be packed (not retried)
 * @throws UploadError
 */
export async function uploadArtifact(opts: UploadOptions): Promise<UploadResult> {
  const attempts = opts.attempts ?? 5;
  const backoff = opts.backoffMs ?? 500;
  let known: PackedDigest | null = null;
  let lastError: UploadError | null = null;
  for (let attempt = 1; attempt <= attempts; attempt++) {
    if (attempt > 1) await new Promise((r) => setTimeout(r, backoff * 2 ** (attempt - 2) * (0.5 + Math.random() / 2)));
    let source: ArtifactSource | null = null;
    try {
      const plan = opts.planUrl ? await askPlan(opts, opts.planUrl) : null;
      source = opts.open();
      const sent: { status: number; digest: PackedDigest } = plan?.method === 'multipart' ? await multipartOnce(opts, plan, source) : await putOnce(opts, source, known);
      const { status, digest } = sent;
      if (known && digest.sha256 !== '' && (known.sha256 !== digest.sha256 || known.sizeBytes !== digest.sizeBytes)) {
        throw new UploadError(`the artifact changed between attempts (sha256 ${known.sha256}, now ${digest.sha256})`, false, null);
      }
      if (digest.sha256 !== '') known = digest;
      if (status >= 200 && status < 300) return { ...digest, attempts: attempt, status };
      const retryable = status === 408 || status === 429 || status >= 500;
      lastError = new UploadError(`PUT ${redact(opts.url)} answered HTTP ${status}`, retryable, status);
      if (!retryable) throw lastError;
    } catch (err) {
      source?.stream.destroy();
      // The job's own doing: packing again would not change it.
      if (err instanceof ArtifactTooLargeError || err instanceof OutputFilesError) throw err;
      if (err instanceof UploadError && !err.retryable) throw err;
      lastError = err instanceof UploadError ? err : new UploadError(`PUT ${redact(opts.url)} failed: ${errorText(err)}`, true, null, { cause: err });
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
  // once the socket took it. Reading stops only past PUT_WINDOW_BYTES queued, not at the
  // request's 16 KiB: waiting for the socket to empty after every chunk left it idle between
  // chunks and cost more system time per byte. The request stays open for the trailer.
  const write = (chunk: Buffer) => {
    const more = release ? req.write(chunk, () => release(chunk)) : req.write(chunk);
    if (!more && req.writableLength >= PUT_WINDOW_BYTES) {
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

/** An answer's status as an UploadError: 408, 429 and 5xx may go better later, other codes not. */
function refused(what: string, status: number, body = ''): UploadError {
  const message = /"message":"([^"]*)"/.exec(body)?.[1];
  return new UploadError(`${what} answered HTTP ${status}${message ? `: ${message}` : ''}`, status === 408 || status === 429 || status >= 500, status);
}

/** A request that could not be made or answered at all, which a later attempt may get through. */
const unreachable = (what: string, err: unknown) => new UploadError(`${what} failed: ${errorText(err)}`, true, null, { cause: err });

/**
 * Asks the control plane how to upload. A control plane without the route (404, an older one)
 * takes the bytes itself, as `{method: 'put'}` says.
 */
async function askPlan(opts: UploadOptions, planUrl: string): Promise<UploadPlan> {
  const what = `POST ${redact(planUrl)}`;
  let res: Response;
  try {
    res = await fetch(planUrl, { method: 'POST', headers: { ...opts.headers }, signal: AbortSignal.timeout(opts.idleTimeoutMs ?? 60_000) });
  } catch (err) {
    throw unreachable(what, err);
  }
  const body = await res.text().catch(() => '');
  // A 404 may be an older control plane (no such route) or no such assignment: the PUT tells.
  if (res.status === 404) return { method: 'put' };
  if (res.status < 200 || res.status >= 300) throw refused(what, res.status, body);
  const plan = uploadPlanSchema.safeParse(JSON.parse(body || 'null'));
  if (!plan.success) throw new UploadError(`${what} answered a plan this agent cannot read: ${plan.error.message}`, false, res.status);
  return plan.data;
}

/**
 * Sends the artifact straight to the object store as the plan's parts (each must be whole
 * before it goes: the store needs its length), one part filling while the previous one is sent,
 * then asks the control plane to complete it with the parts' ETags and the host's hash and
 * size. The control plane reads the object back and refuses it when it hashes otherwise.
 */
async function multipartOnce(opts: UploadOptions, plan: Extract<UploadPlan, { method: 'multipart' }>, source: ArtifactSource): Promise<{ status: number; digest: PackedDigest }> {
  const parts: UploadCompletion['parts'] = [];
  const timeoutMs = opts.idleTimeoutMs ?? 60_000;
  const sendPart = async (partNumber: number, body: Buffer) => {
    const url = plan.partUrls[partNumber - 1];
    if (!url) throw new UploadError(`the artifact needs more than the ${plan.partUrls.length} parts of ${plan.partBytes} bytes its limit allows`, false, null);
    const what = `PUT part ${partNumber} to ${redact(url)}`;
    // A part is retried on its own: it is still in memory.
    for (let tries = 1; ; tries++) {
      let failure: UploadError;
      try {
        const res = await fetch(url, { method: 'PUT', body, headers: { 'Content-Type': 'application/octet-stream' }, signal: AbortSignal.timeout(timeoutMs) });
        const text = await res.text().catch(() => '');
        const etag = res.headers.get('etag');
        if (res.ok && etag) {
          parts.push({ partNumber, etag });
          return;
        }
        failure = res.ok ? new UploadError(`${what} answered no ETag`, false, res.status) : refused(what, res.status, text);
      } catch (err) {
        failure = unreachable(what, err);
      }
      if (!failure.retryable || tries >= PART_TRIES) throw failure;
      await new Promise((r) => setTimeout(r, 250 * 2 ** tries));
    }
  };
  const spare = [Buffer.allocUnsafe(plan.partBytes), Buffer.allocUnsafe(plan.partBytes)];
  let buffer = spare[0]!;
  let filled = 0;
  let sending: Promise<void> = Promise.resolve();
  let count = 0;
  const flush = async () => {
    await sending;
    const body = buffer.subarray(0, filled);
    sending = sendPart(++count, body);
    // Looked at on the next flush or at the end; until then its failure must not count as unhandled.
    sending.catch(() => undefined);
    buffer = buffer === spare[0] ? spare[1]! : spare[0]!;
    filled = 0;
  };
  for await (const chunk of source.stream as AsyncIterable<Buffer>) {
    for (let offset = 0; offset < chunk.length; ) {
      const n = Math.min(chunk.length - offset, plan.partBytes - filled);
      chunk.copy(buffer, filled, offset, offset + n);
      filled += n;
      offset += n;
      if (filled === plan.partBytes) await flush();
    }
    source.release?.(chunk);
  }
  const digest = await source.digest;
  // An empty artifact is one empty part: an upload has at least one.
  if (filled > 0 || count === 0) await flush();
  await sending;
  parts.sort((a, b) => a.partNumber - b.partNumber);
  const completeUrl = `${opts.planUrl}/${plan.uploadId}`;
  const what = `POST ${redact(completeUrl)}`;
  const completion: UploadCompletion = { parts, sha256: digest.sha256, sizeBytes: digest.sizeBytes };
  let res: Response;
  try {
    res = await fetch(completeUrl, { method: 'POST', headers: { ...opts.headers, 'Content-Type': 'application/json' }, body: JSON.stringify(completion), signal: AbortSignal.timeout(COMPLETE_TIMEOUT_MS) });
  } catch (err) {
    throw unreachable(what, err);
  }
  const text = await res.text().catch(() => '');
  if (res.status < 200 || res.status >= 300) throw refused(what, res.status, text);
  return { status: res.status, digest };
}

/** Bytes a PUT may have queued for its socket before the source is paused (pooled sources hold less). */
const PUT_WINDOW_BYTES = 4 * 1024 * 1024;

/** Tries of one part before the attempt fails. */
const PART_TRIES = 3;
/** The completion reads the whole object back before it answers: 5 GiB at 100 MB/s is under a minute. */
const COMPLETE_TIMEOUT_MS = 10 * 60 * 1000;

/** A URL without its query (signed URLs carry credentials there). */
function redact(url: string): string {
  const u = new URL(url);
  return `${u.origin}${u.pathname}`;
}
