#!/usr/bin/env node
/**
 * The `gf` command. Only the command tree and the argument parser load up front; each command's
 * module (and the SDK, viem, yaml and TOML with it) is imported when that command runs, so
 * `gf --version` and `gf --help` start fast.
 */
import { runCli } from './program.js';

// A reader that stops early (`gf logs JOB | head`) closes the pipe: gf ends there quietly, with
// no stack trace and with success, so `set -o pipefail` scripts do not fail on it.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(0);
    throw err;
  });
}

process.exitCode = await runCli(process.argv.slice(2));
