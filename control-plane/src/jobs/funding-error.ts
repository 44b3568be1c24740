import { GpufarmError, type GpufarmErrorOptions } from '@gpufarm/shared';

export type FundingErrorCode = 'conflict' | 'funding_mismatch' | 'unavailable';

/**
 * Funding a job cannot go on as asked. The codes are the spec's, so the HTTP edge sends them
 * as they are; `unavailable` (the chain, the escrow or the job's terms are not there yet) is
 * the one worth retrying.
 */
export class FundingError extends GpufarmError<FundingErrorCode> {
  constructor(code: FundingErrorCode, message: string, options: Omit<GpufarmErrorOptions, 'retryable'> = {}) {
    super(code, message, { ...options, retryable: code === 'unavailable' });
  }
}
