import { errorEnvelopeSchema, errorText, issuesToDetails } from '@gpufarm/shared';
import type { z } from 'zod';
import { parseAnswer } from './answer.js';
import { GfError } from './errors.js';

/** One HTTP call as it happened, for tracing (`gf --explain`). `status` is null when no answer came. */
export interface RequestEvent {
  method: string;
  url: string;
  status: number | null;
  requestId: string | null;
  attempt: number;
  durationMs: number;
}

export interface TransportOptions {
  /** The deployment's address, e.g. `https://api.example.com` (without `/v1`). */
  baseUrl: string;
  apiKey?: string;
  /** Retries of a retryable call (GETs and job creation); 2 by default. */
  retries?: number;
  /** Milliseconds each attempt may take until its whole answer has arrived; 30 s by default. */
  timeoutMs?: number;
  fetch?: typeof fetch;
  onRequest?: (event: RequestEvent) => void;
}

export type Query = Record<string, string | number | boolean | readonly string[] | undefined>;

export interface CallOptions<T> {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  /** The path under the base address: `/v1/…`, or a dashboard route such as `/auth/session` under `…/dashboard/api`. */
  path: string;
  query?: Query;
  /** JSON-encoded unless it is raw bytes. */
  body?: unknown;
  headers?: Record<string, string>;
  /** Statuses that are a success, each with the schema its body must match (null: the body is not read, as for a redirect). */
  expect: Record<number, z.ZodType<T> | null>;
  /** Whether network errors, 429 and 5xx are retried (GETs and job creation). */
  retry: boolean;
  signal?: AbortSignal;
}

export interface Answer<T> {
  status: number;
  headers: Headers;
  body: T;
  requestId: string | null;
}

const BACKOFF_BASE_MS = 500;
const BACKOFF_CAP_MS = 8_000;

/** Full jitter around an exponential step: attempt 0 waits 250-500 ms, attempt 1 500-1000 ms, … */
export function backoffMs(attempt: number, random = Math.random): number {
  const step = Math.min(BACKOFF_CAP_MS, BACKOFF_BASE_MS * 2 ** attempt);
  return Math.round(step / 2 + random() * (step / 2));
}

/** `Retry-After` as milliseconds: delta seconds or an HTTP date; null when absent or malformed. */
export function retryAfterMs(value: string | null, now = Date.now()): number | null {
  if (value === null) return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, at - now);
}

/** A key in the server's accepted form (1-255 visible ASCII characters), unique per creation. */
export const newIdempotencyKey = (): string => `gf-${globalThis.crypto.randomUUID()}`;

export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortError(signal));
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(abortError(signal!));
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function abortError(signal: AbortSignal): unknown {
  return signal.reason ?? new DOMException('The operation was aborted.', 'AbortError');
}

function queryString(query: Query | undefined): string {
  if (!query) return '';
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(query)) {
    if (value === undefined) continue;
    params.set(name, Array.isArray(value) ? value.join(',') : String(value));
  }
  const text = params.toString();
  return text ? `?${text}` : '';
}

function parseBody(text: string): unknown {
  if (!text) return null;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** The error a non-success answer stands for: the server's envelope, or one named after the status. */
function answerError(res: Response, body: unknown, what: string): GfError {
  const status = res.status;
  const retryable = status === 429 || status >= 500;
  const retryAfter = retryAfterMs(res.headers.get('retry-after'));
  const envelope = parseAnswer(errorEnvelopeSchema, body);
  if (envelope.success) {
    const { code, message, requestId, details } = envelope.data.error;
    return new GfError(code, message, { status, details, requestId, retryable, retryAfterMs: retryAfter });
  }
  const code = status === 429 ? 'rate_limited' : status >= 500 ? 'internal' : 'invalid_response';
  return new GfError(code, `${what} answered HTTP ${status} without an error envelope.`, { status, requestId: res.headers.get('x-request-id'), retryable, retryAfterMs: retryAfter });
}

/** The error a non-success answer whose body is still unread stands for (see `answerError`). */
export async function failureOf(res: Response, what: string): Promise<GfError> {
  return answerError(res, parseBody(await res.text().catch(() => '')), what);
}

/**
 * The HTTP edge of the client: API key, JSON bodies, timeouts, retries with jittered backoff
 * (honouring `Retry-After`), and every answer checked against its schema.
 */
export function createTransport(options: TransportOptions) {
  const baseUrl = options.baseUrl.replace(/\/+$/, '');
  const retries = options.retries ?? 2;
  const timeoutMs = options.timeoutMs ?? 30_000;
  const doFetch = options.fetch ?? fetch;

  async function attempt<T>(call: CallOptions<T>, url: string, attemptNo: number): Promise<Answer<T>> {
    const what = `${call.method} ${call.path}`;
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = call.signal ? AbortSignal.any([call.signal, timeout]) : timeout;
    const raw = call.body instanceof Uint8Array;
    const headers: Record<string, string> = {
      accept: 'application/json',
      ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}),
      ...(call.body === undefined ? {} : { 'content-type': raw ? 'application/octet-stream' : 'application/json' }),
      ...call.headers,
    };
    const started = performance.now();
    let status: number | null = null;
    let requestId: string | null = null;
    try {
      const res = await doFetch(url, {
        method: call.method,
        headers,
        redirect: 'manual',
        signal,
        body: call.body === undefined ? undefined : raw ? (call.body as Uint8Array) : JSON.stringify(call.body),
      });
      status = res.status;
      requestId = res.headers.get('x-request-id');
      const schema = call.expect[res.status];
      if (schema === null) {
        await res.body?.cancel();
        return { status: res.status, headers: res.headers, body: null as T, requestId };
      }
      const body = parseBody(await res.text());
      if (!schema) throw answerError(res, body, what);
      const parsed = parseAnswer(schema, body);
      if (!parsed.success) {
        const details = issuesToDetails(parsed.error.issues);
        throw new GfError('invalid_response', `${what} answered a body that does not match its schema: ${details.map((d) => d.message).join('; ')}. Check that the client and the server versions match.`, {
          status: res.status,
          requestId,
          details,
        });
      }
      return { status: res.status, headers: res.headers, body: parsed.data, requestId };
    } catch (err) {
      if (err instanceof GfError) throw err;
      if (call.signal?.aborted) throw err;
      if (timeout.aborted) throw new GfError('timeout', `${what} got no complete answer within ${timeoutMs} ms. Retry later or raise the timeout.`, { retryable: true, cause: err });
      throw new GfError('network_error', `${what} could not reach ${baseUrl}: ${errorText(err)}. Check the address and the network.`, { retryable: true, cause: err });
    } finally {
      options.onRequest?.({ method: call.method, url, status, requestId, attempt: attemptNo, durationMs: performance.now() - started });
    }
  }

  /**
   * Opens a long-lived GET such as a Server-Sent Events stream, once (no retries: the caller
   * resumes on its own terms). Answers the response as soon as its head arrived, whatever its
   * status; `timeoutMs` covers the head only, the caller reads or cancels the body.
   */
  async function openStream(call: { path: string; query?: Query; headers?: Record<string, string>; signal?: AbortSignal }, attemptNo = 0): Promise<Response> {
    const url = `${baseUrl}${call.path}${queryString(call.query)}`;
    const what = `GET ${call.path}`;
    const headTimeout = new AbortController();
    const timer = setTimeout(() => headTimeout.abort(), timeoutMs);
    const signal = call.signal ? AbortSignal.any([call.signal, headTimeout.signal]) : headTimeout.signal;
    const headers: Record<string, string> = { accept: 'text/event-stream', ...(options.apiKey ? { authorization: `Bearer ${options.apiKey}` } : {}), ...call.headers };
    const started = performance.now();
    let status: number | null = null;
    let requestId: string | null = null;
    try {
      const res = await doFetch(url, { method: 'GET', headers, redirect: 'manual', signal });
      status = res.status;
      requestId = res.headers.get('x-request-id');
      return res;
    } catch (err) {
      if (call.signal?.aborted) throw err;
      if (headTimeout.signal.aborted) throw new GfError('timeout', `${what} got no answer within ${timeoutMs} ms. Retry later or raise the timeout.`, { retryable: true, cause: err });
      throw new GfError('network_error', `${what} could not reach ${baseUrl}: ${errorText(err)}. Check the address and the network.`, { retryable: true, cause: err });
    } finally {
      clearTimeout(timer);
      options.onRequest?.({ method: 'GET', url, status, requestId, attempt: attemptNo, durationMs: performance.now() - started });
    }
  }

  /** Sends a call, retrying it when `call.retry` allows and the failure is retryable. */
  async function request<T>(call: CallOptions<T>): Promise<Answer<T>> {
    const url = `${baseUrl}${call.path}${queryString(call.query)}`;
    for (let attemptNo = 0; ; attemptNo++) {
      try {
        return await attempt(call, url, attemptNo);
      } catch (err) {
        if (!(err instanceof GfError) || !err.retryable || !call.retry || attemptNo >= retries) throw err;
        await sleep(err.retryAfterMs ?? backoffMs(attemptNo), call.signal);
      }
    }
  }

  return { baseUrl, request, openStream, fetch: doFetch, timeoutMs };
}

export type Transport = ReturnType<typeof createTransport>;
