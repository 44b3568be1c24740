import { encodeAbiParameters, keccak256, type Address, type Hex } from 'viem';

const TERMS = [
  { type: 'bytes32', name: 'escrowJobId' },
  { type: 'bytes32', name: 'specHash' },
  { type: 'address', name: 'token' },
  { type: 'uint256', name: 'maxPayment' },
  { type: 'uint256', name: 'chainId' },
  { type: 'address', name: 'escrow' },
] as const;

/**
 * The job hash the customer's createJob carries and fund-confirm checks: keccak256 of the ABI
 * encoding of the canonical terms (escrow job id, sha256 of the accepted spec, token, maxPayment,
 * chain id, escrow address). Pure.
 */
export function jobHash(terms: { escrowJobId: Hex; specHashHex: string; token: Address; maxPayment: bigint; chainId: number; escrow: Address }): Hex {
  return keccak256(
    encodeAbiParameters(TERMS, [terms.escrowJobId, `0x${terms.specHashHex}`, terms.token, terms.maxPayment, BigInt(terms.chainId), terms.escrow]),
  );
}
