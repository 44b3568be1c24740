import { ApiError, assignmentInputSchema, assignmentSpecSchema, fieldDetail, LOG_ARTIFACT_MAX_BYTES } from '@gpufarm/shared';
import type { FastifyPluginAsync, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { requireMachine } from '../auth/machine-tokens.js';
import type { ExecutionConfig } from '../config.js';
import type { Database } from '../db/database.js';
import { parseParams } from '../http/parse.js';
import { BlobTooLargeError, type BlobStore } from './blob-store.js';
import { deleteIfUnreferenced } from './expiry.js';
import { artifactLink, isExpired, newArtifactId } from './metadata.js';
import { bodyStream, checkDeclaredLength, declaredSha256, takeRawBodies, tooLarge } from './raw-body.js';
import type { UrlSigner } from './signing.js';
import { findArtifactById, findAssignmentArtifact, findUploadTarget, upsertAssignmentArtifact, type UploadTarget } from './store.js';

export interface AgentArtifactRoutesOptions {
  db: Database;
  blobs: BlobStore;
  /** Signs the URL an input download is redirected to (unless the store presigns its own). */
  signer: UrlSigner;
  config: Pick<ExecutionConfig, 'artifactTtlDays'>;
}

/** The path the agent PUTs its artifacts to (agent/src/daemon/runner-setup.ts). */
export const AGENT_UPLOAD_PATH = '/agent/v1/assignments/:id/outputs/:name';
/** The header, or trailer, with the agent's SHA-256 of the body. */
export const UPLOAD_SHA256_HEADER = 'x-content-sha256';
/** Where an agent fetches an input of its assignment: a 302 to a signed URL of the bytes, valid 120 s. */
export const AGENT_INPUT_PATH = '/agent/v1/assignments/:id/inputs/:mountName';
/** How long the signed URL an input download is redirected to lives (the spec's 120 s). */
export const INPUT_URL_TTL_SECONDS = 120;

/** The absolute URL of `AGENT_INPUT_PATH` for one input, as it goes into the assignment. */
export function agentInputUrl(publicUrl: string, assignmentId: string, mountName: string): string {
  return `${publicUrl}/agent/v1/assignments/${encodeURIComponent(assignmentId)}/inputs/${encodeURIComponent(mountName)}`;
}

/** How long after its assignment finished (or failed) an agent may still upload, for a retry. */
export const LATE_UPLOAD_MS = 15 * 60 * 1000;

const assignmentId = z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'is not an assignment id');
const uploadParams = z.object({
  id: assignmentId,
  name: z.string().regex(/^(output-(0|[1-9][0-9]?)|log)$/, 'must be output-<rule index> or log'),
});
const inputParams = z.object({ id: assignmentId, mountName: assignmentInputSchema.shape.mountName });

/** What an agent upload answers (201). `hashesMatch` is null when nothing was declared. */
export interface AgentUploadAnswer {
  artifactId: string;
  sha256: string;
  sizeBytes: number;
  declaredSha256: string | null;
  hashesMatch: boolean | null;
}

/**
 * The calling machine (its token) and the assignment `id` if it is that machine's; the spec's
 * 401s for a missing or unknown token, `not_found` for another machine's assignment.
 */
async function machineAssignment(db: Database, request: FastifyRequest, id: string): Promise<UploadTarget> {
  const machine = requireMachine(request);
  const target = await findUploadTarget(db, id);
  if (!target || target.machine_id !== machine.machineId) throw new ApiError('not_found', `No assignment ${id} on this machine.`);
  return target;
}

/** An assignment open for uploads of `name`, that name's byte limit, and how errors call the upload. */
export interface OpenUpload {
  target: UploadTarget;
  name: string;
  maxBytes: number;
  what: string;
}

/**
 * The calling machine's assignment `params.id` if it takes an upload of `params.name` now
 * (accepted, running, or finished or failed within LATE_UPLOAD_MS), with the upload's limit:
 * an output rule's `maxBytes` (the agent's tar stream counts against it, headers included) or
 * LOG_ARTIFACT_MAX_BYTES.
 */
export async function openUpload(db: Database, request: FastifyRequest): Promise<OpenUpload> {
  const { id, name } = parseParams(uploadParams, request.params);
  const target = await machineAssignment(db, request, id);
  const endedAt = target.finished_at ?? target.updated_at;
  const open =
    target.state === 'accepted' ||
    target.state === 'running' ||
    ((target.state === 'finished' || target.state === 'failed') && Date.now() - endedAt.getTime() <= LATE_UPLOAD_MS);
  if (!open) {
    throw new ApiError('conflict', `The assignment ${id} is ${target.state}; it takes no uploads.`, { details: [fieldDetail('state', `is ${target.state}`, { subject: true })] });
  }
  let maxBytes = LOG_ARTIFACT_MAX_BYTES;
  if (name !== 'log') {
    const index = Number(name.slice('output-'.length));
    const rules = assignmentSpecSchema.shape.outputRules.safeParse((target.spec as { outputRules?: unknown } | null)?.outputRules);
    const rule = rules.success ? rules.data[index] : undefined;
    if (!rule) throw new ApiError('not_found', `The assignment ${id} has no output rule ${index}.`);
    maxBytes = rule.maxBytes;
  }
  return { target, name, maxBytes, what: name === 'log' ? 'log upload' : `upload of ${name}` };
}

/**
 * Once the assignment finished, its result was taken from what was stored: a late retry may
 * repeat those bytes (`sha256`), never change them (409).
 */
export async function checkLateUpload(db: Database, target: UploadTarget, name: string, sha256: string): Promise<void> {
  if (target.state !== 'finished' && target.state !== 'failed') return;
  const kept = await findAssignmentArtifact(db, target.id, name);
  if (kept && kept.sha256 !== sha256) {
    throw new ApiError('conflict', `The assignment ${target.id} is ${target.state} and its ${name} is stored with other bytes (sha256 ${kept.sha256}); it cannot change now.`, {
      details: [fieldDetail('body', `hashes to ${sha256}, the stored ${name} to ${kept.sha256}`, { subject: true })],
    });
  }
}

/** Writes (or replaces) the artifact row of a stored upload and answers it. */
export async function recordUpload(
  deps: { db: Database; blobs: BlobStore; config: Pick<ExecutionConfig, 'artifactTtlDays'> },
  target: UploadTarget,
  name: string,
  stored: { sha256: string; sizeBytes: number },
  declared: string | null,
): Promise<AgentUploadAnswer> {
  const { row, replacedSha256 } = await upsertAssignmentArtifact(deps.db, {
    id: newArtifactId(),
    accountId: target.account_id,
    jobId: target.job_id,
    assignmentId: target.id,
    kind: name === 'log' ? 'log' : 'output',
    name,
    filename: name === 'log' ? `${target.job_id}-log.ndjson` : `${target.job_id}-${name}.tar`,
    sizeBytes: stored.sizeBytes,
    sha256: stored.sha256,
    declaredSha256: declared,
    ttlDays: deps.config.artifactTtlDays,
  });
  if (replacedSha256) await deleteIfUnreferenced({ db: deps.db, blobs: deps.blobs }, replacedSha256);
  return {
    artifactId: row.id,
    sha256: row.sha256,
    sizeBytes: Number(row.size_bytes),
    declaredSha256: declared,
    hashesMatch: declared === null ? null : declared === row.sha256,
  };
}

/**
 * `PUT /agent/v1/assignments/:id/outputs/:name`: an agent streams
 * an output (`output-<rule index>`, a tar of at most the rule's maxBytes) or the job's log
 * (`log`, at most LOG_ARTIFACT_MAX_BYTES). Machine token auth; the assignment must be this
 * machine's and accepted, running, or finished (failed) within LATE_UPLOAD_MS. The server
 * hashes what it stores; the agent's hash (trailer `X-Content-Sha256`, or the header on a retry)
 * is recorded beside it and a mismatch is stored all the same (the server's hash is the
 * truth; the result then says `hashesMatch: false`). The same name again replaces the row
 * (an agent's retry) while the assignment runs; once it finished, only the same bytes again.
 *
 * `GET /agent/v1/assignments/:id/inputs/:mountName`: an input of the machine's offered,
 * accepted or running assignment, as a 302 to a signed URL valid 120 s (the store's presigned
 * one when it has them), asked for when the agent
 * downloads it (the assignment carries this route, not a signed URL).
 */
export const agentArtifactRoutes: FastifyPluginAsync<AgentArtifactRoutesOptions> = async (app, { db, blobs, signer, config }) => {
  takeRawBodies(app);

  app.put(AGENT_UPLOAD_PATH, { config: { auth: 'machine' } }, async (request, reply) => {
    const { target, name, maxBytes, what } = await openUpload(db, request);
    checkDeclaredLength(request, maxBytes, () => tooLarge(maxBytes, what));
    const headerHash = declaredSha256(request.headers[UPLOAD_SHA256_HEADER], 'header');

    let stored: { sha256: string; sizeBytes: number };
    try {
      stored = await blobs.put(bodyStream(request.raw), { maxBytes });
    } catch (err) {
      if (err instanceof BlobTooLargeError) throw tooLarge(err.maxBytes, what);
      throw err;
    }
    let declared: string | null;
    try {
      declared = declaredSha256(request.raw.trailers[UPLOAD_SHA256_HEADER], 'trailer') ?? headerHash;
      await checkLateUpload(db, target, name, stored.sha256);
    } catch (err) {
      await deleteIfUnreferenced({ db, blobs }, stored.sha256);
      throw err;
    }
    return reply.code(201).send(await recordUpload({ db, blobs, config }, target, name, stored, declared));
  });

  app.get(AGENT_INPUT_PATH, { config: { auth: 'machine' } }, async (request, reply) => {
    const { id, mountName } = parseParams(inputParams, request.params);
    const target = await machineAssignment(db, request, id);
    if (target.state !== 'offered' && target.state !== 'accepted' && target.state !== 'running') {
      throw new ApiError('conflict', `The assignment ${id} is ${target.state}; its inputs are no longer handed out.`, { details: [fieldDetail('state', `is ${target.state}`, { subject: true })] });
    }
    const inputs = assignmentSpecSchema.shape.inputs.safeParse((target.spec as { inputs?: unknown } | null)?.inputs);
    const input = inputs.success ? inputs.data.find((i) => i.mountName === mountName) : undefined;
    if (!input) throw new ApiError('not_found', `The assignment ${id} has no input ${mountName}.`);
    const row = await findArtifactById(db, input.artifactId);
    if (!row || row.account_id !== target.account_id) throw new ApiError('not_found', `No input artifact ${input.artifactId}.`);
    if (isExpired(row)) throw new ApiError('gone', `The input artifact ${row.id} expired at ${row.expires_at.toISOString()}.`);
    reply.header('Cache-Control', 'no-store');
    return reply.redirect((await artifactLink(row, { blobs, signer }, INPUT_URL_TTL_SECONDS)).url, 302);
  });
};
