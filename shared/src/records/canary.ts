import { createHash } from 'node:crypto';

/**
 * What the canary image (`images/canary/sha256-chain.c`, run by the agent) writes to /output/result.txt for a job
 * id and a number of iterations n >= 1: d1 = SHA-256(UTF-8 bytes of jobId), dk = SHA-256(d(k-1))
 * over the raw 32-byte digest, then d_n as 64 lower-case hex digits and a newline. The control
 * plane recomputes it to reach RESULT_VERIFIED.
 */
export function canaryResult(jobId: string, iterations: number): string {
  if (!Number.isSafeInteger(iterations) || iterations < 1) throw new RangeError('iterations must be an integer >= 1');
  let d = createHash('sha256').update(jobId, 'utf8').digest();
  for (let k = 1; k < iterations; k++) d = createHash('sha256').update(d).digest();
  return `${d.toString('hex')}\n`;
}
