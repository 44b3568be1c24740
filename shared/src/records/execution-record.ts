import { createHash, createPrivateKey, createPublicKey, sign, verify, type KeyObject } from 'node:crypto';
import { canonicalJson } from './canonical-json.js';

/**
 * What the machine attests about one run, the ground of `EXECUTION_VERIFIED`:
 * signed with the machine's ed25519 key, verified by the control plane with the public key it
 * enrolled. Serialized as canonical JSON (`canonicalJson`); the signature covers those exact
 * UTF-8 bytes.
 */
export interface ExecutionRecord {
  version: 1;
  assignmentId: string;
  jobId: string;
  /** The manifest digest the container ran from. */
  imageDigest: string;
  /** sha256 hex of canonicalJson(command): the argv as assigned. */
  argvSha256: string;
  startedAt: string;
  finishedAt: string;
  exitCode: number | null;
  oomKilled: boolean;
  timedOut: boolean;
  /** Each output rule's artifact (tar) by path; `sha256` null when the rule passed its limit and nothing was uploaded. */
  outputs: Array<{ path: string; sha256: string | null; sizeBytes: number | null }>;
  /** The log artifact's hash and size. */
  log: { sha256: string; sizeBytes: number } | null;
}

/** A record as sent: its canonical text and the base64 ed25519 signature of that text. */
export interface SignedRecord {
  json: string;
  signature: string;
}

/** sha256 hex of the canonical JSON of an argv. */
export function argvSha256(command: string[]): string {
  return createHash('sha256').update(canonicalJson(command)).digest('hex');
}

/** Signs a record with the machine key (a KeyObject, or PEM text of a PKCS#8 ed25519 key). */
export function signRecord(record: ExecutionRecord, privateKey: KeyObject | string): SignedRecord {
  const key = typeof privateKey === 'string' ? createPrivateKey(privateKey) : privateKey;
  if (key.asymmetricKeyType !== 'ed25519') throw new TypeError(`the machine key must be ed25519, got ${key.asymmetricKeyType}`);
  const json = canonicalJson(record);
  return { json, signature: sign(null, Buffer.from(json, 'utf8'), key).toString('base64') };
}

/**
 * Checks a signed record against the machine's public key (KeyObject, or SPKI PEM text) and
 * that its text is canonical. Returns the record when both hold, null otherwise.
 */
export function verifyRecord(signed: SignedRecord, publicKey: KeyObject | string): ExecutionRecord | null {
  const key = typeof publicKey === 'string' ? createPublicKey(publicKey) : publicKey;
  if (key.asymmetricKeyType !== 'ed25519') return null;
  let ok: boolean;
  try {
    ok = verify(null, Buffer.from(signed.json, 'utf8'), key, Buffer.from(signed.signature, 'base64'));
  } catch {
    return null;
  }
  if (!ok) return null;
  try {
    const record = JSON.parse(signed.json) as ExecutionRecord;
    return canonicalJson(record) === signed.json ? record : null;
  } catch {
    return null;
  }
}
