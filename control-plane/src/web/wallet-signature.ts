import {
  encodeDeployData,
  erc6492SignatureValidatorAbi,
  erc6492SignatureValidatorByteCode,
  hashMessage,
  hexToBool,
  isAddressEqual,
  isErc6492Signature,
  isErc8010Signature,
  recoverMessageAddress,
  size,
  type Chain,
  type Client,
  type Hex,
  type Transport,
} from 'viem';
import { call } from 'viem/actions';
import { countAgainst, hashClientAddress } from '../http/rate-limit.js';
import type { Limit } from '../http/rate-limit-limits.js';
import type { RateLimitStore } from '../http/rate-limit-store.js';

/**
 * A sign-in signature checked at a bounded cost. An EOA's signature is recovered here, with no
 * chain call. Anything else (an ERC-1271 wallet, or an ERC-6492 wrapper whose factory the chain
 * runs to deploy the wallet first: code any anonymous visitor chooses) goes to the chain's
 * `eth_call` of the ERC-6492 validator (deployed in the call itself) with a gas cap, and only
 * within a per-client and a service-wide budget of such calls. ERC-8010 (EIP-7702) wrappers are
 * refused. See "Sign-in signatures at a bounded cost" in docs/decisions.md.
 */

/** The most gas one contract-wallet check may burn: deploying a smart wallet through its factory and its `isValidSignature`. */
export const SIGNATURE_CHECK_GAS = 2_000_000n;
/** The longest signature the sign-in route takes, in bytes: an ERC-6492 wrapper (factory call and a passkey signature) fits in a few KiB. */
export const MAX_SIGNATURE_BYTES = 8192;
/** Contract-wallet checks one client address may ask the chain for. */
export const CHAIN_CHECKS_PER_CLIENT: Limit = { name: 'sign_in_chain_checks', max: 10, windowMs: 60_000 };
/** Contract-wallet checks of all clients together (per rate-limit store: the service's, shared by its replicas). */
export const CHAIN_CHECKS_ALL_CLIENTS: Limit = { name: 'sign_in_chain_checks_all', max: 300, windowMs: 60_000 };

export interface WalletSignatureDeps {
  client: Client<Transport, Chain>;
  /** Where the budgets of chain checks are counted, and the salt that hashes client addresses. */
  limits: { store: RateLimitStore; clientHashSalt: string };
  now?: () => number;
}

/** Whether the signature is the address's; `refusal` says why not when the reason is not simply a wrong signature. */
export type SignatureVerdict = { valid: true } | { valid: false; refusal: string | null };

/**
 * Checks that `signature` is `address`'s signature of the SIWE `message` (whose fields the
 * caller checked already). Throws 429 `rate_limited` when the check needs the chain and the
 * client's or the service's budget of chain checks is spent.
 */
export async function checkWalletSignature(
  deps: WalletSignatureDeps,
  params: { address: Hex; message: string; signature: Hex; clientAddress: string },
): Promise<SignatureVerdict> {
  const { address, message, signature } = params;
  if (isErc8010Signature(signature)) return { valid: false, refusal: 'ERC-8010 (EIP-7702) signatures are not accepted at sign-in' };
  if (!isErc6492Signature(signature) && (size(signature) === 65 || size(signature) === 64)) {
    const recovered = await recoverMessageAddress({ message, signature }).catch(() => null);
    if (recovered !== null && isAddressEqual(recovered, address)) return { valid: true };
  }
  const at = (deps.now ?? Date.now)();
  await countAgainst(deps.limits.store, CHAIN_CHECKS_PER_CLIENT, `addr:${hashClientAddress(deps.limits.clientHashSalt, params.clientAddress)}`, at);
  await countAgainst(deps.limits.store, CHAIN_CHECKS_ALL_CLIENTS, 'all', at);
  // The validator answers 0x01 for a valid signature: ERC-1271 on a deployed wallet, or the
  // 6492 factory call first; a revert, running out of gas or no answer is a refusal.
  const data = encodeDeployData({ abi: erc6492SignatureValidatorAbi, bytecode: erc6492SignatureValidatorByteCode, args: [address, hashMessage(message), signature] });
  const answer = await call({ ...deps.client, ccipRead: false }, { data, gas: SIGNATURE_CHECK_GAS }).catch(() => null);
  if (answer?.data !== undefined && size(answer.data) === 1 && hexToBool(answer.data)) return { valid: true };
  // Out of gas reads as any other refusal: the chain says only that the call failed.
  return { valid: false, refusal: null };
}
