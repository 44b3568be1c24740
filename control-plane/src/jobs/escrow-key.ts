import { keccak_256 } from '@noble/hashes/sha3';

const toHex = (bytes: Uint8Array) => `0x${Buffer.from(bytes).toString('hex')}` as const;

const escrowJobIdBytes = (jobId: string) => keccak_256(Buffer.from(jobId, 'utf8'));

/** The escrow's job id for one of our jobs: keccak256 of its id's UTF-8 bytes. */
export function escrowJobId(jobId: string): `0x${string}` {
  return toHex(escrowJobIdBytes(jobId));
}

/**
 * The key the escrow contract derives for a job: `keccak256(abi.encode(funder, jobId))`, so
 * only the key owner's wallet can fund it. `abi.encode` of an
 * address and a bytes32 is the address left-padded to 32 bytes, then the 32 bytes.
 */
export function escrowJobKey(wallet: string, jobId: string): `0x${string}` {
  const encoded = new Uint8Array(64);
  encoded.set(Buffer.from(wallet.slice(2).toLowerCase(), 'hex'), 12);
  encoded.set(escrowJobIdBytes(jobId), 32);
  return toHex(keccak_256(encoded));
}
