/**
 * The packer's child process (`packOutputRule` with `packAs`): packs one output rule as a tar to
 * its stdout, reading the job's files as the job's user. It starts as root (its code need not be
 * readable by that user), opens the output folder, then gives root up for the job's uid and gid
 * with no supplementary group before it reads anything under that folder: every file is opened
 * with the job's own permissions, so even a fault in the walk could not read what the job's user
 * may not. Once done it reports on its fd 3 (`packChildReport`): `{"ok": true}` once the
 * whole tar is written, or `{"error": …, "unpackable": …}`, `unpackable` when the job's own
 * files were the cause.
 */
import { writeSync } from 'node:fs';
import { pipeline } from 'node:stream/promises';
import tar from 'tar-stream';
import { errorText, OUTPUT_NOTE_MAX_CHARS } from '@gpufarm/shared';
import { openOutputRoot, OutputFilesError } from './output-tree.js';
import { packChildRequest, packRuleInto, type PackChildReport, type PackChildRequest } from './pack.js';

/** Where the child reports (the parent's fourth stdio pipe). */
const REPORT_FD = 3;

async function main(): Promise<void> {
  const request = packChildRequest.parse(JSON.parse(process.argv[2] ?? 'null'));
  const root = await openOutputRoot(request.outputDir);
  try {
    becomeUser(request);
    const pack = tar.pack();
    // process.stdout, not a write stream on fd 1: the pipe may be non-blocking, which only the
    // former waits out (an fs write stream gives up after a few EAGAINs).
    const sent = pipeline(pack, process.stdout);
    const filled = packRuleInto(pack, root, request.rule).catch((err: Error) => {
      pack.destroy(err);
      throw err;
    });
    await Promise.all([filled, sent]);
  } finally {
    await root.close();
  }
}

/** Gives up root for `uid:gid` for good (setuid from root to another uid also drops every capability). */
function becomeUser({ uid, gid }: PackChildRequest): void {
  if (!process.setgroups || !process.setgid || !process.setuid || !process.getgroups) throw new Error('this platform cannot switch users');
  process.setgroups([]);
  process.setgid(gid);
  process.setuid(uid);
  // Node lists the effective group among the supplementary ones.
  const groups = process.getgroups();
  if (process.getuid?.() !== uid || process.geteuid?.() !== uid || process.getgid?.() !== gid || process.getegid?.() !== gid || groups.some((g) => g !== gid)) {
    throw new Error(`running as ${process.geteuid?.()}:${process.getegid?.()} (groups ${groups.join(',')}), not ${uid}:${gid}`);
  }
  let regained = false;
  try {
    process.setuid(0);
    regained = true;
  } catch {
    // Refused, as it must be.
  }
  if (regained) throw new Error(`root could be taken back after switching to ${uid}:${gid}`);
}

function report(said: PackChildReport): void {
  writeSync(REPORT_FD, `${JSON.stringify(said)}\n`);
}

main().then(
  () => report({ ok: true }),
  (err: unknown) => {
    const message = errorText(err);
    report({ error: message.slice(0, OUTPUT_NOTE_MAX_CHARS), unpackable: err instanceof OutputFilesError });
    process.exitCode = 1;
  },
);
