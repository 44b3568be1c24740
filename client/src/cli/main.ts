#!/usr/bin/env node
/**
 * The `gf` command. Only the command tree and the argument parser load up front; each command's
 * module (and the SDK, viem, yaml and TOML with it) is imported when that command runs, so
 * `gf --version` and `gf --help` start fast.
 */
import { runCli } from './program.js';

process.exitCode = await runCli(process.argv.slice(2));
