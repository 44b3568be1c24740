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

const code = await runCli(process.argv.slice(2));
// Exit here, once what was written has been handed to the OS, rather than by letting the process
// run down: Node's teardown can spin forever running FinalizationRegistry cleanups (the HTTP
// client registers them; nodejs/node#47748), which was seen as a `gf login` at 100% CPU that never
// exited, about one run in fifty on Node 20.11. process.exit skips that teardown.
await Promise.all([process.stdout, process.stderr].map((stream) => new Promise<void>((resolve) => stream.write('', () => resolve()))));
process.exit(code);
