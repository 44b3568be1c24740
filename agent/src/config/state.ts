import { generateKeyPairSync } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { z } from 'zod';
import { machineTokenSchema } from '@gpufarm/shared';

/**
 * The agent's state directory (mode 0700):
 *
 *   machine.json      0600  server URL, machine id, machine token (gfa_…), public key, enrolled at
 *   machine-key.pem   0600  the ed25519 private key (PKCS#8 PEM); signs execution records
 *   status.json       0644  what the running daemon last saw (link state, health); read by `status`
 *   benchmark.json    0644  the last benchmark result
 *   image-cache.json  0644  the images the agent pulled and manages (`image-cache/index-file.ts`)
 *   spool/            0700  log lines spilled to disk until the server acks them (<assignment>.jsonl)
 *
 * Files are written to a temporary name and renamed, so a crash never leaves half a file.
 */
export const machineFileSchema = z.strictObject({
  server: z.url(),
  machineId: z.string().min(1),
  machineToken: machineTokenSchema,
  publicKeyPem: z.string(),
  enrolledAt: z.string(),
});
export type MachineFile = z.infer<typeof machineFileSchema>;

export const stateFiles = (stateDir: string) => ({
  machine: join(stateDir, 'machine.json'),
  privateKey: join(stateDir, 'machine-key.pem'),
  status: join(stateDir, 'status.json'),
  benchmark: join(stateDir, 'benchmark.json'),
  spool: join(stateDir, 'spool'),
});

export function ensureStateDir(stateDir: string): void {
  mkdirSync(stateDir, { recursive: true, mode: 0o700 });
  chmodSync(stateDir, 0o700);
}

/** Writes a file atomically with the given mode (the mode is set before the rename). */
export function writeFileAtomic(path: string, data: string, mode: number): void {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, data, { mode });
  chmodSync(tmp, mode);
  renameSync(tmp, path);
}

/** A fresh ed25519 key pair as PEM (SPKI public, PKCS#8 private). */
export function newMachineKeyPair(): { publicKeyPem: string; privateKeyPem: string } {
  const { publicKey, privateKey } = generateKeyPairSync('ed25519');
  return {
    publicKeyPem: publicKey.export({ type: 'spki', format: 'pem' }).toString(),
    privateKeyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
  };
}

/** The enrolled machine, or null when this state dir was never enrolled. Throws when the file is corrupt. */
export function readMachineFile(stateDir: string): MachineFile | null {
  let text: string;
  try {
    text = readFileSync(stateFiles(stateDir).machine, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
  const parsed = machineFileSchema.safeParse(JSON.parse(text));
  if (!parsed.success) throw new Error(`${stateFiles(stateDir).machine} is not a valid machine file: ${parsed.error.issues[0]?.message}; enroll again`);
  return parsed.data;
}

export function readJsonFile(path: string): unknown {
  try {
    return JSON.parse(readFileSync(path, 'utf8'));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}
