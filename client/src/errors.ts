import { GpufarmError, type ErrorCode, type ErrorDetail } from '@gpufarm/shared';

/**
 * Codes only a client produces: the request never got an answer (`network_error`), it got none
 * in time (`timeout`), a wallet or chain is not the one the job needs (`wallet_mismatch`,
 * `wrong_chain`), downloaded bytes differ from the recorded hash (`integrity_error`), or the
 * server answered something its schema does not allow (`invalid_response`).
 */
export const CLIENT_ERROR_CODES = ['network_error', 'timeout', 'wallet_mismatch', 'wrong_chain', 'integrity_error', 'invalid_response'] as const;
export type ClientErrorCode = (typeof CLIENT_ERROR_CODES)[number];
export type GfErrorCode = ErrorCode | ClientErrorCode;

export interface GfErrorOptions {
  /** The HTTP status of the answer; null when there was none (a client-only failure). */
  status?: number | null;
  details?: ErrorDetail[];
  /** The server's `req_…` id of the call, when an answer arrived. */
  requestId?: string | null;
  retryable?: boolean;
  /** How long the server asked to wait before trying again (`Retry-After`), in milliseconds. */
  retryAfterMs?: number | null;
  cause?: unknown;
}

/** Every failure of the client library: the server's error envelope, or a client-only code. */
export class GfError extends GpufarmError<GfErrorCode> {
  readonly status: number | null;
  readonly requestId: string | null;
  readonly retryAfterMs: number | null;

  constructor(code: GfErrorCode, message: string, options: GfErrorOptions = {}) {
    super(code, message, { details: options.details ?? [], retryable: options.retryable ?? false, cause: options.cause });
    this.status = options.status ?? null;
    this.requestId = options.requestId ?? null;
    this.retryAfterMs = options.retryAfterMs ?? null;
  }
}
