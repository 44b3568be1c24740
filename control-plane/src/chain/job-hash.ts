import { keccak_256 } from '@noble/hashes/sha3';
import type { Address, Hex } from 'viem';
import { hexWord, uintWord } from './abi-words.js';

/**
 * The job hash the customer's createJob carries and fund-confirm checks: keccak256 of
 * `abi.encode(bytes32 escrowJobId, bytes32 specHash, address token, uint256 maxPayment,
 * uint256 chainId, address escrow)`, the canonical terms. Pure.
 */
export function jobHash(terms: { escrowJobId: Hex; specHashHex: string; token: Address; maxPayment: bigint; chainId: number; escrow: Address }): Hex {
  const encoded =
    hexWord(terms.escrowJobId) + hexWord(`0x${terms.specHashHex}`) + hexWord(terms.token) + uintWord(terms.maxPayment) + uintWord(BigInt(terms.chainId)) + hexWord(terms.escrow);
  return `0x${Buffer.from(keccak_256(Buffer.from(encoded, 'hex'))).toString('hex')}`;
}
