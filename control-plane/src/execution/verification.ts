import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';
import { argvSha256, verifyRecord, type VerificationLevel } from '@gpufarm/shared';
import type { ExecutionConfig } from '../config.js';

/**
 * Verification levels, as pure decisions over what the machine
 * reported and what the server stored, plus the canary's recomputation.
 */

/** The canary's iteration count when the job is the service's canary, else null. */
export function canaryIterations(
  canary: ExecutionConfig['canaryImage'],
  spec: { image: string; imageDigest: string | null; command: string[] },
): number | null {
  if (!canary) return null;
  const at = spec.image.indexOf('@');
  const repository = at >= 0 ? spec.image.slice(0, at) : spec.image.replace(/:[^/:]+$/, '');
  const digest = spec.imageDigest ?? (at >= 0 ? spec.image.slice(at + 1) : null);
  if (repository !== canary.repository || digest !== canary.digest) return null;
  const [program, count, ...rest] = spec.command;
  if (program !== 'sha256-chain' || count === undefined || rest.length > 0 || !/^[1-9]\d{0,8}$/.test(count)) return null;
  return Number(count);
}

/**
 * `sha256^n(jobId)` in hex plus a newline, as the canary writes it (shared `canaryResult`),
 * computed in slices that yield to the event loop so a long chain does not stall the server.
 */
export async function canaryExpected(jobId: string, iterations: number): Promise<string> {
  let d = createHash('sha256').update(jobId, 'utf8').digest();
  for (let k = 1; k < iterations; k++) {
    d = createHash('sha256').update(d).digest();
    if (k % 50_000 === 0) await new Promise<void>((resolve) => setImmediate(resolve));
  }
  return `${d.toString('hex')}\n`;
}

/** The text of `name` at the top of a tar stream (at most `maxBytes`), or null when absent. */
export async function readTarEntry(source: Readable, name: string, maxBytes = 4096): Promise<string | null> {
  const extract = tar.extract();
  let found: string | null = null;
  extract.on('entry', (header, stream, next) => {
    const entryName = header.name.replace(/^\.\//, '');
    if (found === null && entryName === name && header.type === 'file' && (header.size ?? 0) <= maxBytes) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: unknown) => chunks.push(c as Buffer));
      stream.on('end', () => {
        found = Buffer.concat(chunks).toString('utf8');
        next();
      });
    } else {
      stream.on('end', () => next());
      stream.resume();
    }
  });
  // pipeline: a failure of either side destroys both, so no file stays open.
  await pipeline(source, extract);
  return found;
}

export interface ExecutionEvidence {
  assignmentId: string;
  jobId: string;
  /** The digest the job pinned (null: not pinned). */
  pinnedDigest: string | null;
  /** The digest the machine says it ran. */
  ranDigest: string | null;
  command: string[];
  exitCode: number | null;
  /** Every output the machine reported, with the server's hash of what it stored (null: nothing stored). */
  outputs: Array<{ path: string; hostSha256: string; serverSha256: string | null }>;
  record: { json: string; signature: string } | null;
  publicKeyPem: string | null;
}

/** True when every reported output was stored with the hash the machine reported. */
export function allHashesMatch(outputs: ExecutionEvidence['outputs']): boolean {
  return outputs.length > 0 && outputs.every((o) => o.serverSha256 !== null && o.serverSha256 === o.hostSha256);
}

/**
 * EXECUTION_VERIFIED holds when the hashes match, the digest run is the pinned one, and the
 * machine's signed record verifies with its enrolled key and says the same as its report.
 */
export function executionVerified(e: ExecutionEvidence): boolean {
  if (!allHashesMatch(e.outputs) || !e.pinnedDigest || e.ranDigest !== e.pinnedDigest || !e.record || !e.publicKeyPem) return false;
  let record;
  try {
    record = verifyRecord(e.record, e.publicKeyPem);
  } catch {
    return false;
  }
  if (!record) return false;
  const recorded = new Map(record.outputs.map((o) => [o.path, o.sha256]));
  return (
    record.assignmentId === e.assignmentId &&
    record.jobId === e.jobId &&
    record.imageDigest === e.pinnedDigest &&
    record.argvSha256 === argvSha256(e.command) &&
    record.exitCode === e.exitCode &&
    e.outputs.every((o) => recorded.get(o.path) === o.serverSha256)
  );
}

/**
 * The level a finished job reaches; `canaryMatched` is null when the job is not the canary. A
 * canary whose result the server could not reproduce is only host-reported, whatever else holds.
 */
export function verificationLevel(e: ExecutionEvidence, canaryMatched: boolean | null): VerificationLevel {
  if (canaryMatched === false) return 'HOST_REPORTED';
  if (canaryMatched === true && allHashesMatch(e.outputs)) return 'RESULT_VERIFIED';
  return executionVerified(e) ? 'EXECUTION_VERIFIED' : 'HOST_REPORTED';
}
