import { GpufarmError } from '@gpufarm/shared';

/**
 * Why a chain call failed: `chain_unavailable` when the chain did not carry it out for now (RPC
 * down, timeout, a transaction the node turned away), the only retryable one; `chain_reverted`
 * when the contract refused it; `operator_key_missing` and `unexpected_receipt` need the configuration fixed.
 */
export type ChainErrorCode = 'chain_unavailable' | 'chain_reverted' | 'operator_key_missing' | 'unexpected_receipt';

/** A chain call that failed; the cause is kept for logs. */
export class ChainError extends GpufarmError<ChainErrorCode> {
  constructor(code: ChainErrorCode, message: string, options: { cause?: unknown } = {}) {
    super(code, message, { cause: options.cause, retryable: code === 'chain_unavailable' });
  }
}
