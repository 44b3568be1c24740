import { createHash } from 'node:crypto';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';
import type { VerificationLevel } from '@gpufarm/shared';
import { argvSha256, verifyRecord, type ExecutionRecord } from '@gpufarm/shared/node';
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

/**
 * The text of the regular file `name` when it is the only thing but folders in the tar stream
 * (at most `maxBytes`), else null: absent, twice (tar readers keep the last copy, so checking
 * the first would vouch for bytes a customer never sees), not a regular file, or beside other
 * files the check would not cover.
 */
export async function readSoleTarFile(source: Readable, name: string, maxBytes = 4096): Promise<string | null> {
  const extract = tar.extract();
  let found: string | null = null;
  let sole = true;
  extract.on('entry', (header, stream, next) => {
    const entryName = header.name.replace(/^(\.\/)+/, '').replace(/\/+$/, '');
    if (header.type === 'directory') {
      stream.on('end', () => next());
      stream.resume();
      return;
    }
    if (found === null && sole && entryName === name && header.type === 'file' && (header.size ?? 0) <= maxBytes) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: unknown) => chunks.push(c as Buffer));
      stream.on('end', () => {
        found = Buffer.concat(chunks).toString('utf8');
        next();
      });
      return;
    }
    sole = false;
    stream.on('end', () => next());
    stream.resume();
  });
  // pipeline: a failure of either side destroys both, so no file stays open.
  await pipeline(source, extract);
  return sole ? found : null;
}

export interface ExecutionEvidence {
  assignmentId: string;
  jobId: string;
  /** The digest the job pinned (null: not pinned). */
  pinnedDigest: string | null;
  /** The digest the machine says it ran. */
  ranDigest: string | null;
  command: string[];
  /** The run as the machine reported it (`finished`): times, exit code, OOM kill, timeout. */
  startedAt: Date | null;
  finishedAt: Date | null;
  exitCode: number | null;
  oomKilled: boolean | null;
  timedOut: boolean | null;
  /** Every output the machine reported, with the server's hash of what it stored (null: nothing stored). */
  outputs: Array<{ path: string; hostSha256: string; serverSha256: string | null }>;
  /** The server's hash of the stored log artifact (null: none stored). */
  logServerSha256: string | null;
  record: { json: string; signature: string } | null;
  publicKeyPem: string | null;
  /** What the service knew of the machine's GPUs over the run. */
  machine: MachineStanding;
}

/** The machine's standing behind an execution record. */
export interface MachineStanding {
  simulated: boolean;
  verification: string;
  /** Verified before the job was offered to it, and still verified now (a change of driver or GPUs unverifies it). */
  verifiedThroughout: boolean;
}

/** The outcome of the canary's recomputation: matched, or why not. */
export type CanaryCheck = { matched: true } | { matched: false; gap: string };

/** A level and why: what backs it, or for HOST_REPORTED the first evidence that was missing. */
export interface Verdict {
  level: VerificationLevel;
  reason: string;
}

/** True when every reported output was stored with the hash the machine reported. */
export function allHashesMatch(outputs: ExecutionEvidence['outputs']): boolean {
  return outputs.length > 0 && outputs.every((o) => o.serverSha256 !== null && o.serverSha256 === o.hostSha256);
}

const sameInstant = (text: string, at: Date | null) => at !== null && Date.parse(text) === at.getTime();

/** The first field in which the signed record and the machine's report (or the server's stored bytes) differ, or null. */
function recordDifference(record: ExecutionRecord, e: ExecutionEvidence): string | null {
  if (record.assignmentId !== e.assignmentId) return 'assignment';
  if (record.jobId !== e.jobId) return 'job';
  if (record.imageDigest !== e.pinnedDigest) return 'image digest';
  if (record.argvSha256 !== argvSha256(e.command)) return 'command';
  if (!sameInstant(record.startedAt, e.startedAt)) return 'start';
  if (!sameInstant(record.finishedAt, e.finishedAt)) return 'finish';
  if (record.exitCode !== e.exitCode) return 'exit code';
  if (record.oomKilled !== (e.oomKilled ?? false)) return 'OOM kill';
  if (record.timedOut !== (e.timedOut ?? false)) return 'timeout';
  // The record's outputs with a hash are exactly the ones reported, each with the stored bytes' hash.
  const signed = record.outputs.filter((o) => o.sha256 !== null);
  if (signed.length !== e.outputs.length || !e.outputs.every((o) => signed.some((r) => r.path === o.path && r.sha256 === o.serverSha256))) return 'outputs';
  if ((record.log?.sha256 ?? null) !== e.logServerSha256) return 'log';
  return null;
}

/**
 * Why the evidence does not back EXECUTION_VERIFIED, or null when it does: every output stored
 * with the hash the machine reported, the pinned digest run, a record signed by the machine's
 * enrolled key that says what the machine reported, and a machine with real GPUs whose
 * verification held over the whole run. The signature shows who wrote the record, not that it is true.
 */
export function executionGap(e: ExecutionEvidence): string | null {
  if (e.outputs.length === 0) return 'no output was stored';
  if (!allHashesMatch(e.outputs)) return 'an output the machine reported differs from the bytes the server stored';
  if (!e.pinnedDigest) return 'the job did not pin its image by digest';
  if (e.ranDigest !== e.pinnedDigest) return `the machine reports running ${e.ranDigest ?? 'no digest'}, not the pinned ${e.pinnedDigest}`;
  if (!e.record) return 'the machine sent no signed execution record';
  if (!e.publicKeyPem) return 'the machine has no enrolled key';
  let record: ExecutionRecord | null;
  try {
    record = verifyRecord(e.record, e.publicKeyPem);
  } catch {
    record = null;
  }
  if (!record) return "the execution record's signature does not verify with the machine's enrolled key";
  const differs = recordDifference(record, e);
  if (differs !== null) return `the signed execution record differs from the machine's report (${differs})`;
  if (e.machine.simulated) return 'the machine is simulated: it has no GPUs the service verified';
  if (!e.machine.verifiedThroughout) return `the machine's GPU verification did not hold over the whole run (now ${e.machine.verification})`;
  return null;
}

/**
 * The level a finished job reaches and why; `canary` is null when the job is not a recomputed
 * canary. A canary whose result the server could not reproduce is only host-reported, whatever
 * else holds; a reproduced one needs every output stored with the reported hash.
 */
export function verify(e: ExecutionEvidence, canary: CanaryCheck | null): Verdict {
  if (canary && !canary.matched) return { level: 'HOST_REPORTED', reason: canary.gap };
  if (canary?.matched && allHashesMatch(e.outputs)) return { level: 'RESULT_VERIFIED', reason: "the server recomputed the canary's result.txt and the stored output holds exactly that" };
  const gap = executionGap(e);
  if (gap === null) return { level: 'EXECUTION_VERIFIED', reason: "hashes match, and the machine's enrolled key signed a record of running the pinned image that agrees with its report" };
  return { level: 'HOST_REPORTED', reason: gap };
}
