import { GfError } from '@gpufarm/client/browser';
import { BaseError, ContractFunctionRevertedError, UserRejectedRequestError } from 'viem';
import { errorText } from '@gpufarm/shared';

/** What went wrong, for a person: the server's message, a wallet's short message or the revert's error name. */
export function reasonOf(err: unknown): string {
  if (err instanceof GfError) return err.message;
  if (err instanceof BaseError) {
    if (err.walk((e) => e instanceof UserRejectedRequestError)) return 'You rejected the request in your wallet.';
    const revert = err.walk((e) => e instanceof ContractFunctionRevertedError);
    if (revert instanceof ContractFunctionRevertedError) {
      const name = revert.data?.errorName ?? revert.reason;
      return name ? `The contract refused it: ${name}.` : revert.shortMessage;
    }
    return err.shortMessage;
  }
  return errorText(err).split('\n')[0]!;
}

/** The server's request id of a failed call, when there was an answer. */
export function requestIdOf(err: unknown): string | null {
  return err instanceof GfError ? err.requestId : null;
}
