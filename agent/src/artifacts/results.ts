import type { KeyObject } from 'node:crypto';
import type { AssignmentOutputRule, AssignmentSpec } from '@gpufarm/shared';
import type { JobExit } from '../runtime/job-state.js';
import { ARTIFACT_UPLOADS_SUFFIX, argvSha256, signRecord, type ExecutionRecord, type SignedRecord } from '@gpufarm/shared';
import { inThreadSources, type ArtifactSources } from './off-thread.js';
import { ArtifactTooLargeError, ruleContentBytes } from './pack.js';
import type { PackedArtifact } from './packer-protocol.js';
import { uploadArtifact, type UploadOptions, type UploadResult } from './upload.js';

/** One output rule's result. `exceeded`: more than maxBytes, nothing uploaded. */
export interface OutputResult {
  path: string;
  /** The artifact name in the upload URL: `output-<index of the rule>`. */
  name: string;
  sha256: string | null;
  sizeBytes: number | null;
  exceeded: boolean;
}

export interface CollectOptions {
  spec: AssignmentSpec;
  exit: JobExit;
  outputDir: string;
  logFile: string;
  /** The upload URL of an artifact by name (`output-0`, …, `log`). */
  urlFor: (name: string) => string;
  /**
   * Ask the control plane how to upload first (`<upload URL>/uploads`): it may hand out
   * presigned URLs of its object store (see `uploadArtifact`'s `planUrl`).
   */
  askPlan?: boolean;
  headers?: Record<string, string>;
  machineKey: KeyObject | string;
  upload?: Pick<UploadOptions, 'attempts' | 'backoffMs' | 'idleTimeoutMs'>;
  /** Where the artifacts are read, packed and hashed (default: this thread). */
  sources?: ArtifactSources;
  log?: (line: string) => void;
}

export interface CollectedResults {
  outputs: OutputResult[];
  log: { sha256: string; sizeBytes: number };
  record: ExecutionRecord;
  signed: SignedRecord;
}

/** Where an artifact goes: its upload URL, and where to ask how first when `askPlan`. */
function target(opts: CollectOptions, name: string): Pick<UploadOptions, 'url' | 'planUrl'> {
  const url = opts.urlFor(name);
  return opts.askPlan ? { url, planUrl: `${url}${ARTIFACT_UPLOADS_SUFFIX}` } : { url };
}

/** Uploads an artifact where `sources` packs it when they can (`OffThreadPacker`), else from their stream here. */
function upload(sources: ArtifactSources, artifact: PackedArtifact, options: Omit<UploadOptions, 'open'>): Promise<UploadResult> {
  if (sources.upload) return sources.upload(artifact, options);
  return uploadArtifact({ ...options, open: () => (artifact.kind === 'rule' ? sources.rule(artifact.outputDir, artifact.rule) : sources.file(artifact.path, artifact.limitBytes)) });
}

/** The artifact name of an output rule. */
export function outputName(index: number): string {
  return `output-${index}`;
}

/**
 * Packs and uploads each output rule (tar, hashed while streamed, never more than its maxBytes),
 * then the log artifact, then builds and signs the execution record. A rule over its limit is
 * reported `exceeded` and not uploaded; an upload that fails for good throws `UploadError`.
 */
export async function collectResults(opts: CollectOptions): Promise<CollectedResults> {
  const say = opts.log ?? (() => undefined);
  const sources = opts.sources ?? inThreadSources;
  const outputs: OutputResult[] = [];
  for (const [index, rule] of opts.spec.outputRules.entries()) {
    outputs.push(await uploadRule(opts, sources, rule, index, say));
  }
  const logUpload = await upload(sources, { kind: 'file', path: opts.logFile, limitBytes: Number.MAX_SAFE_INTEGER }, { ...opts.upload, ...target(opts, 'log'), headers: opts.headers, contentType: 'application/x-ndjson' });
  const log = { sha256: logUpload.sha256, sizeBytes: logUpload.sizeBytes };
  const record: ExecutionRecord = {
    version: 1,
    assignmentId: opts.spec.assignmentId,
    jobId: opts.spec.jobId,
    imageDigest: opts.exit.imageDigest,
    argvSha256: argvSha256(opts.spec.command),
    startedAt: opts.exit.startedAt,
    finishedAt: opts.exit.finishedAt,
    exitCode: opts.exit.exitCode,
    oomKilled: opts.exit.oomKilled,
    timedOut: opts.exit.timedOut,
    outputs: outputs.map((o) => ({ path: o.path, sha256: o.sha256, sizeBytes: o.sizeBytes })),
    log,
  };
  return { outputs, log, record, signed: signRecord(record, opts.machineKey) };
}

async function uploadRule(opts: CollectOptions, sources: ArtifactSources, rule: AssignmentOutputRule, index: number, say: (line: string) => void): Promise<OutputResult> {
  const name = outputName(index);
  const exceeded = { path: rule.path, name, sha256: null, sizeBytes: null, exceeded: true };
  // The common case of too much output, caught before a byte is sent.
  const content = await ruleContentBytes(opts.outputDir, rule);
  if (content > rule.maxBytes) {
    say(`output ${rule.path}: ${content} bytes of files, more than its ${rule.maxBytes}-byte limit: not uploaded`);
    return exceeded;
  }
  try {
    const done = await upload(sources, { kind: 'rule', outputDir: opts.outputDir, rule }, { ...opts.upload, ...target(opts, name), headers: opts.headers, contentType: 'application/x-tar' });
    say(`output ${rule.path}: ${done.sizeBytes} bytes, sha256 ${done.sha256}, uploaded in ${done.attempts} attempt(s)`);
    return { path: rule.path, name, sha256: done.sha256, sizeBytes: done.sizeBytes, exceeded: false };
  } catch (err) {
    if (!(err instanceof ArtifactTooLargeError)) throw err;
    say(`output ${rule.path}: its tar passes the ${rule.maxBytes}-byte limit: not uploaded`);
    return exceeded;
  }
}
