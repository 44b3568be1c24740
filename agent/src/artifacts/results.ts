import type { KeyObject } from 'node:crypto';
import type { AssignmentOutputNote, AssignmentOutputRule, AssignmentSpec } from '@gpufarm/shared';
import type { JobExit } from '../job/state.js';
import { ARTIFACT_UPLOADS_SUFFIX, OUTPUT_NOTE_MAX_CHARS } from '@gpufarm/shared';
import { argvSha256, signRecord, type ExecutionRecord, type SignedRecord } from '@gpufarm/shared/node';
import { inThreadSources, type ArtifactSources } from './off-thread.js';
import { OutputFilesError, surveyOutputRule, type SkippedEntry } from './output-tree.js';
import { ArtifactTooLargeError, packingUser, type PackAs } from './pack.js';
import type { PackedArtifact } from './packer-protocol.js';
import { uploadArtifact, type UploadOptions, type UploadResult } from './upload.js';
import { silentLog, type AgentLog } from '../logger/logger.js';

/** One output rule's result. `exceeded`: more than maxBytes, nothing uploaded. */
export interface OutputResult {
  path: string;
  /** The artifact name in the upload URL: `output-<index of the rule>`. */
  name: string;
  sha256: string | null;
  sizeBytes: number | null;
  exceeded: boolean;
  /** Why nothing was uploaded, or what the upload leaves out, for the job's log; null: nothing to say. */
  note: AssignmentOutputNote | null;
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
  /**
   * Whom the output's files are read as (`packingUser`, the default: the job's user when the
   * agent is root); null: as the agent.
   */
  packAs?: PackAs | null;
  /** The job's daemon log (a child with its ids): what was uploaded, and what was not. */
  log?: AgentLog;
}

export interface CollectedResults {
  outputs: OutputResult[];
  /** The outputs' notes (`assignment.status.outputNotes`). */
  notes: AssignmentOutputNote[];
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
  return uploadArtifact({ ...options, open: () => (artifact.kind === 'rule' ? sources.rule(artifact.outputDir, artifact.rule, artifact.packAs) : sources.file(artifact.path, artifact.limitBytes)) });
}

/** The artifact name of an output rule. */
export function outputName(index: number): string {
  return `output-${index}`;
}

/**
 * Packs and uploads each output rule (tar, hashed while streamed, never more than its maxBytes,
 * no symlink followed, read as the job's user where the agent can switch users), then the log
 * artifact, then builds and signs the execution record. A rule over its limit, or whose files
 * the job left unpackable (`OutputFilesError`), is not uploaded and has a note saying why: the
 * job's doing, so the job still completes. An upload that fails for good throws `UploadError`,
 * the machine's failure.
 */
export async function collectResults(opts: CollectOptions): Promise<CollectedResults> {
  const say = opts.log ?? silentLog;
  const sources = opts.sources ?? inThreadSources;
  const packAs = opts.packAs === undefined ? await packingUser(opts.outputDir) : opts.packAs;
  const outputs: OutputResult[] = [];
  for (const [index, rule] of opts.spec.outputRules.entries()) {
    outputs.push(await uploadRule(opts, sources, rule, index, packAs, say));
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
  const notes = outputs.flatMap((o) => (o.note ? [o.note] : []));
  return { outputs, notes, log, record, signed: signRecord(record, opts.machineKey) };
}

/** Names of skipped entries a note lists before it says how many more. */
const NOTE_NAMES = 5;

async function uploadRule(opts: CollectOptions, sources: ArtifactSources, rule: AssignmentOutputRule, index: number, packAs: PackAs | null, say: AgentLog): Promise<OutputResult> {
  const name = outputName(index);
  const notStored = (kind: 'over_limit' | 'unpackable', message: string): OutputResult => {
    say.warn(`output ${rule.path}: ${message}: not uploaded`);
    return { path: rule.path, name, sha256: null, sizeBytes: null, exceeded: kind === 'over_limit', note: { path: rule.path, name, kind, message: message.slice(0, OUTPUT_NOTE_MAX_CHARS) } };
  };
  try {
    // The common case of too much output, caught before a byte is sent; and the entries left out.
    const survey = await surveyOutputRule(opts.outputDir, rule);
    if (survey.contentBytes > rule.maxBytes) return notStored('over_limit', `${survey.contentBytes} bytes of files, more than its ${rule.maxBytes}-byte limit`);
    const done = await upload(sources, { kind: 'rule', outputDir: opts.outputDir, rule, packAs }, { ...opts.upload, ...target(opts, name), headers: opts.headers, contentType: 'application/x-tar' });
    say.info(`output ${rule.path}: ${done.sizeBytes} bytes, sha256 ${done.sha256}, uploaded in ${done.attempts} attempt(s)`);
    const note = skippedNote(rule, name, survey.skipped);
    if (note) say.warn(`output ${rule.path}: ${note.message}`);
    return { path: rule.path, name, sha256: done.sha256, sizeBytes: done.sizeBytes, exceeded: false, note };
  } catch (err) {
    if (err instanceof ArtifactTooLargeError) return notStored('over_limit', `its tar passes the ${rule.maxBytes}-byte limit`);
    if (err instanceof OutputFilesError) return notStored('unpackable', err.message);
    throw err;
  }
}

/** The note of an artifact stored without what the walk left out (special files, names that are not UTF-8), or null. */
function skippedNote(rule: AssignmentOutputRule, name: string, skipped: SkippedEntry[]): AssignmentOutputNote | null {
  if (skipped.length === 0) return null;
  const listed = skipped.slice(0, NOTE_NAMES).map((s) => `${s.path} (${s.what})`).join(', ');
  const more = skipped.length > NOTE_NAMES ? ` and ${skipped.length - NOTE_NAMES} more` : '';
  const why = ': only regular files, folders and symlinks are archived, and nothing else is opened';
  return { path: rule.path, name, kind: 'skipped', message: `left out ${listed.slice(0, OUTPUT_NOTE_MAX_CHARS - why.length - more.length - 9)}${more}${why}` };
}
