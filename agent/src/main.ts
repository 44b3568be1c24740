#!/usr/bin/env node
import { buildProgram } from './cli/program.js';

/** `gf-agent`: the farm agent's command line (see `gf-agent --help`). */
await buildProgram().parseAsync(process.argv);
