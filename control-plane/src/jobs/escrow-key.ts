import { encodeAbiParameters, keccak256, stringToBytes, type Address, type Hex } from 'viem';

/** The escrow's job id for one of our jobs: keccak256 of its id's UTF-8 bytes. */
export function escrowJobId(jobId: string): Hex {
  return keccak256(stringToBytes(jobId));
}

/**
 * The key the escrow contract derives for a job: `keccak256(abi.encode(funder, jobId))`
 * (ARCHITECTURE.md section 7), so only the key owner's wallet can fund it.
 */
export function escrowJobKey(wallet: string, jobId: string): Hex {
  return keccak256(encodeAbiParameters([{ type: 'address' }, { type: 'bytes32' }], [wallet as Address, escrowJobId(jobId)]));
}
